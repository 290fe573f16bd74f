"""Shared test configuration: a derandomised, capped hypothesis profile, and a check that no
test leaves a SIGINT handler behind."""

import gc
import signal
import warnings

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "austerity",
    derandomize=True,
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("austerity")

# ArviZ announces its refactor on import; the tests use only its stable API.
warnings.filterwarnings("ignore", message=".*ArviZ is undergoing a major refactor.*")


@pytest.fixture(autouse=True)
def _sigint_handler_left_as_found():
    """Every test leaves Ctrl-C's handler as it found it: a handler left behind (by the code
    under test or a library it starts) would make a later in-process Ctrl-C test wait for a
    KeyboardInterrupt that never comes."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left SIGINT's handler {after!r} installed (it was {before!r})")


@pytest.fixture
def no_gc_callbacks():
    """Run an in-process Ctrl-C test without garbage-collector callbacks.

    Hypothesis times collections with a ``gc.callbacks`` entry once it has run in a process;
    a KeyboardInterrupt whose handler happens to run inside that callback is reported as
    unraisable and dropped (seen in a full run: "Exception ignored in: gc_callback ...
    KeyboardInterrupt"), so the test's Ctrl-C would never reach the code under test. A
    user's process has no such callback."""
    saved = list(gc.callbacks)
    gc.callbacks.clear()
    try:
        yield
    finally:
        gc.callbacks[:0] = [c for c in saved if c not in gc.callbacks]
