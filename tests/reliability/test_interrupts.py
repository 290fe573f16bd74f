"""Issue 27, items 1 and 7: Ctrl-C in ``sample`` (in the loop, while the chain is assembled,
during the bias check after it) keeps the samples, and Ctrl-C in ``design.optimize`` comes out
as a ``KeyboardInterrupt`` promptly, never as numba's ``SystemError``.

A real SIGINT is sent to a child process at a point the child announces on stdout (the
child wraps the function that starts the phase and prints a marker first): no timing decides
where the signal lands, only that the phase lasts longer than the pipe's latency. The child
reports what came back. Before the fix a Ctrl-C during the bias check of a designed test came
out as ``SystemError: CPUDispatcher(<function _errors>) returned a result with an exception
set`` (or a bare ``KeyboardInterrupt``) and the chain was lost, and one during
``design.optimize(..., workers=1)`` as a ``SystemError`` from ``dp_kernel``.
"""

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from samplers import ChainInterrupted

ROOT = Path(__file__).resolve().parents[2]
#: Seconds from the SIGINT to the child's report. The phases interrupted here answer between
#: compiled blocks (~0.05 s), chunks of the monitor's kernel or grid cells of the optimiser:
#: 0.001-0.11 s measured at load 13 on 2 cores. The bound is generous for a loaded machine;
#: what came back, not the time, is the main check.
PROMPT = 5.0
#: Seconds a child may take to import, compile (a cold cache) and reach its marker.
START = 600


def _abort(pid, group=False):
    """The watchdog's end of a hung child (or of its process ``group``): SIGABRT, on which
    the child's faulthandler (``PYTHONFAULTHANDLER=1``) writes every thread's stack to its
    stderr, which the failure message shows; SIGKILL if it is still there 10 s later."""
    send = os.killpg if group else os.kill
    try:
        send(pid, signal.SIGABRT)
        time.sleep(10.0)
        send(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

SAMPLE_CHILD = r'''
import sys, warnings
import numpy as np
import samplers._chain as chain_module
from samplers import AustereTest, GaussianMean, RandomWalk, sample

mode, n = sys.argv[1], int(sys.argv[2])
model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 20_000))
test = AustereTest(m=100, epsilon=0.05, tolerance=0.5)   # a designed test: the check runs

def marked(name, func):
    def wrapper(*args, **kwargs):
        print(name, flush=True)
        return func(*args, **kwargs)
    return wrapper

sample(model, test, RandomWalk(0.01), [1.0], 20, rng=0, progress=False,
       compiled=mode != "python")                        # compile before the markers exist
chain_module.run_blocks = marked("LOOP", chain_module.run_blocks)
chain_module.run_chain = marked("LOOP", chain_module.run_chain)
chain_module.warn_if_biased = marked("CHECK", chain_module.warn_if_biased)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        chain = sample(model, test, RandomWalk(0.01), [1.0], n, rng=1, progress=False,
                       compiled=mode != "python")
        k = chain.samples.shape[0]
        same = all(v.shape == (k,) for v in chain.stats.values())
        print("RESULT kept", k, "stats" if same else "ragged", flush=True)
    except BaseException as exc:
        print("RESULT raised", type(exc).__name__, str(exc)[:200], flush=True)
for w in caught:
    if issubclass(w.category, UserWarning):
        print("WARNING", w.category.__name__, w.message, flush=True)
'''

OPTIMIZE_CHILD = r'''
import sys
import numpy as np
from design import TrialChain, optimize

workers = int(sys.argv[1])
rng = np.random.default_rng(0)
trial = TrialChain(mu=rng.normal(0.0, 1e-4, 40), sigma=rng.uniform(0.01, 0.05, 40),
                   c0=np.zeros(40), N=1_000_000)
optimize(TrialChain(mu=[0.0], sigma=[0.01], c0=[0.0], N=10_000), tolerance=0.05,
         progress=False)                                  # compile before the marker
print("OPTIMIZE", flush=True)
try:
    optimize(trial, tolerance=0.02, workers=workers, search="full", progress=False)
    print("RESULT finished", flush=True)
except BaseException as exc:
    print("RESULT raised", type(exc).__name__, str(exc)[:200], flush=True)
'''


def interrupt(tmp_path, code, args, marker, delay=0.0):
    """Run ``code`` with ``args`` in a child, send SIGINT ``delay`` s after it prints
    ``marker``; return (the RESULT line, the WARNING lines, seconds from SIGINT to RESULT)."""
    script = tmp_path / "child.py"
    script.write_text(code)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    child = subprocess.Popen([sys.executable, str(script), *map(str, args)], cwd=tmp_path,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    sent = result = elapsed = None
    warned = []
    watchdog = threading.Timer(START, _abort, (child.pid,))   # fails the test, not the run
    watchdog.start()
    try:
        for line in child.stdout:
            line = line.strip()
            if line == marker and sent is None:
                time.sleep(delay)
                child.send_signal(signal.SIGINT)
                sent = time.monotonic()
            elif line.startswith("RESULT"):
                result, elapsed = line, time.monotonic() - sent if sent else None
            elif line.startswith("WARNING"):
                warned.append(line)
        child.wait(timeout=60)
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
    err = child.stderr.read()
    assert child.returncode == 0, (f"child exited {child.returncode} (-6: the watchdog; its "
                                   f"stacks): {err[-20000:]}")
    assert result is not None, f"no result from the child: {err[-2000:]}"
    return result, warned, elapsed


@pytest.mark.parametrize("mode", ["compiled", "python"])
def test_ctrl_c_in_the_loop_keeps_the_steps_so_far(tmp_path, mode):
    n = 10**6
    result, warned, elapsed = interrupt(tmp_path, SAMPLE_CHILD, [mode, n], "LOOP", delay=0.5)
    words = result.split()
    assert words[:2] == ["RESULT", "kept"], result
    k = int(words[2])
    assert 0 < k < n and words[3] == "stats"
    assert warned == [f"WARNING ChainInterrupted interrupted after {k} of {n} steps: returning "
                      f"the {k} samples drawn so far"]   # and no bias check after it
    assert elapsed < PROMPT


def test_ctrl_c_during_the_bias_check_returns_the_whole_chain_unchecked(tmp_path):
    for n in (10_000, 80_000):   # a longer check if the first one beat the signal
        result, warned, elapsed = interrupt(tmp_path, SAMPLE_CHILD, ["compiled", n], "CHECK")
        assert result == f"RESULT kept {n} stats", result
        if warned:
            break
    assert len(warned) == 1 and "during the bias check after the chain: returning its " \
        f"{n} samples unchecked" in warned[0], warned
    assert elapsed < PROMPT


@pytest.mark.parametrize("workers, delay", [(1, 0.3), (1, 1.5), (2, 0.8)])
def test_ctrl_c_in_optimize_is_a_keyboard_interrupt(tmp_path, workers, delay):
    """``workers=1`` runs the grid's programmes in the main thread, where a Ctrl-C reaches
    numba's boxing of ``dp_kernel``'s arrays."""
    result, _, elapsed = interrupt(tmp_path, OPTIMIZE_CHILD, [workers], "OPTIMIZE", delay)
    if result == "RESULT finished":   # a fast machine: the search beat the signal
        pytest.skip(f"design.optimize finished within {delay} s")
    assert result.startswith("RESULT raised KeyboardInterrupt"), result
    assert elapsed < PROMPT


def _steps(n):
    """A Python-loop chain of ``n`` steps for ``run_chain`` (theta counts the steps)."""
    from collections import namedtuple

    State = namedtuple("State", "theta")
    return (lambda s: (State(s.theta + 1.0), {})), State(np.zeros(1)), n


def _chain_of(samples, infos, wall):
    from samplers._chain import Chain

    stats = {"accepted": np.ones(len(infos), bool), "n_used": np.full(len(infos), 10)}
    return Chain(samples, stats, 100, wall, None, None, np.zeros(1))


def _interrupting(samples, infos, wall):
    os.kill(os.getpid(), signal.SIGINT)       # arrives while the records are copied
    return _chain_of(samples, infos, wall)


def test_a_ctrl_c_while_the_chain_is_assembled_is_held_and_the_chain_kept(no_gc_callbacks):
    from samplers._chain import run_chain

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this process's SIGINT handler is not Python's default")

    with pytest.warns(ChainInterrupted, match="while its records were assembled"):
        chain, interrupted = run_chain(*_steps(5), _interrupting, progress=False)
    assert interrupted and chain.samples[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chain, interrupted = run_chain(*_steps(2), _chain_of, progress=False)
    assert not interrupted and chain.samples.shape == (2, 1)


def test_the_bias_check_is_unchanged_by_its_chunks():
    """The monitor's kernel runs in chunks of decisions (a Ctrl-C is seen between them) on
    every core: the estimates are those of one call over all of them, bit for bit."""
    from design import _monitor

    rng = np.random.default_rng(3)
    n = 9 * _monitor._CHUNK + 17
    N = 50_000
    mean, sd = rng.normal(0.0, 2e-4, n), rng.uniform(1e-3, 3e-3, n)
    used = rng.integers(100, N + 1, n).astype(float)
    c = rng.normal(0.0, 1.0, n)
    out = _monitor.decision_errors(mean, sd, used, c, N=N, m=100, epsilon=0.05)
    grid, err, moments = _monitor.error_table(N, 100, 0.05, "normal", moments=True)
    m0, v0 = _monitor._prior(mean, sd, used, c, float(N))
    ref = np.empty(n)
    _monitor._errors(mean, sd, used, c, float(N), True, m0, v0, grid, err, moments,
                     _monitor._GH_X, _monitor._GH_W, ref, 0, n)
    assert np.all(out > 0)
    np.testing.assert_array_equal(out, ref)


def test_python_loop_takes_ctrl_c_between_steps_and_a_second_press_at_once(no_gc_callbacks):
    """The Python loop holds a Ctrl-C until the step it came in ends (a KeyboardInterrupt
    raised while a compiled test driver boxed its returned arrays crashed the process, about
    1 press in 10 on a 20,000-row chain before); a second Ctrl-C interrupts at once."""
    from collections import namedtuple

    from samplers._chain import run_chain

    State = namedtuple("State", "theta")
    finished = []

    def step(state, presses):
        if len(finished) == 3:
            for _ in range(presses):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)                  # the handler runs within the step
        finished.append(len(finished))
        return State(state.theta + 1.0), {}

    with pytest.warns(ChainInterrupted, match="interrupted after 4 of 100 steps"):
        chain, interrupted = run_chain(lambda s: step(s, 1), State(np.zeros(1)), 100,
                                       _chain_of, progress=False)
    assert finished == [0, 1, 2, 3] and chain.samples[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert interrupted
    finished.clear()
    with pytest.warns(ChainInterrupted, match="interrupted after 3 of 100 steps"):
        chain, _ = run_chain(lambda s: step(s, 2), State(np.zeros(1)), 100, _chain_of,
                             progress=False)
    assert finished == [0, 1, 2] and chain.samples.shape == (3, 1)   # the 4th was cut short
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.fixture
def as_a_worker(no_gc_callbacks):
    """This process as a worker of sample_chains' pool: its SIGINT handler, no Ctrl-C yet."""
    from samplers import _chain

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this process's SIGINT handler is not Python's default")
    saved = _chain._INTERRUPTED
    _chain._INTERRUPTED = False
    signal.signal(signal.SIGINT, _chain._on_interrupt)
    try:
        yield _chain
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _chain._INTERRUPTED = saved


#: The opcode-trace tests below read CPython 3.11's trace events: on 3.13 the trace of
#: ``_in_worker`` reports no opcode after the chain's call returns, and the worker cases
#: report places after the last hold's release as losses (not yet examined there).
OPCODE_TRACE = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                                  reason="opcode trace examined on CPython 3.11 only")


@OPCODE_TRACE
def test_a_worker_ctrl_c_anywhere_in_in_worker_stops_the_chain_or_keeps_it_whole(as_a_worker):
    """A worker's Ctrl-C handled at each instruction of ``_in_worker`` in turn (its handler
    called from an opcode trace: deterministic, and a superset of the places where CPython
    runs a signal handler). Before the chain starts, the chain stops without a step
    (KeyboardInterrupt); once it has returned, the whole chain is kept. Before the fix, a
    Ctrl-C between ``_in_worker``'s check and its call of the chain was noted, not raised,
    and the chain ran to its end; the reviewer's ``result = fn(*args)`` with a check of
    ``f_locals`` lost a finished chain (the call returned, ``result`` not yet stored)."""
    from collections import namedtuple

    _chain = as_a_worker
    State = namedtuple("State", "theta")
    started = []

    def chain():
        started.append(True)
        return _chain.run_chain(lambda s: (State(s.theta + 1.0), {}), State(np.zeros(1)), 50,
                                _chain_of, progress=False)

    def run(at):
        """``_in_worker(chain)`` with the handler run before the instruction at offset ``at``
        (None: never); the offsets seen, each with whether the chain had started then."""
        seen = []

        def local(frame, event, arg):
            if event == "opcode":
                seen.append((frame.f_lasti, bool(started)))
                if frame.f_lasti == at:
                    _chain._on_interrupt(signal.SIGINT, frame)
            return local

        def trace(frame, event, arg):
            if event == "call" and frame.f_code is _chain._in_worker.__code__:
                frame.f_trace_opcodes = True
                frame.f_trace_lines = False
                return local
            return None

        started.clear()
        _chain._INTERRUPTED = False
        sys.settrace(trace)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")           # no ChainInterrupted: whole or none
                return _chain._in_worker(chain)[0].samples.shape[0], seen
        except KeyboardInterrupt:
            return 0, seen
        finally:
            sys.settrace(None)

    kept, places = run(None)
    assert kept == 50 and any(s for _, s in places) and not all(s for _, s in places)
    for at, after_start in places:
        kept, _ = run(at)
        assert kept == (50 if after_start else 0), (at, after_start, kept)
        assert _chain._INTERRUPTED            # noted: the worker's next chain stops at once


def test_a_worker_takes_ctrl_c_between_steps_and_ignores_the_forwarded_copy(as_a_worker):
    """In a pool worker the Python loop holds the first Ctrl-C until the step it came in
    ends, as in the main process; the copy the main process forwards is ignored. Before the
    fix the worker's handler raised inside the step (the 4th step was cut short)."""
    from collections import namedtuple

    _chain = as_a_worker
    State = namedtuple("State", "theta")
    finished = []

    def step(state):
        if len(finished) == 3:
            for _ in range(2):                    # the terminal's Ctrl-C and the forwarded one
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)                  # the handler runs within the step
        finished.append(len(finished))
        return State(state.theta + 1.0), {}

    loop = partial(_chain.run_chain, finish=_chain_of, progress=False)
    with pytest.warns(ChainInterrupted, match="interrupted after 4 of 100 steps"):
        try:
            chain, _ = _chain._in_worker(loop, step, State(np.zeros(1)), 100)
        except KeyboardInterrupt:                 # not out of the test: it would end the run
            pytest.fail(f"the chain was lost after the steps {finished}")
    assert finished == [0, 1, 2, 3] and chain.samples[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert _chain._INTERRUPTED and signal.getsignal(signal.SIGINT) is _chain._on_interrupt
    with pytest.raises(KeyboardInterrupt):        # the worker's next chain: no step
        _chain._in_worker(loop, step, State(np.zeros(1)), 100)


def test_a_worker_ctrl_c_while_the_chain_is_assembled_keeps_the_chain(as_a_worker):
    """Before the fix the worker's handler raised inside the assembly: the chain was
    lost."""
    _chain = as_a_worker
    loop = partial(_chain.run_chain, finish=_interrupting, progress=False)
    with pytest.warns(ChainInterrupted, match="while its records were assembled"):
        try:
            chain, interrupted = _chain._in_worker(loop, *_steps(5))
        except KeyboardInterrupt:                 # not out of the test: it would end the run
            pytest.fail("the chain was lost")
    assert interrupted and chain.samples.shape == (5, 1)
    assert _chain._INTERRUPTED and signal.getsignal(signal.SIGINT) is _chain._on_interrupt


def _trace_sample(at, *, compiled, worker):
    """``sample`` (from a pool worker's ``_in_worker`` if ``worker``) on a 3-step chain, with
    the SIGINT handler in place called at the ``at``-th opcode (None: never) of ``sample``,
    ``_run``, the loops, ``_interrupted_after`` and ``HeldInterrupt``'s entry and exit:
    what a real Ctrl-C does there, deterministically (a superset of the places where
    CPython runs a signal handler). Returns the chain (None if ``KeyboardInterrupt`` came
    out), the ChainInterrupted warnings, and for each opcode reached ``(where, stepped, made,
    held)``: the function and offset, whether a step had been made, whether the chain had
    been made from the loop's arrays, whether a hold was in place."""
    from samplers import ExactTest, GaussianMean, RandomWalk, sample
    from samplers import _chain
    from design._lib.interrupts import HeldInterrupt

    codes = {f.__code__ for f in (sample, _chain._run, _chain.run_chain, _chain.run_blocks,
                                  _chain._interrupted_after, HeldInterrupt.__enter__,
                                  HeldInterrupt.__exit__)}
    loops = {_chain.run_chain.__code__: "infos", _chain.run_blocks.__code__: "done"}
    model = GaussianMean(np.random.default_rng(0).normal(1.0, 1.0, 200))
    seen = []

    def local(frame, event, arg):
        if event == "opcode":
            step, made = seen[-1][1:3] if seen else (False, False)
            name = loops.get(frame.f_code)
            step = step or (name is not None and bool(frame.f_locals.get(name)))
            made = made or (name is not None and "chain" in frame.f_locals)
            handler = signal.getsignal(signal.SIGINT)
            held = isinstance(getattr(handler, "__self__", None), HeldInterrupt)
            seen.append((f"{frame.f_code.co_name}:{frame.f_lasti}", step, made, held))
            if len(seen) - 1 == at:
                handler(signal.SIGINT, frame)
        return local

    def trace(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return local
        return None

    _chain._INTERRUPTED = False
    quiet = partial(sample, progress=False, compiled=compiled)
    run = partial(_chain._in_worker, quiet) if worker else quiet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.settrace(trace)
        try:
            chain = run(model, ExactTest(), RandomWalk(0.3), np.array([1.0]), 3, 5)
        except KeyboardInterrupt:
            chain = None
        finally:
            sys.settrace(None)
    return chain, [w for w in caught if issubclass(w.category, ChainInterrupted)], seen


@OPCODE_TRACE
@pytest.mark.parametrize("worker", [False, True], ids=["main", "worker"])
@pytest.mark.parametrize("compiled", [False, True], ids=["python", "compiled"])
def test_a_ctrl_c_anywhere_in_sample_keeps_the_steps_made(as_a_worker, compiled, worker):
    """A Ctrl-C handled at each opcode of ``sample``, ``_run`` and the loops in turn (see
    :func:`_trace_sample`) never loses a step made while the loop's hold is in place: before
    the first step it raises ``KeyboardInterrupt``; after it the chain so far (a prefix of the
    uninterrupted chain, bit for bit) comes back with a ``ChainInterrupted`` warning. Only
    the bytecodes after the hold's release, once the chain is made (the rest of its
    ``__exit__``, the loop's and ``_run``'s returns, the bias check's call, ``sample``'s
    return), still raise: the residual Python cannot close, bounded here. Before the fix
    (integ at 501b595) 67-102 of 423-529 places in these frames lost the chain: the loop's
    hold was released before the bar was closed and the chain was assembled under a second
    hold."""
    _chain = as_a_worker
    if not worker:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    whole, caught, places = _trace_sample(None, compiled=compiled, worker=worker)
    assert not caught and whole.samples.shape[0] == 3
    lost, residual = [], []
    for at, (where, stepped, made, held) in enumerate(places):
        chain, warned, _ = _trace_sample(at, compiled=compiled, worker=worker)
        if chain is None:
            if stepped:
                (residual if made and not held else lost).append(where)
            continue
        k = chain.samples.shape[0]
        np.testing.assert_array_equal(chain.samples, whole.samples[:k])
        for name, column in chain.stats.items():
            np.testing.assert_array_equal(column, whole.stats[name][:k])
        if not warned:                    # the Ctrl-C was dropped
            lost.append(where)
    assert not lost, f"{len(lost)} of {len(places)} places lost the chain or the Ctrl-C: {lost}"
    assert len(residual) <= 50, residual   # 44 on CPython 3.11


def _trace_pass(at):
    """``run_chunks`` over 4 chunks on 2 threads of a new pool, with the SIGINT handler in
    place called at the ``at``-th opcode (None: never) of the pass and of the pool's and
    threading's Python code under it (a superset of the places where CPython runs a signal
    handler). Returns whether ``KeyboardInterrupt`` came out, the pool, and the opcodes
    reached."""
    import concurrent.futures
    import concurrent.futures.thread

    from design._lib import passes

    files = {threading.__file__, concurrent.futures._base.__file__,
             concurrent.futures.thread.__file__, passes.__file__}
    seen = []

    def local(frame, event, arg):
        if event == "opcode":
            seen.append(f"{frame.f_code.co_name}:{frame.f_lasti}")
            if len(seen) - 1 == at:
                signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)
        return local

    def trace(frame, event, arg):
        if event == "call" and frame.f_code.co_filename in files:
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return local
        return None

    out = np.zeros(4)
    passes._pool = None                       # a new pool: its threads start in this pass
    sys.settrace(trace)
    try:
        passes.run_chunks(lambda out, c0, c1: out.__setitem__(slice(c0, c1), 1.0), 4, out,
                          threads=2)
        raised = False
    except KeyboardInterrupt:
        raised = True
    finally:
        sys.settrace(None)
    return raised, passes._pool, seen


@OPCODE_TRACE
def test_a_ctrl_c_anywhere_in_a_pass_leaves_the_pool_whole(no_gc_callbacks):
    """A Ctrl-C at each opcode of a full-data pass (``run_chunks``, as in the bias check,
    whose first pass also starts the pool's threads) in turn comes out as
    ``KeyboardInterrupt`` and leaves every pool thread known to the interpreter's exit and
    able to finish. Before the fix 12:00 UTC runs of
    ``test_ctrl_c_during_the_bias_check_returns_the_whole_chain_unchecked`` hung 3 times in
    12 at load 6-8: the child printed its result, then waited at exit for ever (main thread
    in ``threading._shutdown``, a pool thread in ``work_queue.get``), as the Ctrl-C had
    landed in ``Thread.start`` of a pool thread, before ``ThreadPoolExecutor`` registered
    the thread for the exit; a Ctrl-C in ``Condition.__enter__`` of a future could also
    leave its lock taken, and the thread that sets its result blocked."""
    import concurrent.futures.thread

    from design._lib import passes

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this process's SIGINT handler is not Python's default")
    saved = passes._pool
    # a Ctrl-C that leaves a lock taken hangs the next pass: end the process (its stacks on
    # stderr) rather than the whole run
    faulthandler.dump_traceback_later(300, exit=True)
    try:
        raised, _, places = _trace_pass(None)
        assert not raised and len(places) > 50
        stuck, lost = [], []
        for at in range(len(places)):
            raised, pool, seen = _trace_pass(at)
            where = seen[at] if at < len(seen) else "after"
            if at < len(seen) and not raised:
                lost.append(where)            # a Ctrl-C the pass dropped
            if pool is None:
                continue
            unknown = [t for t in threading.enumerate() if t.name.startswith("austerity-pass")
                       and t not in concurrent.futures.thread._threads_queues]   # exit skips
            closer = threading.Thread(target=pool.shutdown, daemon=True)
            closer.start()
            closer.join(5.0)
            if unknown or closer.is_alive():
                stuck.append(where)
                if len(stuck) == 3:           # enough: each costs the 5 s wait
                    break
        assert not stuck, f"{len(stuck)} of {len(places)} places left a pool thread: {stuck}"
        assert not lost, f"{len(lost)} of {len(places)} places dropped the Ctrl-C: {lost}"
    finally:
        faulthandler.cancel_dump_traceback_later()
        passes._pool = saved


def test_after_a_ctrl_c_every_interrupted_chain_is_waited_for_until_a_second_one():
    """After a Ctrl-C, fit waits for each interrupted worker's partial chain however long its
    finish takes (a 5 s grace dropped a chain whose worker compiled its bias check on a cold
    cache under load: the parallel Ctrl-C test's flake); chains not started are cancelled;
    a second Ctrl-C gives up on those still out and keeps what came back."""
    from concurrent.futures import Future

    from samplers._chain import _gather_after_interrupt

    slow, quick, queued = Future(), Future(), Future()
    for f in (slow, quick):
        f.set_running_or_notify_cancel()
    threading.Timer(0.2, quick.set_result, ("quick",)).start()
    threading.Timer(1.5, slow.set_result, ("slow",)).start()
    t = time.perf_counter()
    assert _gather_after_interrupt([slow, quick, queued]) == ["slow", "quick"]
    assert queued.cancelled() and time.perf_counter() - t >= 1.4

    stuck, back = Future(), Future()
    for f in (stuck, back):
        f.set_running_or_notify_cancel()
    back.set_result("back")
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a second Ctrl-C is delivered to the main thread only")
    # to the process, as a terminal's Ctrl-C (the kernel hands it to the main thread)
    faulthandler.dump_traceback_later(60, exit=True)      # a lost signal: fail, not hang
    try:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        assert _gather_after_interrupt([back, stuck]) == ["back"]
    finally:
        faulthandler.cancel_dump_traceback_later()
