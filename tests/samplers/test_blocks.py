"""The compiled chain loops (samplers/_blocks.py) against the Python loop they replace.

Equal seeds must give bit-identical chains on both loops (samples and every recorded info),
whatever the block sizes; the compiled pieces (priors, random-walk move, NumPy's pairwise
sum) must give the bits of the Python code they copy; a Ctrl-C keeps the completed blocks.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from samplers import (
    SGLD,
    AcceptAll,
    AustereTest,
    BarkerTest,
    ConfidenceTest,
    ExactTest,
    FPCNormalTest,
    ChainInterrupted,
    FlatPrior,
    GaussianMean,
    GaussianPrior,
    LaplacePrior,
    LinearRegression,
    LogisticRegression,
    PolynomialDecay,
    RandomWalk,
    sample,
)
from design._lib.jit import jit
from samplers import _chain
from samplers.datasets import logistic_regression
from samplers.priors import pairwise_sum, prior_grad, prior_logpdf
from samplers.proposals import walk_move


def assert_same_chain(a, b):
    assert a.samples.shape == b.samples.shape
    assert np.array_equal(a.samples, b.samples)
    assert sorted(a.stats) == sorted(b.stats)
    for name in a.stats:
        assert a.stats[name].dtype == b.stats[name].dtype, name
        assert np.array_equal(a.stats[name], b.stats[name], equal_nan=True), name


# --- compiled pieces against the Python code they copy --------------------------------------


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    for n in list(range(0, 300)) + [511, 1000, 4097]:
        a = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, size=n)
        assert pairwise_sum(a) == np.sum(a), n


@pytest.mark.parametrize("make", [
    lambda d, rng: FlatPrior(),
    lambda d, rng: GaussianPrior(rng.normal(size=d), rng.uniform(0.1, 3.0, size=d)),
    lambda d, rng: GaussianPrior(0.5, 2.0),
    lambda d, rng: LaplacePrior(rng.normal(size=d), rng.uniform(0.1, 3.0, size=d)),
])
def test_prior_kernels_match_logpdf_and_grad(make):
    rng = np.random.default_rng(1)
    for d in (1, 2, 7, 8, 9, 17, 64, 200):
        prior = make(d, rng).bind(d)
        code, a, b, const = prior._kernel()
        for _ in range(20):
            theta = rng.normal(size=d) * 3.0
            assert prior_logpdf(code, a, b, const, theta) == prior.logpdf(theta)
            out = np.empty(d)
            prior_grad(code, a, b, const, theta, out)
            assert np.array_equal(out, prior.grad(theta))


def test_prior_subclass_has_no_kernel():
    class Shifted(GaussianPrior):
        def logpdf(self, theta):
            return super().logpdf(theta) + 1.0

    bound = GaussianPrior(0.0, 1.0).bind(2)
    assert Shifted(bound.mean, bound.sd, bound._d, bound._log_norm)._kernel() is None
    assert GaussianPrior()._kernel() is None   # not bound to a dimension


@pytest.mark.parametrize("scale", [0.3, [0.1, 0.2, 0.5], [[1.0, 0.3, 0.0], [0.3, 2.0, 0.1],
                                                          [0.0, 0.1, 0.5]]])
def test_walk_move_matches_random_walk(scale):
    walk = RandomWalk(scale)
    diag, chol = walk._kernel(3)
    for seed in range(20):
        theta = np.random.default_rng(100 + seed).normal(size=3)
        expected = walk.propose(np.random.default_rng(seed), None, None, theta, None)[0]
        out = np.empty(3)
        walk_move(theta, diag, chol, np.random.default_rng(seed).standard_normal(3), out)
        assert np.array_equal(out, expected)


# --- SGLD -------------------------------------------------------------------------------------


@contextmanager
def _ctrl_c_after(seconds, again=10.0, most=6):
    """Press Ctrl-C (SIGINT to this process) ``seconds`` into the block, as a user would.

    If the block is still running ``again`` seconds later, press it again (at most ``most``
    times in all): CPython can drop a KeyboardInterrupt when its handler happens to run
    inside a finaliser (``__del__``, a weakref callback) of some earlier object, and a user
    would press Ctrl-C again; a dropped press then costs seconds, not a hung run (the tests
    also run without gc callbacks: the ``no_gc_callbacks`` fixture). A chain
    that honours Ctrl-C returns within a fraction of a second, well before a second press.
    """
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, (
        "SIGINT's handler is not Python's default at the start of this test: an earlier "
        f"test left {signal.getsignal(signal.SIGINT)!r} installed")
    done = threading.Event()

    def press():
        wait = seconds
        for _ in range(most):
            if done.wait(wait):
                return
            os.kill(os.getpid(), signal.SIGINT)
            wait = again

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    try:
        yield
    finally:
        done.set()
        presser.join()


def _logistic(N=5000, d=3, prior=None):
    X, y, theta = logistic_regression(N, d, rng=3)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 5.0) if prior is None else prior), theta


@pytest.mark.parametrize("case", ["constant", "decay", "temperature", "laplace", "flat",
                                  "mean", "linear"])
def test_sgld_compiled_equals_python(case):
    model, theta0 = _logistic()
    proposal = SGLD(1e-4, 100)
    if case == "decay":
        proposal = SGLD(PolynomialDecay(a=1e-3, b=10.0, gamma=0.55), 50)
    elif case == "temperature":
        proposal = SGLD(1e-4, 64, temperature=3.0)
    elif case == "laplace":
        model, theta0 = _logistic(prior=LaplacePrior(0.1, [1.0, 2.0, 0.5, 3.0]))
    elif case == "flat":
        model, theta0 = _logistic(prior=FlatPrior())
    elif case == "mean":
        model = GaussianMean(np.random.default_rng(4).normal(1.0, 2.0, 3000),
                             prior=GaussianPrior(0.0, 3.0))
        theta0, proposal = np.array([0.5]), SGLD(1e-3, 30)
    elif case == "linear":
        rng = np.random.default_rng(5)
        X = rng.normal(size=(4000, 4))
        model = LinearRegression(X, X @ [1.0, -1.0, 0.5, 0.0] + rng.normal(size=4000),
                                 prior=GaussianPrior(0.0, 10.0))
        theta0, proposal = np.zeros(4), SGLD(2e-5, 40)
    python = sample(model, AcceptAll(), proposal, theta0, 400, rng=11, compiled=False)
    compiled = sample(model, AcceptAll(), proposal, theta0, 400, rng=11, compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["n_grad"][0] == proposal.batch_size


def test_block_sizes_do_not_change_the_chain(monkeypatch):
    model, theta0 = _logistic()
    default = sample(model, AcceptAll(), SGLD(1e-4, 100), theta0, 300, rng=12, compiled=True)
    monkeypatch.setattr(_chain, "FIRST_BLOCK", 1)
    monkeypatch.setattr(_chain, "BLOCK_SECONDS", 0.0)   # every block one step
    single = sample(model, AcceptAll(), SGLD(1e-4, 100), theta0, 300, rng=12, compiled=True)
    assert_same_chain(default, single)


def test_compiled_true_refuses_a_chain_without_a_compiled_loop():
    class UserModel:
        N = 100

        def loglik(self, theta, idx):
            return -0.5 * (theta[0] - np.asarray(idx) / 100.0) ** 2

        def grad_loglik(self, theta, idx):
            return (np.asarray(idx) / 100.0 - theta[0]).reshape(-1, 1)

        def logprior(self, theta):
            return 0.0

        def grad_logprior(self, theta):
            return np.zeros(1)

    with pytest.raises(TypeError, match="no compiled chain loop for UserModel"):
        sample(UserModel(), AcceptAll(), SGLD(1e-3, 10), [0.0], 10, rng=0, compiled=True)
    chain = sample(UserModel(), AcceptAll(), SGLD(1e-3, 10), [0.0], 10, rng=0)  # Python loop
    assert chain.samples.shape == (10, 1)


def test_ctrl_c_keeps_the_completed_blocks(no_gc_callbacks):
    model, theta0 = _logistic(N=20_000, d=5)
    sample(model, AcceptAll(), SGLD(1e-5, 100), theta0, 5, rng=0, compiled=True)  # compiled
    n = 5_000_000   # minutes of work: the interrupt comes first
    with (_ctrl_c_after(1.0),
          pytest.warns(ChainInterrupted, match=rf"interrupted after \d+ of {n} steps")):
        partial = sample(model, AcceptAll(), SGLD(1e-5, 100), theta0, n, rng=13,
                         compiled=True)
    done = partial.samples.shape[0]
    assert 0 < done < n
    assert all(v.shape[0] == done for v in partial.stats.values())
    full = sample(model, AcceptAll(), SGLD(1e-5, 100), theta0, done, rng=13, compiled=True)
    assert_same_chain(partial, full)


def test_row_sums_is_numpys_sum_over_rows():
    from samplers._blocks import row_sums

    rng = np.random.default_rng(6)
    for n in (1, 2, 7, 8, 9, 100, 129, 300):
        for d in (1, 2, 3, 11):
            g = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-6, 6, size=(n, d))
            acc = np.empty(d)
            row_sums(g, acc)
            assert np.array_equal(acc, g.sum(axis=0)), (n, d)


@pytest.mark.parametrize("covariance", [None, [[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0.0, 0.1, 0.5]]])
def test_langevin_kernels_match_the_proposal(covariance):
    from samplers import Langevin
    from samplers.proposals import langevin_log_q, langevin_move

    mala = Langevin(0.05, batch_size=10, covariance=covariance)
    h, chol = mala._kernel()
    rng = np.random.default_rng(7)
    for seed in range(30):
        theta, grad, other = rng.normal(size=(3, 3)) * 2.0
        expected = mala._move(np.random.default_rng(seed), theta, grad)
        if covariance is None:   # propose() writes the unpreconditioned move inline
            z = np.random.default_rng(seed).standard_normal(3)
            assert np.array_equal(expected, theta + 0.5 * h * grad + np.sqrt(h) * z)
        out = np.empty(3)
        langevin_move(theta, grad, h, chol, np.random.default_rng(seed).standard_normal(3), out)
        assert np.array_equal(out, expected)
        assert langevin_log_q(other, theta, grad, h, chol) == mala._log_q(other, theta, grad)


# --- Metropolis-Hastings ------------------------------------------------------------------------


MH_CASES = {
    "fpc-normal": lambda: (FPCNormalTest(m=100, epsilon=0.05), RandomWalk(0.01)),
    "barker": lambda: (BarkerTest(m=100), RandomWalk(0.01)),
    "barker-nodelta": lambda: (BarkerTest(m=50, delta=None), RandomWalk(0.01)),
    "barker-skew": lambda: (BarkerTest(m=80, delta=None, skew=True), RandomWalk(0.01)),
    "barker-presized": lambda: (BarkerTest(m=50, delta=None, stopping="presized"),
                                RandomWalk(0.01)),
    "barker-presized-skew": lambda: (BarkerTest(m=40, delta=None, stopping="presized",
                                                skew=True, fpc=False, margin=2.0),
                                     RandomWalk([0.01, 0.02, 0.01, 0.005])),
    "exact": lambda: (ExactTest(), RandomWalk(0.03)),
    "confidence-bs": lambda: (ConfidenceTest(delta=0.1, batch_size=50), RandomWalk(0.01)),
    "confidence-hoeffding": lambda: (ConfidenceTest(delta=0.1, bound="hoeffding", gamma=1.5),
                                     RandomWalk([0.01, 0.02, 0.01, 0.005])),
    "confidence-full-data": lambda: (ConfidenceTest(delta=0.1, bound="bernstein",
                                                    range="full-data"), RandomWalk(0.01)),
    "austere-t": lambda: (AustereTest(m=100, epsilon=0.05), RandomWalk(0.01)),
    "austere-normal": lambda: (AustereTest(m=50, epsilon=0.2, threshold="normal"),
                               RandomWalk([0.01, 0.02, 0.01, 0.005])),
    # more stages than the first table of critical values: the block returns for more
    "austere-more-thresholds": lambda: (AustereTest(m=2, epsilon=0.001),
                                        RandomWalk(np.diag([1e-4, 4e-4, 1e-4, 1e-4]))),
}


@pytest.mark.parametrize("name", sorted(MH_CASES))
def test_mh_compiled_equals_python(name):
    test, walk = MH_CASES[name]()
    model, theta0 = _logistic(N=10_000, d=3)
    steps = 300 if name == "austere-more-thresholds" else 1000
    python = sample(model, test, walk, theta0, steps, rng=14, compiled=False)
    compiled = sample(model, test, walk, theta0, steps, rng=14, compiled=True)
    assert_same_chain(python, compiled)
    assert 0.1 < compiled.acceptance_rate < 0.9
    if name == "austere-more-thresholds":
        assert compiled.stats["n_stages"].max() > 4096


@pytest.mark.parametrize("covariance", [None, "laplace"])
def test_mh_minibatch_langevin_compiled_equals_python(covariance):
    from samplers import Langevin

    model, theta0 = _logistic(N=10_000, d=3)
    cov = None if covariance is None else np.diag([2e-3, 1e-3, 3e-3, 1e-3])
    mala = Langevin(5e-5 if cov is None else 0.05, batch_size=200, covariance=cov)
    test = AustereTest(m=100, epsilon=0.05)
    python = sample(model, test, mala, theta0, 500, rng=15, compiled=False)
    compiled = sample(model, test, mala, theta0, 500, rng=15, compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["n_grad"][0] == 400
    assert 0.05 < compiled.acceptance_rate < 0.95


def test_exact_test_on_more_than_one_chunk_takes_the_python_loop():
    from samplers._view import FULL_CHUNK

    model = GaussianMean(np.random.default_rng(8).normal(size=FULL_CHUNK + 1))
    with pytest.raises(TypeError, match="no compiled chain loop"):
        sample(model, ExactTest(), RandomWalk(0.01), [0.0], 3, rng=0, compiled=True)


# --- control variates and the independence proposal --------------------------------------------


def _cv_models():
    """Control-variate wrappers of each GLM kind, orders 1 and 2."""
    from samplers import ControlVariates, RobustRegression

    logistic, _ = _logistic(N=3000, d=10)
    rng = np.random.default_rng(9)
    X = np.column_stack([np.ones(2000), rng.normal(size=(2000, 2))])
    y = X @ [0.5, -1.0, 2.0] + rng.standard_t(4, size=2000)
    mean = GaussianMean(rng.normal(1.0, 2.0, 1500), sigma=2.0, prior=GaussianPrior(0.0, 3.0))
    return [ControlVariates(m, order=order)
            for m in (logistic, LinearRegression(X, y, prior=GaussianPrior(0.0, 10.0)),
                      RobustRegression(X, y, df=4.0, prior=GaussianPrior(0.0, 10.0)), mean)
            for order in (1, 2)]


def test_proxy_kernels_match_the_wrapper():
    from samplers.models.control_variates import (
        cv_batch_grad,
        cv_decision_data,
        proxy_total_kernel,
    )

    rng = np.random.default_rng(10)
    for cv in _cv_models():
        rows, g, H, N = cv._block_data()
        grads = cv_batch_grad(cv._row_grad, cv._row_prefetch)
        sd = np.sqrt(np.diag(cv.laplace_covariance()))
        for _ in range(20):
            theta = cv.center.theta + sd * rng.normal(size=cv.dim)
            theta_new = theta + 0.3 * sd * rng.normal(size=cv.dim)
            P = proxy_total_kernel(g, H, rows[1], rows[2], theta, theta_new)
            assert P == cv.proxy_total(theta, theta_new), cv
            data = cv_decision_data(cv._kernels[4])(cv._block_data(), theta, theta_new)
            expected = cv._decision_data(theta, theta_new)
            assert data[3] == expected[3] and data[2] == expected[2], cv
            assert data[4] == expected[4], cv
            idx = rng.choice(cv.N, size=37, replace=False)
            out = np.empty((37, cv.dim))
            grads(cv._block_data(), idx, theta, out)
            assert np.array_equal(out, cv._grad_loglik(theta, idx)), cv


def test_gaussian_log_density_matches_independence():
    from samplers import Independence
    from samplers.proposals import gaussian_log_density

    rng = np.random.default_rng(11)
    for d in (1, 3, 11):
        A = rng.normal(size=(d, d))
        q = Independence(rng.normal(size=d), A @ A.T + d * np.eye(d))
        mean, factor, inverse = q._kernel()
        for seed in range(20):
            x = rng.normal(size=d) * 3.0
            assert gaussian_log_density(x, mean, inverse) == q.log_density(x)
            z = np.random.default_rng(seed).standard_normal(d)
            out = np.empty(d)
            walk_move(mean, np.empty(0), factor, z, out)
            expected = q.propose(np.random.default_rng(seed), None, None, x, None)[0]
            assert np.array_equal(out, expected)


def _cv_logistic(order=2, N=20_000):
    from samplers import ControlVariates

    model, _ = _logistic(N=N, d=10)
    return ControlVariates(model, order=order)


CV_PROPOSALS = {
    "walk": lambda cv: RandomWalk.from_laplace(cv),
    "walk-diag": lambda cv: RandomWalk(0.5 * np.sqrt(np.diag(cv.laplace_covariance()))),
    "independence": lambda cv: __import__("samplers").Independence.from_laplace(cv, scale=1.2),
    "langevin": lambda cv: __import__("samplers").Langevin.from_laplace(cv, batch_size=50),
}
CV_TESTS = {
    "austere": lambda: AustereTest(m=50, epsilon=0.05),
    "barker": lambda: BarkerTest(m=100),
    "fpc-normal": lambda: FPCNormalTest(m=50, epsilon=0.05),
    "exact": lambda: ExactTest(),
}


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("proposal", sorted(CV_PROPOSALS))
def test_cv_austere_compiled_equals_python(order, proposal):
    cv = _cv_logistic(order)
    prop = CV_PROPOSALS[proposal](cv)
    test = AustereTest(m=50, epsilon=0.05)
    python = sample(cv, test, prop, cv.center.theta, 400, rng=16, compiled=False)
    compiled = sample(cv, test, prop, cv.center.theta, 400, rng=16, compiled=True)
    assert_same_chain(python, compiled)
    assert 0.1 < compiled.acceptance_rate < 0.995


@pytest.mark.parametrize("name", ["barker", "fpc-normal", "exact"])
@pytest.mark.parametrize("proposal", ["walk", "independence"])
def test_cv_tests_compiled_equal_python(name, proposal):
    cv = _cv_logistic(2, N=8000)
    prop = CV_PROPOSALS[proposal](cv)
    python = sample(cv, CV_TESTS[name](), prop, cv.center.theta, 300, rng=17, compiled=False)
    compiled = sample(cv, CV_TESTS[name](), prop, cv.center.theta, 300, rng=17, compiled=True)
    assert_same_chain(python, compiled)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("range_", ["model", "full-data"])
@pytest.mark.parametrize("proposal", ["walk", "independence"])
def test_cv_confidence_compiled_equals_python(order, range_, proposal):
    # range="model": (P / N, B) from the wrapper's jitted _ratio_range inside the step
    cv = _cv_logistic(order)
    prop = CV_PROPOSALS[proposal](cv)
    test = ConfidenceTest(delta=0.1, bound="bernstein" if range_ == "full-data" else
                          "bernstein-serfling", range=range_)
    python = sample(cv, test, prop, cv.center.theta, 300, rng=26, compiled=False)
    compiled = sample(cv, test, prop, cv.center.theta, 300, rng=26, compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["n_used"].min() < cv.N and 0.1 < compiled.acceptance_rate < 0.9


def test_cv_other_glms_compiled_equal_python():
    from samplers import Independence

    for cv in _cv_models()[2:]:   # linear, Student-t, Gaussian mean; orders 1 and 2
        for prop in (RandomWalk.from_laplace(cv), Independence.from_laplace(cv)):
            test = AustereTest(m=40, epsilon=0.1)
            python = sample(cv, test, prop, cv.center.theta, 200, rng=18, compiled=False)
            compiled = sample(cv, test, prop, cv.center.theta, 200, rng=18, compiled=True)
            assert_same_chain(python, compiled)


def test_cv_more_thresholds_and_sgld_compiled_equal_python(monkeypatch):
    cv = _cv_logistic(1)
    # order 1 away from the mode: residuals large enough that the test reads many stages,
    # past the first table of critical values (the block returns for more)
    start = cv.center.theta + 3.0 * np.sqrt(np.diag(cv.laplace_covariance()))
    test = AustereTest(m=2, epsilon=1e-4)
    walk = RandomWalk.from_laplace(cv, scale=0.5)
    monkeypatch.setattr(_chain, "FIRST_BLOCK", 7)
    python = sample(cv, test, walk, start, 60, rng=19, compiled=False)
    compiled = sample(cv, test, walk, start, 60, rng=19, compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["n_stages"].max() > 4096
    python = sample(cv, AcceptAll(), SGLD(1e-5, 50), start, 200, rng=20, compiled=False)
    compiled = sample(cv, AcceptAll(), SGLD(1e-5, 50), start, 200, rng=20, compiled=True)
    assert_same_chain(python, compiled)


def test_cv_ctrl_c_keeps_the_completed_blocks(no_gc_callbacks):
    from samplers import Independence

    cv = _cv_logistic(2, N=20_000)
    q = Independence.from_laplace(cv, scale=1.2)
    test = AustereTest(m=50, epsilon=0.05)
    sample(cv, test, q, cv.center.theta, 5, rng=0, compiled=True)   # compiled
    n = 50_000_000   # minutes of work: the interrupt comes first
    with (_ctrl_c_after(1.0),
          pytest.warns(ChainInterrupted, match=rf"interrupted after \d+ of {n} steps")):
        partial = sample(cv, test, q, cv.center.theta, n, rng=21, compiled=True)
    done = partial.samples.shape[0]
    assert 0 < done < n
    assert all(v.shape[0] == done for v in partial.stats.values())
    full = sample(cv, test, q, cv.center.theta, done, rng=21, compiled=False)
    assert_same_chain(partial, full)


def test_cv_of_a_user_model_takes_the_python_loop():
    from samplers import ControlVariates

    class UserMean:
        N = 500
        dim = 1

        def __init__(self):
            self.x = np.random.default_rng(12).normal(size=500)

        def loglik(self, theta, idx):
            return -0.5 * (self.x[idx] - theta[0]) ** 2

        def grad_loglik(self, theta, idx):
            return (self.x[idx] - theta[0]).reshape(-1, 1)

        def hess_loglik(self, theta, idx):
            return -np.ones((len(idx), 1, 1))

        def logprior(self, theta):
            return 0.0

    cv = ControlVariates(UserMean())
    with pytest.raises(TypeError, match="no compiled chain loop for ControlVariates"):
        sample(cv, AustereTest(m=50, epsilon=0.1), RandomWalk(0.05), cv.center.theta, 3,
               rng=0, compiled=True)


# --- the confidence test: the range inside the compiled step --------------------------------


@pytest.mark.parametrize("make", [
    lambda rng: (GaussianMean(rng.normal(1.0, 1.0, 20_000), prior=GaussianPrior(0.0, 3.0)),
                 [1.0], 0.01),
    lambda rng: (__import__("samplers").Gaussian(rng.normal(1.0, 2.0, 20_000)),
                 [1.0, 0.7], 0.01),
    lambda rng: (__import__("samplers").GaussianMixture(rng.normal(0.5, 1.5, 20_000),
                                                        temperature=5.0), [0.0, 1.0], 0.05),
    lambda rng: (LinearRegression(rng.normal(size=(20_000, 2)), rng.normal(size=20_000)),
                 [0.0, 0.0], 0.005),
    lambda rng: (__import__("samplers").RobustRegression(rng.normal(size=(20_000, 2)),
                                                         rng.normal(size=20_000)),
                 [0.0, 0.0], 0.01),
])
def test_confidence_compiled_equals_python_on_every_model_range(make):
    model, theta0, scale = make(np.random.default_rng(16))
    test = ConfidenceTest(delta=0.1)
    python = sample(model, test, RandomWalk(scale), theta0, 300, rng=17, compiled=False)
    compiled = sample(model, test, RandomWalk(scale), theta0, 300, rng=17, compiled=True)
    assert_same_chain(python, compiled)
    assert 0.05 < compiled.acceptance_rate < 0.95
    assert compiled.stats["n_used"].min() < model.N   # some decisions stopped early


def test_confidence_with_a_zero_range_decides_without_data_on_both_loops():
    # x_i = 0: every l_i is 0, the range is (0, 0) and no row is read
    y = (np.arange(1000) % 2).astype(float)
    model = LogisticRegression(np.zeros((1000, 2)), y, prior=GaussianPrior(0.0, 1.0))
    python = sample(model, ConfidenceTest(), RandomWalk(0.5), [0.0, 0.0], 300, rng=18,
                    compiled=False)
    compiled = sample(model, ConfidenceTest(), RandomWalk(0.5), [0.0, 0.0], 300, rng=18,
                      compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["n_used"].max() == 0 and 0.2 < compiled.acceptance_rate < 0.9


@jit
def _broken_range(consts, theta, theta_new):
    """The range of :class:`_BrokenRange`: NaN below -1, infinite above 1, else honest."""
    if theta_new[0] < -1.0:
        return 0.0, np.nan
    if theta_new[0] > 1.0:
        return 0.0, np.inf
    return 0.0, abs(theta_new[0] - theta[0]) * consts[0]


class _BrokenRange(GaussianMean):
    """A model whose (jitted) range fails away from 0: the compiled loop calls it in its
    step and must raise what the Python loop raises."""

    _ratio_range = staticmethod(_broken_range)

    def _range_data(self):
        return (max(abs(self._xmin), abs(self._xmax)) + 2.0,)


@pytest.mark.parametrize("theta0, message", [(-0.95, "NaN"), (0.95, "needs bounded l_i")])
def test_confidence_range_failures_raise_the_same_error_on_both_loops(theta0, message):
    model = _BrokenRange(np.random.default_rng(19).uniform(-0.1, 0.1, 2000), sigma=10.0)
    errors = []
    for compiled in (False, True):
        with pytest.raises(ValueError, match=message) as info:
            sample(model, ConfidenceTest(), RandomWalk(0.05), [theta0], 2000, rng=20,
                   compiled=compiled)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_ctrl_c_keeps_the_completed_blocks_of_a_compiled_mh_chain(no_gc_callbacks):
    model, theta0 = _logistic(N=20_000, d=5)
    test = ConfidenceTest(delta=0.1, batch_size=50)
    sample(model, test, RandomWalk(0.01), theta0, 5, rng=0, compiled=True)   # compiled
    n = 400_000     # minutes of work (about 1 ms per step): the interrupt (at 1 s) comes first
    with (_ctrl_c_after(1.0),
          pytest.warns(ChainInterrupted, match=rf"interrupted after \d+ of {n} steps")):
        partial = sample(model, test, RandomWalk(0.01), theta0, n, rng=21, compiled=True)
    done = partial.samples.shape[0]
    assert 0 < done < n
    assert all(v.shape[0] == done for v in partial.stats.values())
    full = sample(model, test, RandomWalk(0.01), theta0, done, rng=21, compiled=False)
    assert_same_chain(partial, full)


def test_presized_barker_reading_every_row_is_exact_on_both_loops():
    # wide data, a narrow model: the pilot often prescribes every remaining row (EXACT)
    model = GaussianMean(np.random.default_rng(22).normal(1.0, 5.0, 400), sigma=1.0)
    test = BarkerTest(m=50, delta=None, stopping="presized")
    python = sample(model, test, RandomWalk(0.1), [1.0], 500, rng=3, compiled=False)
    compiled = sample(model, test, RandomWalk(0.1), [1.0], 500, rng=3, compiled=True)
    assert_same_chain(python, compiled)
    exact = compiled.stats["n_used"] == model.N
    assert 0 < exact.sum() < exact.size
    assert np.all(compiled.stats["var_delta"][exact] == 0.0)


# --- exact minibatch (Poisson-factor) tests ---------------------------------------------------


def _tuna_model(N):
    rng = np.random.default_rng(23)
    X = rng.normal(size=(N, 2))
    y = (X @ [1.0, -1.0] + rng.logistic(size=N) > 0).astype(float)
    return LogisticRegression(X, y)


@pytest.mark.parametrize("N, test, scale", [
    (20_000, lambda: __import__("samplers").TunaMHTest(chi=1e-3), 0.005),
    (20_000, lambda: __import__("samplers").TunaMHTest(chi=1e-4, sampling="uniform"), 0.01),
    # the expected batch reaches N on some pairs: those steps are the full-data test (Python)
    (2000, lambda: __import__("samplers").TunaMHTest(chi=0.2), 0.03),
])
def test_tunamh_compiled_equals_python(N, test, scale):
    model = _tuna_model(N)
    python = sample(model, test(), RandomWalk(scale), [1.0, -1.0], 400, rng=24, compiled=False)
    compiled = sample(model, test(), RandomWalk(scale), [1.0, -1.0], 400, rng=24,
                      compiled=True)
    assert_same_chain(python, compiled)
    assert compiled.stats["full_data"].dtype == bool
    assert 0 < compiled.acceptance_rate < 1
    if N == 2000:
        assert 0 < compiled.stats["full_data"].sum() < 400


def test_tunamh_bound_violation_raises_the_same_error_on_both_loops():
    from samplers import TunaMHTest
    from samplers.mhtests.poisson import BoundViolation

    model = _tuna_model(20_000)
    test = TunaMHTest(chi=1e-3)
    test.prepare(model).rem.c[:] *= 0.05   # a wrong (too small) per-row bound, on purpose
    errors = []
    for compiled in (False, True):
        with pytest.raises(BoundViolation, match="exceeds its bound") as info:
            sample(model, test, RandomWalk(0.005), [1.0, -1.0], 400, rng=25, compiled=compiled)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_smh_with_control_variates_takes_the_python_loop():
    from samplers import SMHTest

    with pytest.raises(TypeError, match="no compiled chain loop"):
        sample(_tuna_model(2000), SMHTest(order=1), RandomWalk(0.01), [1.0, -1.0], 3, rng=0,
               compiled=True)
