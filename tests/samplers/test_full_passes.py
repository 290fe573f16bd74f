"""Full-data passes on every core (ModelView.full_ratio_moments / full_grad / full_loglik)
against the one-thread NumPy route they replace: bit-identical, whatever the thread count."""

import math

import numpy as np
import pytest
from scipy import stats

import samplers._view as view_module
from design._lib.moments import RunningMoments
from design._lib.passes import run_chunks
from samplers._view import ModelView, check_model
from tests.samplers.test_models import DIMS, NAMES, make, reference_loglik

CHUNK = 37  # small chunks, so the few hundred rows of the test models span several


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(view_module, "FULL_CHUNK", CHUNK)


def point(name, seed):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.5, DIMS[name])
    return theta, theta + rng.normal(0, 0.05, DIMS[name])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_ratio_moments_are_those_of_the_chunked_numpy_pass(name, threads):
    model = make(name)
    view = ModelView(model, DIMS[name])
    theta, theta_new = point(name, 1)
    ok, mom = view.full_ratio_moments(theta, theta_new, threads=threads)
    ref = RunningMoments()
    for start in range(0, model.N, CHUNK):
        ref.add(model.loglik_ratio(theta, theta_new, np.arange(start, min(start + CHUNK, model.N))))
    assert ok and (mom.n, mom.mean, mom.m2) == (ref.n, ref.mean, ref.m2)
    l = reference_loglik(name, theta_new, 1.0) - reference_loglik(name, theta, 1.0)
    assert mom.mean == pytest.approx(l.mean(), rel=1e-9, abs=1e-12)
    assert mom.population_sd() == pytest.approx(l.std(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_full_grad_is_the_chunked_numpy_sum(name):
    model = make(name)
    view = ModelView(model, DIMS[name])
    theta, _ = point(name, 2)
    ref = np.asarray(model.grad_logprior(theta), float).copy()
    for start in range(0, model.N, CHUNK):
        ref += model.grad_loglik(theta, np.arange(start, min(start + CHUNK, model.N))).sum(axis=0)
    for threads in (1, 2):
        np.testing.assert_array_equal(view.full_grad(theta, threads=threads), ref)


@pytest.mark.parametrize("name", NAMES)
def test_full_loglik_is_the_sum_of_the_reference_logliks(name):
    model = make(name, K=2.5)
    view = ModelView(model, DIMS[name])
    theta, _ = point(name, 3)
    one = view.full_loglik(theta, threads=1)
    assert view.full_loglik(theta, threads=2) == one
    assert one == pytest.approx(reference_loglik(name, theta, 2.5).sum(), rel=1e-12)


def test_a_nonfinite_chunk_stops_the_merge_like_the_python_path():
    model = make("logistic")
    view = ModelView(model, DIMS["logistic"])
    theta = np.zeros(DIMS["logistic"])
    theta_new = theta.copy()
    theta_new[0] = 1e308                    # x.theta_new overflows on some rows: l_i = -inf
    ok, mom = view.full_ratio_moments(theta, theta_new, threads=2)
    ref = RunningMoments()
    ref_ok = True
    for start in range(0, model.N, CHUNK):
        if not ref.add(model.loglik_ratio(theta, theta_new, np.arange(start, min(start + CHUNK, model.N)))):
            ref_ok = False
            break
    assert not ok and not ref_ok
    assert mom.n == ref.n and (mom.mean == ref.mean or (math.isnan(mom.mean) and math.isnan(ref.mean)))


def test_a_user_model_takes_the_chunked_python_route():
    x = np.random.default_rng(5).normal(size=300)

    class Plain:
        N = 300

        def loglik(self, theta, idx):
            return stats.norm.logpdf(x[idx], theta[0], 1.0)

        def logprior(self, theta):
            return 0.0

        def grad_loglik(self, theta, idx):
            return (x[idx] - theta[0])[:, None]

        def grad_logprior(self, theta):
            return np.zeros(1)

    view, theta = check_model(Plain(), [0.2])
    ok, mom = view.full_ratio_moments(theta, theta + 0.1)
    l = stats.norm.logpdf(x, 0.3) - stats.norm.logpdf(x, 0.2)
    assert ok and mom.mean == pytest.approx(l.mean(), rel=1e-12)
    assert view.full_grad(theta)[0] == pytest.approx((x - 0.2).sum(), rel=1e-12)
    with pytest.raises(TypeError, match="full_loglik needs a built-in model"):
        view.full_loglik(theta)


def test_run_chunks_covers_every_chunk_once_and_reraises():
    seen = np.zeros(101, dtype=int)

    def mark(seen, c0, c1):
        seen[c0:c1] += 1

    for threads in (1, 2, 7):
        seen[:] = 0
        run_chunks(mark, 101, seen, threads=threads)
        assert (seen == 1).all()

    def fail(c0, c1):
        raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        run_chunks(fail, 10, threads=2)


def test_run_chunks_inside_a_block_runs_in_that_thread():
    """A block that runs a pass of its own (the pool's threads all waiting for blocks
    queued behind them would deadlock): the inner pass runs in the block's thread."""
    import threading

    strays = []

    def outer(seen, c0, c1):
        block = threading.get_ident()

        def inner(i0, i1):
            if threading.get_ident() != block:
                strays.append(threading.current_thread().name)

        run_chunks(inner, 8)
        seen[c0:c1] += 1

    seen = np.zeros(16, dtype=int)
    done = threading.Thread(target=run_chunks, args=(outer, 16, seen), kwargs=dict(threads=2),
                            daemon=True)
    done.start()
    done.join(60)                       # a deadlock fails the test instead of hanging it
    assert not done.is_alive() and (seen == 1).all()
    assert strays == []                 # on a machine of many cores too (free threads)


# --- the linear-predictor passes (logistic regression): blocks of rows, four rows at a time


def _logistic_data(N, d, dtype, plus_minus, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, d)).astype(dtype)
    y = (rng.random(N) < 0.5).astype(float)
    return X, (2.0 * y - 1.0 if plus_minus else y)


@pytest.mark.parametrize("d", [1, 5, 51])
@pytest.mark.parametrize("start, k", [(0, 0), (0, 3), (5, 250), (1990, 13)])
def test_rows_dot_has_the_bits_of_the_row_dot_product(d, start, k):
    from samplers.models._kernels import dots, rows_dot, rows_dots

    X, _ = _logistic_data(2003, d, float, False, d)
    rng = np.random.default_rng(k)
    theta, theta_new = rng.normal(size=d), rng.normal(size=d)
    out, a, b = np.full(k + 2, np.nan), np.full(k + 2, np.nan), np.full(k + 2, np.nan)
    rows_dot(X, start, k, theta, out)
    rows_dots(X, start, k, theta, theta_new, a, b)
    ref = np.array([dots.py_func(X, start + t, theta, theta_new) for t in range(k)]).reshape(k, 2)
    np.testing.assert_array_equal(out[:k], ref[:, 0])
    np.testing.assert_array_equal(a[:k], ref[:, 0])
    np.testing.assert_array_equal(b[:k], ref[:, 1])
    assert np.isnan(out[k:]).all() and np.isnan(a[k:]).all()  # nothing written past k


@pytest.mark.parametrize("d, dtype, plus_minus", [(1, np.float64, False), (7, np.float32, True),
                                                  (51, np.float64, False)])
@pytest.mark.parametrize("chunk", [700, 1 << 16])
def test_logistic_passes_over_blocks_of_rows_are_the_chunked_numpy_pass(
        monkeypatch, tmp_path, d, dtype, plus_minus, chunk):
    """Chunks longer than a block of rows (ROW_BLOCK), N not a multiple of four, a memmap:
    the l_i moments, the log-likelihood and the gradient bit for bit those of the chunked
    NumPy route, and close to scipy's log_expit."""
    from scipy.special import log_expit

    from samplers import LogisticRegression

    monkeypatch.setattr(view_module, "FULL_CHUNK", chunk)
    N = 2003
    X, y = _logistic_data(N, d, dtype, plus_minus, 11)
    path = tmp_path / "X.npy"
    np.save(path, X)
    model = LogisticRegression(np.load(path, mmap_mode="r"), y, temperature=1.5)
    view = ModelView(model, d)
    rng = np.random.default_rng(d)
    theta = rng.normal(0, 0.5, d)
    theta_new = theta + rng.normal(0, 0.05, d)
    ref = RunningMoments()
    total = 0.0
    for start in range(0, N, chunk):
        idx = np.arange(start, min(start + chunk, N))
        ref.add(model.loglik_ratio(theta, theta_new, idx))
        part = 0.0
        for v in model.loglik(theta, idx):
            part += v
        total += part
    grad = np.asarray(model.grad_logprior(theta), float).copy()
    for start in range(0, N, chunk):
        part = np.zeros(d)
        for row in model.grad_loglik(theta, np.arange(start, min(start + chunk, N))):
            part += row                       # in row order (NumPy sums d = 1 pairwise)
        grad += part
    for threads in (1, 2):
        ok, mom = view.full_ratio_moments(theta, theta_new, threads=threads)
        assert ok and (mom.n, mom.mean, mom.m2) == (ref.n, ref.mean, ref.m2)
        assert view.full_loglik(theta, threads=threads) == total
        np.testing.assert_array_equal(view.full_grad(theta, threads=threads), grad)
    s = 2.0 * y - 1.0 if not plus_minus else y
    Xf = X.astype(float)
    ll = log_expit(s * (Xf @ theta)) / 1.5
    l = log_expit(s * (Xf @ theta_new)) / 1.5 - ll
    assert total == pytest.approx(ll.sum(), rel=1e-12)
    assert mom.mean == pytest.approx(l.mean(), rel=1e-9, abs=1e-13)
    assert mom.population_sd() == pytest.approx(l.std(), rel=1e-9)
