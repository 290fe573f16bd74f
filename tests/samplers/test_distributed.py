"""Full-data passes and chains on a Dask cluster (``executor=``): the local results, bit for
bit; a worker killed mid-pass, a task that fails, Ctrl-C and a closed executor.

One ``LocalCluster`` of two worker processes serves the module. The data are small (the
passes' task size is lowered so that each pass is several tasks): what is tested is that
the ranges' results come back complete and are merged in the local pass's order.
"""

import _thread
import os
import pickle
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import design
import design._lib.distribute as distribute
from design._lib.distribute import as_cluster, map_ranges
from samplers import (GLM, ControlVariates, GaussianPrior, LinearRegression, LogisticRegression,
                      TaylorSums, heavy_rows, log_posterior)
from samplers.datasets import logistic_regression
from validation import clt_check, loglik_ratios

distributed = pytest.importorskip("distributed")

#: Rows per task in these tests (2^20 in use): a pass over N = 150 000 rows is 5 tasks.
RANGE_ROWS = 1 << 15


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    # the helpers of this module travel by value (the workers need not import the tests)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit="1GB")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch):
    monkeypatch.setattr(distribute, "RANGE_ROWS", RANGE_ROWS)


@pytest.fixture(scope="module")
def model():
    X, y, _ = logistic_regression(150_000, 4, rng=0)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


@pytest.fixture(scope="module")
def local_cv(model):
    return ControlVariates(model)


def pairs(cv, n, seed):
    rng = np.random.default_rng(seed)
    thetas = cv.center.theta + 0.01 * rng.normal(size=(n, cv.dim))
    return thetas, thetas + 0.005 * rng.normal(size=(n, cv.dim))


def same_center(a, b):
    for field in ("theta", "loglik", "grad", "hess", "posterior_hess", "offset", "n_passes"):
        np.testing.assert_array_equal(getattr(a.center, field), getattr(b.center, field),
                                      err_msg=field)


def test_every_pass_on_the_cluster_is_the_local_pass(client, model, local_cv, monkeypatch):
    monkeypatch.setattr("design._pair_scan.ONE_PASS_FROM", 1 << 16)   # the one-pass route
    local = local_cv
    remote = ControlVariates(model, executor=client)
    same_center(local, remote)                     # each Newton step's sums, bit for bit
    thetas, news = pairs(local, 5, 1)
    for m in (model, local):                       # loglik_many's pass; the wrapper's rows
        a = design.TrialChain.from_model(m, thetas, news, progress=False)
        b = design.TrialChain.from_model(m, thetas, news, progress=False, executor=client)
        for field in ("mu", "sigma", "skewness", "kurtosis", "abs_z1", "abs_z3", "max_abs"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    draws = np.stack([thetas, thetas[::-1]])       # two chains of five draws
    np.testing.assert_array_equal(log_posterior(local, draws, progress=False),
                                  log_posterior(local, draws, progress=False, executor=client))
    np.testing.assert_array_equal(loglik_ratios(local, thetas[0], news[0]),
                                  loglik_ratios(local, thetas[0], news[0], executor=client))
    np.testing.assert_array_equal(heavy_rows(local, max_rows=50),
                                  heavy_rows(local, max_rows=50, executor=client))
    a = clt_check(local, (thetas[:2], news[:2]), batch_size=200, n_sim=4000, search=False,
                  rng=3, progress=False)
    b = clt_check(local, (thetas[:2], news[:2]), batch_size=200, n_sim=4000, search=False,
                  rng=3, progress=False, executor=client)
    # locally the verdict reads both pairs' l_i from one pass (each a difference of two
    # log-likelihood columns, loglik_many); on the cluster each pair's fused ratio: the
    # same l_i to rounding, so the KS distances agree to ~1e-9 relative, not bit for bit
    np.testing.assert_allclose(a.ks_distance, b.ks_distance, rtol=1e-8)


@pytest.mark.parametrize("kind", ["zarr", "h5"])
def test_a_store_on_the_cluster_gives_the_in_memory_results(client, model, local_cv, kind,
                                                             tmp_path):
    """The workers reopen the store by its path and read their ranges."""
    if kind == "zarr":
        zarr = pytest.importorskip("zarr")
        group = zarr.open_group(str(tmp_path / "data.zarr"), mode="w")
        stored = {}
        for key, a in (("X", model.X), ("y", model.y)):
            arr = group.create_array(key, shape=a.shape, dtype=a.dtype,
                                     chunks=(4096,) + a.shape[1:],
                                     shards=(1 << 16,) + a.shape[1:])
            arr[:] = a
            stored[key] = arr
    else:
        h5py = pytest.importorskip("h5py")
        with h5py.File(tmp_path / "data.h5", "w") as f:
            for key, a in (("X", model.X), ("y", model.y)):
                f.create_dataset(key, data=a, chunks=(4096,) + a.shape[1:])
        f = h5py.File(tmp_path / "data.h5", "r")
        stored = {"X": f["X"], "y": f["y"]}
    on_store = LogisticRegression(stored["X"], stored["y"], prior=model.prior)
    assert on_store.data_sources()                  # rows in the store, not in memory
    remote = ControlVariates(on_store, executor=client)
    same_center(local_cv, remote)
    thetas, news = pairs(local_cv, 3, 2)
    a = design.TrialChain.from_model(local_cv, thetas, news, progress=False)
    b = design.TrialChain.from_model(remote, thetas, news, progress=False, executor=client)
    # both from one pass of loglik_many (differences of log-likelihood columns): the
    # store's control variates read each chunk's rows once for every vector, on its worker
    for field in ("mu", "sigma", "skewness", "kurtosis", "abs_z1", "abs_z3", "max_abs"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    idx = np.array([5, 149_999, 7, 70_000])
    np.testing.assert_array_equal(remote.loglik_many(thetas, idx),
                                  local_cv.loglik_many(thetas, idx))
    np.testing.assert_array_equal(log_posterior(local_cv, thetas[None], progress=False),
                                  log_posterior(remote, thetas[None], progress=False,
                                                executor=client))


def test_the_executor_of_a_client_and_a_thread_pool_give_the_same_bits(client, model):
    local = ControlVariates(model, order=1, center=np.zeros(model.dim))
    with ThreadPoolExecutor(2) as pool:
        same_center(local, ControlVariates(model, order=1, center=np.zeros(model.dim),
                                           executor=pool))
    same_center(local, ControlVariates(model, order=1, center=np.zeros(model.dim),
                                       executor=client.get_executor()))



class PicklingPool(ThreadPoolExecutor):
    """A thread pool that sends each task through pickle, as a process pool or a cluster
    does, and records its size."""

    def __init__(self):
        super().__init__(2)
        self.sizes, self.blobs = [], []

    def submit(self, fn, *args):
        blob = pickle.dumps((fn, args))
        self.sizes.append(len(blob))
        self.blobs.append(blob)
        fn, args = pickle.loads(blob)
        return super().submit(fn, *args)


@pytest.mark.parametrize("kind", ["ArraySource", "dask"])
def test_rows_held_here_are_sent_once_not_into_every_task(model, local_cv, kind):
    """A model on an explicit ArraySource, or on a dask array of numpy data (no backing
    store), sends each task its range's rows (its chunks), not all N rows: about as many
    bytes as a task of the in-memory model (3 ranges of 2^16 rows: 3.2 MB each, the data
    7.2 MB). The results are the in-memory ones, bit for bit."""
    from samplers.sources import ArraySource

    if kind == "dask":
        da = pytest.importorskip("dask.array")
        X, y = da.from_array(model.X, chunks=(8192, model.dim)), da.from_array(model.y, chunks=8192)
    else:
        X, y = ArraySource(model.X, "X"), ArraySource(model.y, "y")
    on_source = LogisticRegression(X, y, prior=model.prior)
    with PicklingPool() as pool:
        remote = ControlVariates(on_source, executor=pool)
    same_center(local_cv, remote)
    with PicklingPool() as pool_in_memory:
        ControlVariates(model, executor=pool_in_memory)
    assert len(pool.sizes) == len(pool_in_memory.sizes) >= 6
    assert max(pool.sizes) < 1.01 * max(pool_in_memory.sizes) < model.X.nbytes



def _error(build):
    with pytest.raises(ValueError) as info:
        build()
    return type(info.value), str(info.value)


def test_the_data_checks_of_a_store_run_on_the_executor(client, model, tmp_path, monkeypatch):
    """executor= on a model over a store runs its NaN scan, checksums and label check in
    tasks (here 5 ranges of X, checked in blocks of 1024 rows, and 3 of y); a NaN, a
    corrupted shard of y and a bad label give the local errors, naming the same rows."""
    import samplers.sources as sources

    monkeypatch.setattr(sources, "BLOCK_BYTES", 1 << 16)
    X, y = model.X.copy(), model.y.copy()
    paths = {}
    for case in ("sound", "nan", "label", "corrupt"):
        Xc, yc = X.copy(), y.copy()
        if case == "nan":
            Xc[100_003, 2] = np.nan
            Xc[120_000, 1] = np.inf
        if case == "label":
            yc[77_777] = 2.0
        paths[case] = tmp_path / f"{case}.zarr"
        sources.write_store(paths[case], Xc, yc, rows_per_chunk=64, rows_per_shard=1024,
                            progress=False)
    shard = paths["corrupt"] / "y" / "c" / "90"                     # rows [92160, 93184)
    raw = bytearray(shard.read_bytes())
    raw[8] ^= 0x01
    shard.write_bytes(bytes(raw))

    with PicklingPool() as pool:
        on_pool = LogisticRegression(*sources.open_store(paths["sound"]), prior=model.prior,
                                     executor=pool)
    assert len(pool.sizes) == 5 + 3 and max(pool.sizes) < 3000   # paths, no rows
    on_cluster = LogisticRegression(*sources.open_store(paths["sound"]), prior=model.prior,
                                    executor=client)
    for built in (on_pool, on_cluster):
        np.testing.assert_array_equal(built.loglik(np.ones(model.dim), np.arange(5)),
                                      model.loglik(np.ones(model.dim), np.arange(5)))
    for case, what in (("nan", r"rows \[99328, 100352\) of 'X'.*first at row 100003"),
                       ("label", "labels"), ("corrupt", r"rows \[92160, 93184\) of 'y'")):
        local = _error(lambda: LogisticRegression(*sources.open_store(paths[case])))
        remote = _error(lambda: LogisticRegression(*sources.open_store(paths[case]),
                                                   executor=client))
        assert remote == local
        assert re.search(what, local[1]), local
    assert _error(lambda: LinearRegression(*sources.open_store(paths["nan"]),
                                           executor=client)) == _error(
        lambda: LinearRegression(*sources.open_store(paths["nan"])))
    # a GLM's support check of y: a count of -1 in a Poisson response
    counts = np.round(np.abs(y * 3.0))
    counts[140_001] = -1.0
    sources.write_store(tmp_path / "counts.zarr", X, counts, rows_per_chunk=64,
                        rows_per_shard=1024, progress=False)
    glm = lambda executor: GLM(*sources.open_store(tmp_path / "counts.zarr"),  # noqa: E731
                               family="poisson", executor=executor)
    with PicklingPool() as pool:
        local, remote = _error(lambda: glm(None)), _error(lambda: glm(pool))
    assert remote == local and "row 140001 has -1.0" in local[1] and len(pool.sizes) >= 5
    # binomial y against its trials (two columns at once): by ranges of the model's rows
    counts[140_001], counts[140_500], counts[7] = 4.0, 5.0, 3.0
    sources.write_store(tmp_path / "succ.zarr", X, counts, rows_per_chunk=64,
                        rows_per_shard=1024, progress=False)
    binom = lambda executor: GLM(*sources.open_store(tmp_path / "succ.zarr"),  # noqa: E731
                                 family="binomial", trials=3, executor=executor)
    with PicklingPool() as pool:
        local, remote = _error(lambda: binom(None)), _error(lambda: binom(pool))
    assert remote == local and "row 140001 has y = 4.0 (trials 3.0)" in local[1]
    assert sum(b"_binomial_bad" in b for b in pool.blobs) == 3 and max(pool.sizes) < 3000


def _rows(n):
    class Rows:
        N = n
    return Rows()


def _recipe(start, stop):
    return lambda: _rows(stop - start)


def _kill_the_first_time(block, marker):
    """A task that kills its worker process the first time any task runs it."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return block.N
    os.close(fd)
    os._exit(1)


def _fail_on_second_range(block, N):
    if block.N == N:
        raise ValueError("a bad row in the block")
    return block.N


def test_a_worker_killed_mid_pass_is_replaced_and_its_range_rerun(client, tmp_path):
    got = []
    n = map_ranges(as_cluster(client), _recipe, _kill_the_first_time,
                   (str(tmp_path / "killed"),), lambda a, b, r: got.append((a, b, r)),
                   N=100, chunk=10, range_rows=30, desc="kill test")
    assert (tmp_path / "killed").exists()          # a worker did die
    assert n == 4 and got == [(0, 30, 30), (30, 60, 30), (60, 90, 30), (90, 100, 10)]


def test_a_failing_task_raises_an_error_naming_its_rows(client):
    with pytest.raises(ValueError, match=r"rows \[90, 100\) of 100 failed: a bad row"):
        map_ranges(as_cluster(client, retries=0), _recipe, _fail_on_second_range, (10,),
                   lambda a, b, r: None, N=100, chunk=10, range_rows=30, desc="fail test")


def _slow(block, seconds):
    time.sleep(seconds)
    return block.N


def _scheduler_tasks(dask_scheduler):
    return len(dask_scheduler.tasks)


def test_ctrl_c_cancels_the_pass_within_seconds(client):
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            map_ranges(as_cluster(client), _recipe, _slow, (5.0,), lambda a, b, r: None,
                       N=80, chunk=10, range_rows=10, desc="slow pass")
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < 3.0
    deadline = time.perf_counter() + 10.0           # the scheduler forgets every task
    while client.run_on_scheduler(_scheduler_tasks) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(_scheduler_tasks) == 0


def test_a_closed_executor_is_refused_before_any_work(client, model):
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    other = distributed.Client(client.cluster, set_as_default=False)
    other.close()
    for closed in (pool, other):
        with pytest.raises(ValueError, match="executor is closed"):
            ControlVariates(model, executor=closed)
        with pytest.raises(ValueError, match="executor is closed"):
            log_posterior(model, np.zeros((1, model.dim)), executor=closed)


def test_a_model_without_block_recipe_is_refused_with_an_executor(client):
    class Unit:
        N, dim = 100, 1

        def loglik(self, theta, idx):
            return -0.5 * (theta[0] - np.ones(len(idx))) ** 2

        def logprior(self, theta):
            return 0.0

    with pytest.raises(TypeError, match="block_recipe"):
        design.TrialChain.from_model(Unit(), [[0.0]], [[0.1]], executor=client)


@pytest.mark.slow
def test_fit_on_the_cluster_gives_the_local_chains(client):
    from validation import fit

    X, y, _ = logistic_regression(20_000, 2, rng=4)
    small = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    kw = dict(draws=200, n_trial=10, rng=5)
    here = fit(small, parallel=False, **kw)
    there = fit(small, executor=client, **kw)
    assert here.posterior.attrs["route"] == there.posterior.attrs["route"]
    np.testing.assert_array_equal(here.posterior.theta.values, there.posterior.theta.values)


# -- ControlVariates.from_sums: sums computed elsewhere ----------------------------------------

def test_from_sums_equals_the_direct_pass():
    rng = np.random.default_rng(2)
    X = np.column_stack([np.ones(3000), rng.normal(size=(3000, 2))])
    y = X @ [0.3, -1.0, 0.5] + rng.normal(size=3000)
    model = LinearRegression(X, y, noise_sd=1.0, prior=GaussianPrior(0.0, 5.0))
    center = np.array([0.3, -1.0, 0.5])
    direct = ControlVariates(model, center=center)
    # the sums as another system would compute them: X'(y - X c), -X'X, sum of log densities
    r = y - X @ center
    sums = {"N": 3000, "loglik": float(np.sum(-0.5 * np.log(2 * np.pi) - 0.5 * r * r)),
            "grad": X.T @ r, "hess": -X.T @ X}
    given = ControlVariates.from_sums(model, center, sums)
    for field in ("loglik", "grad", "hess", "posterior_grad", "posterior_hess"):
        np.testing.assert_allclose(getattr(given.center, field), getattr(direct.center, field),
                                   rtol=1e-10, atol=1e-8, err_msg=field)
    assert given.center.method == "given" and given.center.n_passes == 0
    theta = center + 0.01
    idx = np.arange(3000)
    np.testing.assert_allclose(given.loglik_ratio(theta, theta + 0.01, idx),
                               direct.loglik_ratio(theta, theta + 0.01, idx), rtol=1e-9,
                               atol=1e-12)
    again = ControlVariates.from_sums(model, center, direct.sums())
    for field in ("loglik", "grad", "hess", "offset"):
        np.testing.assert_array_equal(getattr(again.center, field),
                                      getattr(direct.center, field))
    # a structural zero that rounds to 1e-18 on one side only is symmetric enough
    tiny = dict(sums, hess=sums["hess"] + np.array([[0, 1e-18, 0], [0, 0, 0], [0, 0, 0]]))
    ControlVariates.from_sums(model, center, tiny)


@pytest.mark.parametrize("bad, match", [
    ({"N": 10, "loglik": 0.0, "grad": [0.0, 0.0], "hess": [[-1.0, 0.0], [0.0, -1.0]]},
     r"sums\['N'\] must be the model's N = 50"),
    ({"N": 50, "loglik": 0.0, "grad": [0.0], "hess": [[-1.0]]}, "shapes"),
    ({"N": 50, "loglik": 0.0, "grad": [0.0, 0.0], "hess": [[-1.0, 1.0], [0.0, -1.0]]},
     "symmetric"),
    ({"N": 50, "grad": [0.0, 0.0], "hess": [[-1.0, 0.0], [0.0, -1.0]]}, "missing"),
    ({"N": 50, "loglik": np.nan, "grad": [0.0, 0.0], "hess": [[-1.0, 0.0], [0.0, -1.0]]},
     "finite"),
])
def test_from_sums_refuses_bad_sums(bad, match):
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(50), rng.normal(size=50)])
    model = LinearRegression(X, rng.normal(size=50), noise_sd=1.0)
    with pytest.raises(ValueError, match=match):
        ControlVariates.from_sums(model, [0.0, 0.0], bad)
    with pytest.raises(TypeError, match="TaylorSums or a mapping"):
        ControlVariates.from_sums(model, [0.0, 0.0], [1, 2, 3])


def test_taylor_sums_round_trip():
    rng = np.random.default_rng(1)
    X = np.column_stack([np.ones(400), rng.normal(size=400)])
    model = LinearRegression(X, rng.normal(size=400), noise_sd=1.0)
    cv = ControlVariates(model)
    s = cv.sums()
    assert isinstance(s, TaylorSums) and s.N == 400
    rebuilt = ControlVariates.from_sums(model, cv.center.theta, s)
    np.testing.assert_array_equal(rebuilt.center.posterior_hess, cv.center.posterior_hess)


def test_the_demo_hands_a_client_of_the_scheduler_to_its_passes(client, tmp_path, capsys,
                                                                 monkeypatch):
    """``--scheduler ADDRESS``: run_demo gets a client of that scheduler, closed afterwards
    (the demo itself runs end to end in tests/test_cli.py)."""
    import validation.workflow.demo as demo
    from validation.workflow.cli import main

    seen = {}

    def run_demo(settings, *, progress, executor):
        seen["workers"] = len(executor.scheduler_info()["workers"])
        seen["client"] = executor

    monkeypatch.setattr(demo, "run_demo", run_demo)
    assert main(["demo", "--rows", "20000", "--quiet", "--out", str(tmp_path / "demo"),
                 "--scheduler", client.scheduler.address]) == 0
    assert seen["workers"] == 2 and seen["client"].status == "closed"
    assert f"passes on the Dask cluster at {client.scheduler.address}" in capsys.readouterr().out


def test_the_demo_takes_a_cluster_or_a_scheduler_not_both(capsys):
    from validation.workflow.cli import main

    with pytest.raises(SystemExit):
        main(["demo", "--cluster", "local", "--scheduler", "tcp://127.0.0.1:8786"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_heavy_rows_on_the_cluster_merge_each_ranges_top_rows(client):
    """With rows that are heavy (a rare binary covariate: 40 rows scattered over the ranges)
    the cluster's pass returns each range's largest scales and sum of squares, never a
    per-row vector, and finds the local rows; a max_rows that cuts into the heavy set too."""
    from samplers.datasets import rare_covariate_logistic

    X, y, _ = rare_covariate_logistic(120_000, rng=2)
    cv = ControlVariates(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    local = heavy_rows(cv)
    assert local.size == 40                       # the case is not trivial
    assert len({r // RANGE_ROWS for r in local}) > 1
    np.testing.assert_array_equal(heavy_rows(cv, executor=client), local)
    for k in (0, 10, 39):
        np.testing.assert_array_equal(heavy_rows(cv, max_rows=k, executor=client),
                                      heavy_rows(cv, max_rows=k))
