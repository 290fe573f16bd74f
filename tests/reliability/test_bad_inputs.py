"""Reliability cases 2 and 8 of issue 16, reproduced from the public API."""

import numpy as np
import pytest

import validation
from samplers import (AustereTest, BarkerTest, ExactTest, GaussianMean, LinearRegression,
                      RandomWalk, sample, sample_chains)

X = np.random.default_rng(0).normal(1.0, 1.0, 2_000)


class Unit:
    """x_i ~ N(theta[0], 1), flat prior: the README's model (no ``dim``)."""

    def __init__(self, x, N=None):
        self.x, self.N = x, len(x) if N is None else N

    def loglik(self, theta, idx):
        return -0.5 * (self.x[idx] - theta[0]) ** 2

    def logprior(self, theta):
        return 0.0


# --- case 2: a +inf log-likelihood is refused where it appears --------------------------------


class PlusInfAbove(Unit):
    """log-likelihood +inf on every row once theta > 1.05 (a defective model)."""

    def loglik(self, theta, idx):
        ll = super().loglik(theta, idx)
        return np.full_like(ll, np.inf) if theta[0] > 1.05 else ll


@pytest.mark.parametrize("test", [ExactTest(), AustereTest(m=200), BarkerTest(m=200)],
                         ids=["exact", "austere", "barker"])
def test_plus_inf_loglik_is_refused_naming_the_point(test):
    with pytest.raises(ValueError, match=r"\+inf at theta_new=\[1\.0[5-9]") as info:
        sample(PlusInfAbove(X), test, RandomWalk(0.05), [1.0], 2_000, rng=0)
    # the chain never moved onto the point: the partial chain stays below it
    assert info.value.partial_chain is None or info.value.partial_chain.samples.max() <= 1.05


def test_minus_inf_loglik_still_rejects():
    class MinusInfAbove(Unit):
        def loglik(self, theta, idx):
            ll = super().loglik(theta, idx)
            return np.full_like(ll, -np.inf) if theta[0] > 1.05 else ll

    chain = sample(MinusInfAbove(X), ExactTest(), RandomWalk(0.05), [1.0], 300, rng=0)
    assert chain.samples.max() <= 1.05


# --- case 8 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [True, False, np.bool_(True)])
def test_n_samples_true_is_refused(n):
    with pytest.raises(TypeError, match=r"n_samples must be an integer, got (np\.)?(True|False)"):
        sample(GaussianMean(X), ExactTest(), RandomWalk(0.05), [1.0], n)
    with pytest.raises(TypeError, match="n_chains must be an integer"):
        sample_chains(GaussianMean(X), ExactTest(), RandomWalk(0.05), [1.0], 10, n_chains=n)


def test_complex_data_is_refused_not_truncated():
    with pytest.raises(TypeError, match="x must be real, got complex values"):
        GaussianMean(X + 1e-3j)
    with pytest.raises(TypeError, match="y must be real, got complex values"):
        LinearRegression(np.ones((10, 2)), np.ones(10) * (1 + 1j))
    with pytest.raises(TypeError, match="l must be real"):
        validation.clt_check(X + 0j, batch_size=100)


def test_array_valued_logprior_is_refused():
    class ArrayPrior(Unit):
        def logprior(self, theta):
            return -0.5 * theta**2      # an array of shape (1,), not a scalar

    with pytest.raises(TypeError, match=r"logprior\(theta\) must return a scalar, got an array "
                                        r"of shape \(1,\)"):
        sample(ArrayPrior(X), ExactTest(), RandomWalk(0.05), [1.0], 10)


def test_theta0_longer_than_the_model_reads_is_refused():
    with pytest.raises(ValueError, match=r"do not depend on element\(s\) \[1, 2\].*`dim`"):
        sample(Unit(X), ExactTest(), RandomWalk(0.05), [1.0, 0.0, 0.0], 10)

    class WithDim(Unit):
        dim = 1

    with pytest.raises(ValueError, match="theta0 must have 1 element"):
        sample(WithDim(X), ExactTest(), RandomWalk(0.05), [1.0, 0.0], 10)


def test_user_N_larger_than_the_data_is_named():
    with pytest.raises(ValueError, match=r"IndexError .* is model.N = 5000 larger than"):
        sample(Unit(X, N=5_000), ExactTest(), RandomWalk(0.05), [1.0], 10)


def test_clt_check_names_the_constant_row():
    rng = np.random.default_rng(1)
    l = rng.normal(size=(3, 1_000))
    l[1] = 0.25
    with pytest.raises(ValueError, match="row 1 of the l_i array: the l_i of a pair are all equal"):
        validation.clt_check(l, batch_size=50, n_sim=2_000, tolerance=0.2, search=False, rng=0)
