"""The compiled loops are cached on disk across processes.

The loops are closures over other compiled functions; numba keys a closure's cache entry
by a pickle of its cells, which would carry a random per-process dispatcher uuid unless
``design._lib.jit`` pins it. Then every process recompiled (seconds for the Barker test) and
appended to the cache files. Here a second process must load the compiled chain loops from
the cache (the suite's, completed by a first process), and save nothing.
"""

import os
import subprocess
import sys

import numpy as np

from design._lib.jit import jit, stable_uuid

SCRIPT = """
import numpy as np
from samplers import AustereTest, BarkerTest, GaussianMean, RandomWalk, sample
model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 2_000))
for test in (AustereTest(m=100, epsilon=0.05), BarkerTest(m=100)):
    sample(model, test, RandomWalk(0.01), [1.0], 3, rng=0)
"""


def run():
    """The numba cache lines (``NUMBA_DEBUG_CACHE``) of a fresh process running ``SCRIPT``,
    its cache where the suite's own compiled code is."""
    env = dict(os.environ, NUMBA_DEBUG_CACHE="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return [line for line in done.stdout.splitlines() if "data saved" in line
            or "data loaded" in line]


def test_a_second_process_compiles_nothing():
    """In the suite's own cache (compiling both loops into an empty one took 44 s cold): a
    first process compiles what the cache lacks, a second loads both chain loops (which
    hold the engine and the rest) and saves nothing."""
    run()
    second = run()
    loops = {line for line in second if "data loaded" in line and "mh_kernel" in line}
    assert len(loops) == 2, second                  # the chain loop of each test, loaded
    saved = [line for line in second if "data saved" in line]
    assert saved == [], "recompiled in a fresh process:\n" + "\n".join(saved)


def test_uuid_follows_the_code_and_the_closure():
    def make(scale):
        @jit
        def f(x):
            return scale * x
        return f

    assert make(2.0)._uuid == make(2.0)._uuid
    assert make(2.0)._uuid != make(3.0)._uuid
    assert make(2.0)(np.float64(1.5)) == 3.0
    assert stable_uuid(make(2.0).py_func) == make(2.0)._uuid


def test_uuid_follows_a_constant_of_a_kernel_a_closure_holds():
    """A closure over a pinned kernel stands for it by the kernel's uuid: a constant changed
    in the kernel (same bytecode) must change both uuids, or a closure cached on disk with
    the old kernel would load in its place, and two closures would unpickle as one."""
    def kernel(source):
        scope = {}
        exec(source, scope)
        return jit(scope["link"], cache=False)     # no file to cache it by

    def outer(link):
        @jit
        def apply(x):
            return link(x) + 1.0
        return apply

    a, b = kernel("def link(x):\n    return x * 2.0"), kernel("def link(x):\n    return x * 3.0")
    assert a._uuid != b._uuid
    assert outer(a)._uuid != outer(b)._uuid
    assert outer(a)._uuid == outer(kernel("def link(x):\n    return x * 2.0"))._uuid
    assert (outer(a)(1.0), outer(b)(1.0)) == (3.0, 4.0)


def test_the_code_digest_reads_names_nested_code_and_sorts_sets():
    from design._lib.jit import _const_repr

    def function(source):
        scope = {}
        exec(source, scope)
        return scope["f"]

    same = function("def f():\n    return g(1.5)")
    assert stable_uuid(same) == stable_uuid(function("def f():\n    return g(1.5)"))
    assert stable_uuid(same) != stable_uuid(function("def f():\n    return k(1.5)"))
    assert (stable_uuid(function("def f():\n    return lambda: 2"))
            != stable_uuid(function("def f():\n    return lambda: 3")))
    assert _const_repr(frozenset({"b", "a", "c"})) == "frozenset('a', 'b', 'c')"


def test_without_numbas_private_hook_caching_falls_back_with_one_warning(monkeypatch):
    """A numba release without ``_set_uuid`` (private) must still compile correct kernels:
    plain caching, and one NumbaCacheWarning saying what is lost."""
    import warnings

    import pytest
    from numba.core.dispatcher import _MemoMixin
    from numba.core.extending import _Intrinsic

    import design._lib.jit as jit_module

    monkeypatch.delattr(_MemoMixin, "_set_uuid")
    monkeypatch.delattr(_Intrinsic, "_set_uuid")
    monkeypatch.setattr(jit_module, "_warned", False)

    def scale(x):
        return 3.0 * x

    with pytest.warns(jit_module.NumbaCacheWarning, match=r"has no \w*Dispatcher\._set_uuid.*plain"):
        f = jit(scale)
    assert f(np.float64(2.0)) == 6.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # the second kernel: no second warning
        g = jit(lambda x: x + 1.0)
        jit_module.intrinsic(lambda typingctx, x: None)
    assert g(np.float64(1.0)) == 2.0


def test_a_hook_that_changed_behaviour_also_falls_back(monkeypatch):
    import pytest
    from numba.core.dispatcher import _MemoMixin

    import design._lib.jit as jit_module

    def changed(self, u, extra):   # a new signature in some future numba
        raise AssertionError("unreachable")

    monkeypatch.setattr(_MemoMixin, "_set_uuid", changed)
    monkeypatch.setattr(jit_module, "_warned", False)
    with pytest.warns(jit_module.NumbaCacheWarning, match="failed .TypeError"):
        f = jit(lambda x: 2.0 * x)
    assert f(np.float64(4.0)) == 8.0
