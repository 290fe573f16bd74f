"""Issue 27, item 8: the control variates' mode search on an ordinary logistic regression
(covariates N(0, 1/d), coefficients N(0, 0.5^2), prior N(0, 10^2): no separation) agrees with
a plain Newton iteration in NumPy at every dimension, including d > 64 where it used to stop
with "did not converge in 60 Newton steps" (its predicted gain fell below the rounding of the
log posterior, where a line search on values cannot rank points)."""

import numpy as np
import pytest

from samplers import ControlVariates, LogisticRegression
from samplers.priors import GaussianPrior

PRIOR_SD = 10.0


def _data(N, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 1.0 / np.sqrt(d), (N, d))
    beta = rng.normal(0.0, 0.5, d)
    y = (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(float)
    return X, y


def reference_mode(X, y, steps=40):
    """Undamped Newton from 0 on the log posterior, written out in NumPy; returns the last
    iterate and minus the Hessian there."""
    d = X.shape[1]
    theta = np.zeros(d)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(X @ theta)))
        grad = X.T @ (y - p) - theta / PRIOR_SD**2
        neg_hess = (X.T * (p * (1.0 - p))) @ X + np.eye(d) / PRIOR_SD**2
        step = np.linalg.solve(neg_hess, grad)
        theta = theta + step
        if grad @ step < 1e-24:
            break
    return theta, neg_hess


# the seeds of d = 50 and 100 are data sets on which the search used to fail
@pytest.mark.parametrize("d, N, seed", [(2, 20_000, 0), (11, 20_000, 0), (50, 20_000, 0),
                                        (100, 20_000, 1), (300, 3_000, 0)])
def test_mode_search_matches_a_reference_newton(d, N, seed):
    X, y = _data(N, d, seed)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, PRIOR_SD)))
    mode, neg_hess = reference_mode(X, y)
    assert cv.center.method == "newton"
    # the search stops once the Newton decrement g'(-H)^-1 g, the squared distance to the mode
    # in posterior sds (delta' (-H) delta), is below DECREMENT_TOL = 1e-12
    delta = cv.center.theta - mode
    assert np.sqrt(delta @ neg_hess @ delta) < 1.5e-6
    assert cv.center.n_passes <= 15
