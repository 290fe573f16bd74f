"""Firefly Monte Carlo: exactness against exact MH, accounting, determinism, bad input.

Exactness: on a logistic regression small enough for exact MH (N = 2000, d = 5) and on a
robust regression (N = 500, d = 3), every Firefly configuration's posterior mean and
covariance must match an exact-MH chain's within 4.5 Monte Carlo standard errors of the
difference, the standard errors from ArviZ's ESS-based MCSE of each chain (the covariance
entries as means of the centred products). Seeds are fixed, so the test is deterministic;
a priori, a false failure over the ~130 checks below is less likely than 1e-3.
"""

import math
import warnings

import numpy as np
import pytest

from samplers import (
    ExactTest,
    ExplicitZ,
    GaussianPrior,
    ImplicitZ,
    JaakkolaJordanBound,
    LaplacePrior,
    Langevin,
    LogisticRegression,
    RandomWalk,
    SGLD,
    RobustRegression,
    Slice,
    StudentTBound,
    firefly,
    map_estimate,
    sample,
)
from samplers.datasets import logistic_regression

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

# --- the two targets ----------------------------------------------------------------------

X_LR, Y_LR, _ = logistic_regression(2000, 4, rng=2014, scale=3.0)
LR = LogisticRegression(X_LR, Y_LR, prior=GaussianPrior(0.0, 5.0))
LR_MODE = map_estimate(LR, n_steps=200, batch_size=500, rng=0)
_p = 1 / (1 + np.exp(-X_LR @ LR_MODE))
LR_COV = np.linalg.inv((X_LR * (_p * (1 - _p))[:, None]).T @ X_LR + np.eye(5) / 25)
LR_UNTUNED = JaakkolaJordanBound(LR, xi=1.5)
LR_TUNED = JaakkolaJordanBound.map_tuned(LR, LR_MODE)

_rng = np.random.default_rng(43)
X_RR = np.column_stack([_rng.normal(size=(500, 2)), np.ones(500)])
Y_RR = X_RR @ [1.0, -0.5, 0.3] + 0.5 * _rng.standard_t(4.0, 500)
RR = RobustRegression(X_RR, Y_RR, df=4.0, scale=0.5, prior=LaplacePrior(0.0, 2.0))
RR_MODE = map_estimate(RR, n_steps=200, batch_size=250, rng=0)
RR_TUNED = StudentTBound.map_tuned(RR, RR_MODE)
RR_SD = 0.5 / math.sqrt(500)  # about the posterior sd of each coefficient

# exact MH with a random walk shaped like the posterior (Gelman-Roberts-Gilks scaling)
EXACT = {
    "logistic": lambda: sample(LR, ExactTest(), RandomWalk(2.38**2 / 5 * LR_COV), LR_MODE,
                               16_000, rng=1),
    "robust": lambda: sample(RR, ExactTest(), RandomWalk(1.5 * RR_SD), RR_MODE, 12_000, rng=2),
}
_exact_cache = {}


def exact_chain(name):
    if name not in _exact_cache:
        _exact_cache[name] = EXACT[name]()
    return _exact_cache[name]


def posterior_moments(chain):
    """Mean and covariance entries of the chain, each with its ESS-based MCSE."""
    s = chain.samples
    centred = s - s.mean(axis=0)
    iu = np.triu_indices(s.shape[1])
    products = centred[:, iu[0]] * centred[:, iu[1]]
    series = np.concatenate([s, products], axis=1)
    estimates = series.mean(axis=0)
    mcse = az.mcse(az.convert_to_dataset(series[None]), method="mean").x.values
    return estimates, mcse


def assert_same_posterior(chain, reference, k=4.5):
    est, se = posterior_moments(chain)
    ref, ref_se = posterior_moments(reference)
    z = (est - ref) / np.sqrt(se**2 + ref_se**2)
    assert np.all(np.abs(z) < k), np.round(z, 2)


# --- exactness ----------------------------------------------------------------------------

# name: (target, bound, theta-update, z-update, iterations)
CONFIGS = {
    "untuned-rw-implicit": ("logistic", LR_UNTUNED, RandomWalk(0.35 * LR_COV), ImplicitZ(0.3),
                            12_000),
    "tuned-rw-implicit": ("logistic", LR_TUNED, RandomWalk(2.38**2 / 5 * LR_COV), ImplicitZ(0.02),
                          16_000),
    "tuned-mala-implicit-qbd": ("logistic", LR_TUNED, Langevin(0.3 * float(np.mean(np.diag(LR_COV)))),
                                ImplicitZ(0.05, q_bd=0.5), 12_000),
    "untuned-slice-explicit": ("logistic", LR_UNTUNED, Slice(2.0 * np.sqrt(np.diag(LR_COV))),
                               ExplicitZ(0.25), 5_000),
    "robust-tuned-slice-implicit": ("robust", RR_TUNED, Slice(3 * RR_SD), ImplicitZ(0.05), 6_000),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_firefly_matches_exact_mh(name):
    target, bound, theta_update, z_update, n = CONFIGS[name]
    model = bound.model
    start = LR_MODE if target == "logistic" else RR_MODE
    chain = firefly(model, bound, theta_update, start, n, rng=11, z_update=z_update)
    assert_same_posterior(chain, exact_chain(target))
    # the point of it: far fewer likelihood queries than the N of exact MH
    assert chain.stats["n_used"].mean() < 0.9 * model.N * max(1, chain.stats["n_evals"].mean())
    assert chain.stats["n_bright"].min() >= 0 and chain.stats["n_bright"].max() < model.N


def test_firefly_queries_a_few_percent_with_tuned_bounds():
    chain = firefly(LR, LR_TUNED, RandomWalk(2.38**2 / 5 * LR_COV), LR_MODE, 2000, rng=5,
                    z_update=ImplicitZ(0.02))
    burned = chain.stats["n_used"][200:]
    assert burned.mean() < 0.05 * LR.N
    assert abs(burned.mean() - (chain.stats["n_bright"][200:].mean() + 0.02 * LR.N)) < 0.02 * LR.N


# --- determinism and the two paths --------------------------------------------------------


class PlainModel:
    """A built-in model seen through the plain protocol (no kernels); counts the rows read."""

    def __init__(self, model):
        self.model, self.N, self.dim = model, model.N, model.dim
        self.rows = self.grad_rows = 0

    def loglik(self, theta, idx):
        self.rows += len(idx)
        return self.model.loglik(theta, idx)

    def grad_loglik(self, theta, idx):
        self.grad_rows += len(idx)
        return self.model.grad_loglik(theta, idx)

    def logprior(self, theta):
        return self.model.logprior(theta)

    def grad_logprior(self, theta):
        return self.model.grad_logprior(theta)


class PlainBound:
    """A built-in bound seen through the plain protocol."""

    def __init__(self, bound, shift=lambda theta: 0.0):
        self.bound, self.N, self.shift = bound, bound.N, shift

    def log_bound(self, theta, idx):
        return self.bound.log_bound(theta, idx) + self.shift(theta)

    def log_bound_sum(self, theta):
        return self.bound.log_bound_sum(theta) + self.N * self.shift(theta)

    def grad_log_bound(self, theta, idx):
        return self.bound.grad_log_bound(theta, idx)

    def grad_log_bound_sum(self, theta):
        return self.bound.grad_log_bound_sum(theta)


PATHS = [
    (RandomWalk(0.3 * LR_COV), ImplicitZ(0.1)),
    (Langevin(0.3 * float(np.mean(np.diag(LR_COV)))), ImplicitZ(0.1, q_bd=0.7)),
    (Slice(np.sqrt(np.diag(LR_COV))), ExplicitZ(0.1)),
]


@pytest.mark.parametrize("theta_update, z_update", PATHS, ids=["rw", "mala", "slice"])
def test_equal_seeds_identical_and_python_path_bit_identical(theta_update, z_update):
    runs = [firefly(model, bound, theta_update, LR_MODE, 150, rng=77, z_update=z_update)
            for model, bound in [(LR, LR_UNTUNED), (LR, LR_UNTUNED),
                                 (PlainModel(LR), PlainBound(LR_UNTUNED))]]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.samples, runs[0].samples)
        for key in runs[0].stats:
            np.testing.assert_array_equal(other.stats[key], runs[0].stats[key])
    different = firefly(LR, LR_UNTUNED, theta_update, LR_MODE, 150, rng=78, z_update=z_update)
    assert not np.array_equal(different.samples, runs[0].samples)


@pytest.mark.parametrize("theta_update, z_update", PATHS, ids=["rw", "mala", "slice"])
def test_recorded_queries_are_the_rows_read(theta_update, z_update):
    # the first iteration of equal-seed chains agree; what 60 more read is in their stats
    counts = []
    for n in (1, 61):
        model = PlainModel(LR)
        chain = firefly(model, PlainBound(LR_UNTUNED), theta_update, LR_MODE, n, rng=3,
                        z_update=z_update)
        counts.append((model.rows, model.grad_rows))
    assert counts[1][0] - counts[0][0] == chain.stats["n_used"][1:].sum()
    assert counts[1][1] - counts[0][1] == chain.stats["n_grad"][1:].sum()


# --- output -------------------------------------------------------------------------------


def test_chain_output_and_callers_arrays_untouched():
    theta0 = LR_MODE.copy()
    X_before = X_LR.copy()
    chain = firefly(LR, LR_TUNED, RandomWalk(0.3 * LR_COV), theta0, 300, rng=0)
    np.testing.assert_array_equal(theta0, LR_MODE)
    np.testing.assert_array_equal(X_LR, X_before)
    assert set(chain.stats) == {"accepted", "n_bright", "n_used", "n_grad", "n_evals",
                                "n_brightened", "n_darkened"}
    assert chain.stats["accepted"].dtype == bool and chain.stats["n_bright"].dtype.kind == "i"
    moved = np.r_[True, np.any(np.diff(chain.samples, axis=0) != 0, axis=1)]
    np.testing.assert_array_equal(moved[1:], chain.stats["accepted"][1:])
    # the bright count changes by exactly the flips of the z-update
    net = chain.stats["n_brightened"] - chain.stats["n_darkened"]
    np.testing.assert_array_equal(np.diff(chain.stats["n_bright"]), net[1:])
    assert "ImplicitZ" in str(chain) and 0 < chain.mean_data_fraction < 0.2
    assert chain.to_arviz().sample_stats["n_bright"].shape == (1, 300)


# --- bad input ------------------------------------------------------------------------------


def test_a_bound_above_the_likelihood_at_the_start_is_refused():
    high = PlainBound(LR_TUNED, shift=lambda theta: 1e-3)
    with pytest.raises(ValueError, match=r"the bound exceeds the likelihood: log B_n = .* for row"):
        firefly(LR, high, RandomWalk(0.1), LR_MODE, 10, rng=0)


def test_a_bound_above_the_likelihood_away_from_the_start_stops_the_chain():
    # consistent in its collapsed sum, below the likelihood near the mode, above it beyond
    # theta[0] = mode + 0.3, where the chain's large random-walk steps soon go
    cut = LR_MODE[0] + 0.3
    bad = PlainBound(LR_UNTUNED, shift=lambda theta: 50.0 * max(0.0, theta[0] - cut))
    with pytest.raises(ValueError, match="the bound exceeds the likelihood"):
        firefly(LR, bad, RandomWalk(0.5), LR_MODE, 2000, rng=0, z_update=ImplicitZ(0.5))


def test_a_collapsed_sum_that_disagrees_with_its_rows_is_refused():
    class Inconsistent(PlainBound):
        def log_bound_sum(self, theta):
            return self.bound.log_bound_sum(theta) + 0.1 * theta[1]

    with pytest.raises(ValueError, match="log_bound_sum does not match the sum of bound.log_bound"):
        firefly(LR, Inconsistent(LR_UNTUNED), RandomWalk(0.1), LR_MODE, 10, rng=0)


class NoGradBound:
    N = LR.N

    def log_bound(self, theta, idx):
        return LR_UNTUNED.log_bound(theta, idx)

    def log_bound_sum(self, theta):
        return LR_UNTUNED.log_bound_sum(theta)


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((LR, LR_TUNED, "rw", LR_MODE, 5), {}, TypeError,
         "theta_update must be a Proposal .* or a Slice, got str"),
        ((LR, LR_TUNED, RandomWalk(0.1), LR_MODE, 5), {"z_update": ExactTest()}, TypeError,
         "z_update must be ImplicitZ or ExplicitZ, got ExactTest"),
        ((LR, object(), RandomWalk(0.1), LR_MODE, 5), {}, TypeError,
         r"bound must have a callable log_bound"),
        ((LR, RR_TUNED, RandomWalk(0.1), LR_MODE, 5), {}, ValueError, r"bound.N must equal model.N"),
        ((LogisticRegression(X_LR, Y_LR), LR_TUNED, RandomWalk(0.1), LR_MODE, 5), {}, ValueError,
         "bound was built for another model"),
        ((LR, LR_TUNED, SGLD(1e-3, batch_size=100), LR_MODE, 5), {}, TypeError,
         "needs a proposal with a reverse density and no step-size schedule, got SGLD"),
        ((LR, LR_TUNED, Langevin(1e-3, batch_size=100), LR_MODE, 5), {}, ValueError,
         "batch_size must be None, got 100"),
        ((LR, NoGradBound(), Langevin(1e-3), LR_MODE, 5), {}, TypeError,
         "Langevin needs model.grad_loglik, model.grad_logprior, bound.grad_log_bound"),
        ((LR, LR_TUNED, RandomWalk([0.1, 0.1]), LR_MODE, 5), {}, ValueError,
         "scale has 2 coordinate"),
        ((LR, LR_TUNED, Slice([0.1, 0.1]), LR_MODE, 5), {}, ValueError, "scale has 2 coordinate"),
        ((LR, LR_TUNED, RandomWalk(0.1), LR_MODE, 0), {}, ValueError, "n_samples must be >= 1"),
        ((LR, LR_TUNED, RandomWalk(0.1), LR_MODE[:3], 5), {}, ValueError,
         "theta0 must have 5 element"),
        ((LR, LR_TUNED, RandomWalk(0.1), LR_MODE, 5), {"rng": "seed"}, TypeError, "rng must be"),
    ],
)
def test_bad_firefly_calls(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        firefly(*args, **kwargs)


def test_bad_slice_settings():
    with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
        Slice(1.0, max_steps=0)
    with pytest.raises(ValueError, match="scale must be > 0"):
        Slice(-1.0)
