"""Row sources (samplers.sources) and the built-in models on them.

Every source reads the rows of the numpy array it holds; every model built on a store runs
its full-data passes on blocks of rows and gives the in-memory model's results. The blocks
are whole chunks of the passes, so the chunk results and the order they are merged in are
the in-memory pass's: the results are equal bit for bit (a tolerance of 0, stronger than the
rtol ~1e-12 that a different summation order would need).
"""

import os
import pickle
import tracemalloc

import numpy as np
import pytest

import samplers._view as view_module
import samplers.sources as sources
from samplers import (GLM, ControlVariates, Gaussian, GaussianMean, GaussianMixture,
                      GaussianPrior, LinearRegression, LogisticRegression, RobustRegression,
                      log_posterior, sample)
from samplers._view import check_model
from samplers.models import skip_data_checks
from samplers.models._glm import glm_kernels, glm_sums

zarr = pytest.importorskip("zarr")
h5py = pytest.importorskip("h5py")

N = 3001          # rows of the test data: several chunks of CHUNK rows
CHUNK = 256       # rows per chunk of the passes in these tests (in-memory and store alike)
D = 3


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Passes in chunks of CHUNK rows, and a store read one chunk per block: N rows are
    twelve blocks (and the data checks read 4000 bytes of rows at a time)."""
    monkeypatch.setattr(view_module, "FULL_CHUNK", CHUNK)
    monkeypatch.setattr(sources, "BLOCK_BYTES", 4000)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, D - 1))])
    theta = np.array([0.3, -0.8, 0.5])
    labels = (rng.random(N) < 1 / (1 + np.exp(-X @ theta))).astype(float)
    response = X @ theta + rng.normal(0, 0.7, N)
    counts = rng.poisson(np.exp(0.3 * X @ theta)).astype(float)
    weights = rng.uniform(0.5, 2.0, N)
    x = rng.normal(1.0, 1.3, N)
    return X, labels, response, counts, weights, x


X, LABELS, RESPONSE, COUNTS, WEIGHTS, X1 = _data()
PRIOR = GaussianPrior(0.0, 5.0)

#: model name -> (builder(arrays by name), arrays it reads, dimension)
MODELS = {
    "mean": (lambda a: GaussianMean(a["x"], sigma=1.3, prior=GaussianPrior(0.0, 5.0)),
             {"x": X1}, 1),
    "gaussian": (lambda a: Gaussian(a["x"]), {"x": X1}, 2),
    "mixture": (lambda a: GaussianMixture(a["x"]), {"x": X1}, 2),
    "logistic": (lambda a: LogisticRegression(a["X"], a["y"], prior=PRIOR, temperature=2.0),
                 {"X": X, "y": LABELS}, D),
    "linear": (lambda a: LinearRegression(a["X"], a["y"], noise_sd=0.7, prior=PRIOR),
               {"X": X, "y": RESPONSE}, D),
    "robust": (lambda a: RobustRegression(a["X"], a["y"], df=4.0, scale=0.7, prior=PRIOR),
               {"X": X, "y": RESPONSE}, D),
    "poisson": (lambda a: GLM(a["X"], a["y"], family="poisson", weights=a["w"], prior=PRIOR),
                {"X": X, "y": COUNTS, "w": WEIGHTS}, D),
}


class UserSource:
    """A user's store: the protocol's members over a numpy array, nothing else."""

    def __init__(self, array, name):
        self._a, self.name = array, name
        self.shape, self.dtype = array.shape, array.dtype

    def read_range(self, start, stop):
        return self._a[start:stop].copy()

    def read_rows(self, idx):
        return self._a[np.asarray(idx)]

    def reopen(self):
        return self


def store(kind, arrays, tmp_path):
    """The arrays in a store of ``kind`` (what a user would pass to a model)."""
    if kind == "array":
        return dict(arrays)
    if kind == "memmap":
        out = {}
        for key, a in arrays.items():
            path = tmp_path / f"{key}.npy"
            np.save(path, a)
            out[key] = np.load(path, mmap_mode="r")
        return out
    if kind in ("zarr", "zarr_zstd", "dask"):
        group = zarr.open_group(str(tmp_path / "data.zarr"), mode="w")
        out = {}
        # zarr_zstd: compressed, so read through Zarr's codecs rather than the shard reader
        codecs = {} if kind == "zarr_zstd" else {"compressors": None}
        for key, a in arrays.items():
            arr = group.create_array(key, shape=a.shape, dtype=a.dtype, **codecs,
                                     chunks=(64,) + a.shape[1:], shards=(512,) + a.shape[1:])
            arr[:] = a
            out[key] = arr
        if kind == "dask":
            da = pytest.importorskip("dask.array")
            out = {key: sources.as_source(da.from_zarr(arr), key, backing=arr)
                   for key, arr in out.items()}
        return out
    if kind == "h5":
        f = h5py.File(tmp_path / "data.h5", "w")
        return {key: f.create_dataset(key, data=a, chunks=(128,) + a.shape[1:])
                for key, a in arrays.items()}
    if kind == "user":
        return {key: UserSource(a, key) for key, a in arrays.items()}
    raise AssertionError(kind)


KINDS = ["array", "memmap", "zarr", "zarr_zstd", "h5", "dask", "user"]
STORE_KINDS = ["zarr", "zarr_zstd", "h5", "user"]   # dask: below (its reads are slow)


# --- the sources --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_sources_read_the_rows_of_the_array(kind, tmp_path):
    arrays = {"X": X, "x": X1}
    for key, value in store(kind, arrays, tmp_path).items():
        src = sources.as_source(value, key)
        ref = arrays[key]
        assert tuple(src.shape) == ref.shape and np.dtype(src.dtype) == ref.dtype
        for start, stop in ((0, N), (5, 6), (100, 1700), (N - 3, N), (7, 7)):
            got = src.read_range(start, stop)
            assert got.flags.c_contiguous
            np.testing.assert_array_equal(got, ref[start:stop])
        idx = np.random.default_rng(1).integers(0, N, 200)     # unsorted, with repeats
        idx[:3] = [N - 1, 0, N - 1]
        np.testing.assert_array_equal(src.read_rows(idx), ref[idx])
        np.testing.assert_array_equal(src.read_rows(np.arange(40, 90)), ref[40:90])
        np.testing.assert_array_equal(src.reopen().read_rows(idx[:5]), ref[idx[:5]])


@pytest.mark.parametrize("kind", ["memmap", "zarr", "h5", "dask"])
def test_store_sources_pickle_without_their_rows(kind, tmp_path):
    big = np.random.default_rng(2).normal(size=(20_000, 4))
    src = sources.as_source(store(kind, {"X": big}, tmp_path)["X"], "X")
    blob = pickle.dumps(src)
    if kind != "dask":        # a dask graph from a Zarr array: the graph, not the rows
        assert len(blob) < 4000 < big.nbytes // 100
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.read_rows(np.array([19_999, 3])), big[[19_999, 3]])
    # an in-memory source pickles its array
    assert len(pickle.dumps(sources.as_source(big, "X"))) > big.nbytes


def test_zarr_direct_reads_equal_zarr_reads(tmp_path):
    """The direct shard reader (uncompressed sharded stores) against Zarr's own reads,
    with a chunk never written (all fill value) and a partial last shard."""
    a = np.random.default_rng(3).normal(size=(1000, 3))
    a[128:192] = 0.0
    arr = zarr.create_array(str(tmp_path / "a.zarr"), shape=a.shape, dtype=a.dtype,
                            chunks=(64, 3), shards=(256, 3), compressors=None)
    arr[:] = a
    src = sources.ZarrSource(str(tmp_path / "a.zarr"))
    assert src._reader is not None
    idx = np.random.default_rng(4).integers(0, 1000, 300)
    np.testing.assert_array_equal(src.read_rows(idx), arr.oindex[np.sort(np.unique(idx))][
        np.searchsorted(np.sort(np.unique(idx)), idx)])
    np.testing.assert_array_equal(src.read_range(100, 900), a[100:900])
    # a compressed store is read through Zarr
    z = zarr.create_array(str(tmp_path / "c.zarr"), shape=a.shape, dtype=a.dtype,
                          chunks=(64, 3), shards=(256, 3))
    z[:] = a
    csrc = sources.ZarrSource(str(tmp_path / "c.zarr"))
    assert csrc._reader is None
    np.testing.assert_array_equal(csrc.read_rows(idx), a[idx])



@pytest.mark.parametrize("platform", ["short reads", "no preadv", "no pread"])
def test_direct_reads_survive_short_reads_and_platforms_without_preadv(platform, tmp_path,
                                                                        monkeypatch):
    """A read call may return fewer bytes than asked without reaching the end of the file
    (Linux returns at most 0x7ffff000 bytes per call: every read of 2 GiB or more); here
    os.preadv returns at most 100 bytes, and the rows must come back whole, not be reported
    as damage. Where os.preadv (Windows: and os.pread) does not exist, the same rows are
    read through the fallback."""
    a = np.random.default_rng(5).normal(size=(1000, 3))
    src = sources.to_zarr(a, tmp_path / "a.zarr", rows_per_chunk=64, rows_per_shard=256,
                          progress=False)
    assert src._reader is not None
    if platform == "short reads":
        real = os.preadv

        def capped(fd, buffers, offset):
            (buf,) = buffers
            return real(fd, [memoryview(buf).cast("B")[:100]], offset)

        monkeypatch.setattr(os, "preadv", capped)
    else:
        monkeypatch.delattr(os, "preadv", raising=False)
        if platform == "no pread":
            monkeypatch.delattr(os, "pread", raising=False)
    fresh = sources.ZarrSource(src.path)           # its shard indexes read the same way
    idx = np.random.default_rng(6).integers(0, 1000, 200)
    np.testing.assert_array_equal(fresh.read_rows(idx), a[idx])
    np.testing.assert_array_equal(fresh.read_range(3, 997), a[3:997])
    assert sources.verify(fresh, progress=False) == src.checksum


def _flip_byte(path, offset):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_to_zarr_round_trip_and_checksum_detects_a_corrupted_chunk(tmp_path):
    a = np.random.default_rng(5).normal(size=(1000, 2))
    src = sources.to_zarr(a, tmp_path / "a.zarr", rows_per_chunk=32, rows_per_shard=128,
                          progress=False)
    np.testing.assert_array_equal(src.read_range(0, 1000), a)
    assert sources.verify(src, progress=False) == src.checksum
    _flip_byte(tmp_path / "a.zarr" / "c" / "2" / "0", 40 * 16 + 3)   # in the third shard
    with pytest.raises(sources.ChecksumError, match=r"rows \[256, 384\) of"):
        sources.verify(sources.ZarrSource(tmp_path / "a.zarr"), progress=False)
    # the models' data check compares the checksums in the same pass
    x = sources.to_zarr(a[:, 0].copy(), tmp_path / "x.zarr", rows_per_chunk=32,
                        rows_per_shard=128, progress=False)
    assert GaussianMean(x).N == 1000
    _flip_byte(tmp_path / "x.zarr" / "c" / "5", 8 * 7)
    with pytest.raises(sources.ChecksumError, match=r"rows \[640, 768\)"):
        GaussianMean(sources.ZarrSource(tmp_path / "x.zarr"))


def test_a_store_with_an_earlier_versions_checksums_is_called_old_not_corrupted(tmp_path):
    """Stores written before the CRC-32 checksums recorded BLAKE2b-128 digests per shard:
    their rows are sound, but the digests cannot be compared, and the error says so."""
    import hashlib

    a = np.random.default_rng(6).normal(size=(300, 2))
    sources.to_zarr(a, tmp_path / "old.zarr", rows_per_chunk=32, rows_per_shard=128,
                    progress=False)
    zarr = pytest.importorskip("zarr")
    arr = zarr.open_array(str(tmp_path / "old.zarr"), mode="r+")
    info = dict(arr.attrs[sources.CHECKSUM_ATTR])
    blocks = [hashlib.blake2b(np.ascontiguousarray(a[s:s + 128]).view(np.uint8).reshape(-1)
                              .data, digest_size=16).hexdigest() for s in range(0, 300, 128)]
    info["checksum"] = dict(info["checksum"], algorithm="blake2b-128", blocks=blocks)
    arr.attrs[sources.CHECKSUM_ATTR] = info           # as the earlier version wrote it
    old = sources.ZarrSource(tmp_path / "old.zarr")
    for check in (lambda: sources.verify(old, progress=False),       # and a model's checks
                  lambda: LinearRegression(old, np.zeros(300))):
        with pytest.raises(sources.ChecksumError) as err:
            check()
        msg = str(err.value)
        assert "older version of austerity" in msg and "corrupted" not in msg
        assert "austerity convert DATA STORE --overwrite" in msg and "'blake2b-128'" in msg


@pytest.mark.parametrize("fmt", ["npy", "h5"])
def test_write_store_round_trip(fmt, tmp_path):
    if fmt == "npy":
        np.save(tmp_path / "X.npy", X)
        np.save(tmp_path / "y.npy", LABELS)
        Xin = np.load(tmp_path / "X.npy", mmap_mode="r")
        yin = np.load(tmp_path / "y.npy", mmap_mode="r")
    else:
        f = h5py.File(tmp_path / "d.h5", "w")
        Xin, yin = f.create_dataset("X", data=X), f.create_dataset("y", data=LABELS)
    digests = sources.write_store(tmp_path / "s.zarr", Xin, yin, rows_per_chunk=64,
                                  rows_per_shard=1024, progress=False)
    Xs, ys = sources.open_store(tmp_path / "s.zarr")
    np.testing.assert_array_equal(Xs.read_range(0, N), X)
    np.testing.assert_array_equal(ys.read_range(0, N), LABELS)
    assert digests == {"X": Xs.checksum, "y": ys.checksum}
    f32 = sources.write_store(tmp_path / "f.zarr", Xin, yin, dtype="float32", progress=False)
    X32, _ = sources.open_store(tmp_path / "f.zarr")
    assert X32.dtype == np.float32 and f32["X"] != digests["X"]
    np.testing.assert_array_equal(X32.read_range(0, N), X.astype(np.float32))


# --- models on sources: every pass equals the in-memory one -------------------------------


def _point(dim, seed):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.3, dim)
    return theta, theta + rng.normal(0, 0.02, dim)


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.parametrize("name", list(MODELS))
def test_passes_on_a_store_equal_the_in_memory_passes(name, kind, tmp_path):
    build, arrays, dim = MODELS[name]
    mem = build(arrays)
    on_store = build(store(kind, arrays, tmp_path))
    assert on_store.data_sources() and not mem.data_sources()
    assert on_store.row_kernels is None          # chains: the Python loop, via read_rows
    theta, theta_new = _point(dim, 1)
    v_mem, _ = check_model(mem, theta)
    v_store, _ = check_model(on_store, theta)
    assert v_store._store
    assert v_store.full_loglik(theta) == v_mem.full_loglik(theta)
    np.testing.assert_array_equal(v_store.full_grad(theta), v_mem.full_grad(theta))
    ok_m, mom_m = v_mem.full_ratio_moments(theta, theta_new)
    ok_s, mom_s = v_store.full_ratio_moments(theta, theta_new)
    assert ok_m and ok_s and (mom_s.n, mom_s.mean, mom_s.m2) == (mom_m.n, mom_m.mean, mom_m.m2)
    draws = np.array([theta, theta, theta_new])
    np.testing.assert_array_equal(log_posterior(on_store, draws, progress=False),
                                  log_posterior(mem, draws, progress=False))
    if glm_kernels(mem) is not None:       # mode searches' and control variates' sums
        for a, b in zip(glm_sums(on_store, theta, chunk=CHUNK), glm_sums(mem, theta, chunk=CHUNK)):
            np.testing.assert_array_equal(a, b)
    idx = np.array([N - 1, 4, 4, 1000])      # the Python path: rows through read_rows
    np.testing.assert_array_equal(on_store.loglik_ratio(theta, theta_new, idx),
                                  mem.loglik_ratio(theta, theta_new, idx))
    np.testing.assert_array_equal(on_store.grad_loglik(theta, idx), mem.grad_loglik(theta, idx))


@pytest.mark.parametrize("name", list(MODELS))
def test_row_block_and_recipe(name, tmp_path):
    build, arrays, dim = MODELS[name]
    mem = build(arrays)
    on_store = build(store("zarr", arrays, tmp_path))
    theta, theta_new = _point(dim, 2)
    rows = np.arange(500, 900)
    for model in (mem, on_store):
        block = model.row_block(500, 900)
        assert type(block) is type(model) and block.N == 400 and not block.data_sources()
        assert (block.temperature, block.prior) == (model.temperature, model.prior)
        np.testing.assert_array_equal(block.loglik_ratio(theta, theta_new, np.arange(400)),
                                      mem.loglik_ratio(theta, theta_new, rows))
        recipe = model.block_recipe(500, 900)
        blob = pickle.dumps(recipe)
        if model is on_store:
            assert len(blob) < 3000          # paths and constants, not rows
        rebuilt = pickle.loads(blob)()
        np.testing.assert_array_equal(rebuilt.loglik(theta, np.arange(400)),
                                      mem.loglik(theta, rows))
    with pytest.raises(ValueError, match=r"0 <= start < stop <= N"):
        on_store.row_block(10, 10)
    with pytest.raises(TypeError, match="start must be an integer"):
        on_store.row_block(1.5, 10)


def test_control_variates_and_a_chain_on_a_store(tmp_path):
    """Control variates find the same mode with the same sums; a chain on the store model
    (the Python loop reading its rows with read_rows) is the in-memory chain, bit for bit."""
    from samplers import AustereTest, RandomWalk

    build, arrays, dim = MODELS["logistic"]
    cv_mem = ControlVariates(build(arrays))
    cv_store = ControlVariates(build(store("zarr", arrays, tmp_path)))
    np.testing.assert_array_equal(cv_store.center.theta, cv_mem.center.theta)
    np.testing.assert_array_equal(cv_store.center.hess, cv_mem.center.hess)
    theta, theta_new = cv_mem.center.theta, cv_mem.center.theta + 0.01
    v_mem, _ = check_model(cv_mem, theta)
    v_store, _ = check_model(cv_store, theta)
    a, b = v_mem.full_ratio_moments(theta, theta_new)[1], v_store.full_ratio_moments(theta, theta_new)[1]
    assert (a.n, a.mean, a.m2) == (b.n, b.mean, b.m2)
    block = pickle.loads(pickle.dumps(cv_store.block_recipe(100, 300)))()
    np.testing.assert_array_equal(block.loglik_ratio(theta, theta_new, np.arange(200)),
                                  cv_mem.loglik_ratio(theta, theta_new, np.arange(100, 300)))
    args = (AustereTest(m=100, epsilon=0.05), RandomWalk(0.02), theta, 60)
    chain_mem = sample(cv_mem, *args, rng=7, progress=False)
    chain_store = sample(cv_store, *args, rng=7, progress=False)
    np.testing.assert_array_equal(chain_store.samples, chain_mem.samples)


def test_trial_pair_statistics_on_a_store(tmp_path):
    from design import TrialChain

    build, arrays, dim = MODELS["logistic"]
    mem, on_store = build(arrays), build(store("zarr", arrays, tmp_path))
    rng = np.random.default_rng(3)
    thetas = rng.normal(0, 0.3, (5, dim))
    news = thetas + rng.normal(0, 0.02, (5, dim))
    a = TrialChain.from_model(mem, thetas, news, chunk=512, workers=2, progress=False)
    b = TrialChain.from_model(on_store, thetas, news, chunk=512, workers=2, progress=False)
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.sigma, b.sigma)


def test_a_pass_over_a_store_holds_a_few_blocks(tmp_path, monkeypatch):
    """A store of 2^20 rows (24 MB) read in blocks of 2^14 rows (384 KB): construction
    (finiteness, labels, checksums), the passes and the sums allocate a few blocks
    (tracemalloc), not N rows."""
    rows = 1 << 14
    monkeypatch.setattr(view_module, "FULL_CHUNK", rows)
    monkeypatch.setattr(sources, "BLOCK_BYTES", 24 * rows)     # one chunk of rows per block
    n = 1 << 20
    rng = np.random.default_rng(0)
    Xb = np.column_stack([np.ones(n), rng.normal(size=n)])
    yb = (rng.random(n) < 0.5).astype(float)
    sources.write_store(tmp_path / "big.zarr", Xb, yb, rows_per_shard=rows, progress=False)
    data_bytes = Xb.nbytes + yb.nbytes
    small = LogisticRegression(Xb[:1000], yb[:1000], prior=PRIOR)   # compile outside
    check_model(small, np.zeros(2))[0].full_loglik(np.zeros(2))
    check_model(small, np.zeros(2))[0].full_ratio_moments(np.zeros(2), np.full(2, 0.01))
    glm_sums(small, np.zeros(2), chunk=rows)
    del Xb, yb, small
    Xs, ys = sources.open_store(tmp_path / "big.zarr")
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        model = LogisticRegression(Xs, ys, prior=PRIOR)
        view, _ = check_model(model, np.zeros(2))
        L = view.full_loglik(np.zeros(2))
        view.full_ratio_moments(np.zeros(2), np.full(2, 0.01))
        glm_sums(model, np.zeros(2), chunk=rows)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert L == pytest.approx(n * np.log(0.5))
    block = 24 * rows
    assert peak < 8 * block < data_bytes / 2, (peak, block, data_bytes)


# --- bad input ------------------------------------------------------------------------------


def test_rows_differ_between_X_and_y(tmp_path):
    s = store("zarr", {"X": X, "y": LABELS[:-1]}, tmp_path)
    with pytest.raises(ValueError, match="a store whose rows differ between X and y"):
        LogisticRegression(s["X"], s["y"])
    group = zarr.open_group(str(tmp_path / "data.zarr"), mode="r+")
    group.attrs[sources.CHECKSUM_ATTR] = {}
    with pytest.raises(ValueError, match="rows differ between X and y"):
        sources.open_store(tmp_path / "data.zarr")


@pytest.mark.parametrize("kind", ["zarr", "h5"])
def test_nan_in_the_middle_of_a_store_names_the_row_range(kind, tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "BLOCK_BYTES", 8 * 500)           # blocks of 500 rows
    bad = X1.copy()
    bad[2345] = np.nan
    s = store(kind, {"x": bad}, tmp_path)
    with pytest.raises(ValueError, match=r"rows \[2000, 2500\).*first at row 2345: nan"):
        GaussianMean(s["x"])
    with skip_data_checks():                                       # the caller vouches
        model = GaussianMean(s["x"])
    assert model.N == N


def test_missing_paths_wrong_dtype_and_ndim(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sources.ZarrSource(tmp_path / "nope.zarr")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sources.open_store(tmp_path / "nope.zarr")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sources.H5Source(tmp_path / "nope.h5", "x")
    ints = zarr.create_array(str(tmp_path / "i.zarr"), shape=(10,), dtype="int64")
    with pytest.raises(TypeError, match="float32 or float64.*got dtype int64.*--dtype"):
        GaussianMean(ints)
    s = store("zarr", {"X": X, "y": LABELS}, tmp_path)
    with pytest.raises(ValueError, match=r"y must have 1 dimension\(s\), got shape \(3001, 3\)"):
        LogisticRegression(s["X"], s["X"])
    with pytest.raises(TypeError, match="must be a numpy array, a numpy memmap, a Zarr v3"):
        sources.as_source(object(), "X")


@pytest.mark.parametrize("name", ["mean", "logistic"])
def test_passes_on_a_dask_array_equal_the_in_memory_passes(name, tmp_path, monkeypatch):
    monkeypatch.setattr(view_module, "FULL_CHUNK", 1024)
    build, arrays, dim = MODELS[name]
    mem, on_dask = build(arrays), build(store("dask", arrays, tmp_path))
    theta, theta_new = _point(dim, 3)
    v_mem, _ = check_model(mem, theta)
    v_dask, _ = check_model(on_dask, theta)
    assert v_dask.full_loglik(theta) == v_mem.full_loglik(theta)
    a, b = v_mem.full_ratio_moments(theta, theta_new)[1], v_dask.full_ratio_moments(theta, theta_new)[1]
    assert (a.n, a.mean, a.m2) == (b.n, b.mean, b.m2)
    idx = np.array([N - 1, 4, 4])          # random rows from the backing store
    np.testing.assert_array_equal(on_dask.loglik(theta, idx), mem.loglik(theta, idx))


def test_a_dask_array_from_a_store_finds_its_backing_store(tmp_path):
    da = pytest.importorskip("dask.array")
    arr = store("zarr", {"x": X1}, tmp_path)["x"]
    for loaded in (da.from_zarr(arr), da.from_zarr(str(tmp_path / "data.zarr"), component="x"),
                   da.from_array(h5py.File(_h5(tmp_path), "r")["x"], chunks=500)):
        src = sources.as_source(loaded, "x")
        assert src.backing is not None
        np.testing.assert_array_equal(src.read_rows(np.array([9, 2])), X1[[9, 2]])
    assert sources.as_source(da.from_zarr(arr) * 2.0, "x").backing is None   # not the store's rows


def _h5(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f["x"] = X1
    return path


def test_a_dask_array_without_a_backing_store_refuses_random_rows(tmp_path):
    da = pytest.importorskip("dask.array")
    model = GaussianMean(da.from_array(X1, chunks=700))
    view, _ = check_model(GaussianMean(X1), np.zeros(1))
    with pytest.raises(TypeError, match=r"without a backing store.*backing="):
        model.loglik(np.zeros(1), np.array([3, 1]))
    # its passes read by blocks and need no random rows
    mem_view, _ = check_model(GaussianMean(X1), np.zeros(1))
    store_view = view_module.ModelView(model, 1)
    assert store_view.full_loglik(np.array([0.2])) == mem_view.full_loglik(np.array([0.2]))


def test_a_store_changed_after_it_was_written_is_refused(tmp_path):
    src = sources.to_zarr(np.zeros((100, 2)), tmp_path / "a.zarr", rows_per_chunk=16,
                          rows_per_shard=32, progress=False)
    arr = zarr.open_array(str(tmp_path / "a.zarr"), mode="r+")
    arr.attrs[sources.CHECKSUM_ATTR] = dict(src.attrs, shape=[99, 2])
    with pytest.raises(ValueError, match="changed after it was written"):
        sources.ZarrSource(tmp_path / "a.zarr")


def test_firefly_bounds_refuse_a_store(tmp_path):
    from samplers import JaakkolaJordanBound

    build, arrays, dim = MODELS["logistic"]
    on_store = build(store("zarr", arrays, tmp_path))
    with pytest.raises(TypeError, match="JaakkolaJordanBound needs a model whose rows are read "
                                        "in place.*X, y from a store"):
        JaakkolaJordanBound(on_store, 1.0)
    with pytest.raises(TypeError, match="JaakkolaJordanBound needs"):
        JaakkolaJordanBound.map_tuned(on_store, np.zeros(dim))


def test_row_scales_of_a_store_model_equal_the_in_memory_ones(tmp_path):
    from samplers.models.exact_rows import row_scales

    build, arrays, dim = MODELS["logistic"]
    cv_mem = ControlVariates(build(arrays))
    cv_store = ControlVariates(build(store("h5", arrays, tmp_path)))
    np.testing.assert_array_equal(row_scales(cv_store), row_scales(cv_mem))


@pytest.mark.parametrize("test", ["TunaMHTest", "ScalableSubsamplingTest"])
def test_exact_minibatch_chains_on_a_store_equal_the_in_memory_chains(test, tmp_path):
    """TunaMH and MH-SS read their Poisson batch's rows from the store each decision (the
    Python loop): the chain is the in-memory chain, bit for bit."""
    import samplers
    from samplers import RandomWalk

    build, arrays, dim = MODELS["logistic"]
    mem, on_store = build(arrays), build(store("zarr", arrays, tmp_path))
    start = ControlVariates(mem).center.theta
    chains = [sample(m, getattr(samplers, test)(), RandomWalk(0.01), start, 40, rng=5,
                     progress=False) for m in (mem, on_store)]
    np.testing.assert_array_equal(chains[1].samples, chains[0].samples)
    np.testing.assert_array_equal(chains[1].stats["n_used"], chains[0].stats["n_used"])


def test_a_store_whose_write_stopped_is_refused(tmp_path):
    """The group's attribute is written last: without it the store is refused (an
    interrupted write leaves rows at the fill value, which no check of values would see)."""
    zarr = pytest.importorskip("zarr")
    rng = np.random.default_rng(5)
    sources.write_store(tmp_path / "s.zarr", rng.normal(size=(200, 3)), rng.normal(size=200),
                        rows_per_chunk=64, rows_per_shard=128, progress=False)
    sources.open_store(tmp_path / "s.zarr")
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r+")
    del group.attrs[sources.CHECKSUM_ATTR]
    with pytest.raises(ValueError, match="not written to the end"):
        sources.open_store(tmp_path / "s.zarr")


def test_row_feeds_get_distinct_numbers_from_threads():
    from concurrent.futures import ThreadPoolExecutor

    from design._lib.rows import register_feed, unregister_feed

    with ThreadPoolExecutor(8) as pool:
        numbers = list(pool.map(lambda _: register_feed(lambda rows: None), range(400)))
    assert len(set(numbers)) == 400
    for n in numbers:
        unregister_feed(n)


@pytest.mark.parametrize("verify", [False, True])
def test_scan_rows_on_a_store_sees_the_in_memory_chunks(verify, tmp_path):
    """scan_rows hands ``fn`` blocks of ``chunk`` rows on a store as in memory (here the
    store's reads are 500 rows, or 512 with checksums: chunks of 100 rows straddle them),
    so GaussianMean's sum of the data, and its closed-form posterior, are the in-memory
    ones bit for bit."""
    from samplers.models._base import scan_rows

    src = sources.to_zarr(X1, tmp_path / "x.zarr", rows_per_chunk=64, rows_per_shard=512,
                          progress=False)
    first_rows = lambda b: (b.shape[0], float(b[0]), float(np.sum(b)))   # noqa: E731
    assert (list(scan_rows(src, first_rows, chunk=100, verify=verify))
            == list(scan_rows(X1, first_rows, chunk=100)))
    # data whose sum in 500-row reads rounds differently from the sum of one 3001-row chunk
    x = np.random.default_rng(2).normal(1.0, 1.3, N) * 1e3
    big = sources.to_zarr(x, tmp_path / "big.zarr", rows_per_chunk=64, rows_per_shard=512,
                          progress=False)
    on_store = GaussianMean(big, sigma=1.3, prior=GaussianPrior(0.0, 5.0))
    in_memory = GaussianMean(x, sigma=1.3, prior=GaussianPrior(0.0, 5.0))
    assert on_store.posterior() == in_memory.posterior()
    assert on_store._xsum == in_memory._xsum
    with pytest.raises(ValueError, match="chunk must be a positive"):
        next(scan_rows(src, np.sum, chunk=0))
