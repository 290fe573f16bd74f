"""Progress (issue 16): tqdm bars only on a terminal unless asked, plain short lines in logs,
and a one-line notice while numba compiles."""

import io

import numba
import numpy as np
import pytest

import design
import validation
from design._lib import progress as progress_mod
from samplers import ExactTest, GaussianMean, RandomWalk, sample

MODEL = GaussianMean(np.random.default_rng(0).normal(0.5, 1.0, 3_000))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_off_by_default_when_not_a_terminal(capsys):
    sample(MODEL, ExactTest(), RandomWalk(0.02), [0.5], 200, rng=0)   # progress=None
    assert capsys.readouterr().err == ""
    with progress_mod.progress_bar(5, desc="x", stream=io.StringIO()) as bar:
        bar.update(5)
    assert bar.disable


def test_on_by_default_on_a_terminal():
    term = Terminal()
    with progress_mod.progress_bar(5, desc="steps", stream=term) as bar:
        bar.update(5)
    assert "steps" in term.getvalue() and "\r" in term.getvalue()


def test_forced_on_a_log_file_writes_short_plain_lines(capsys):
    chain = sample(MODEL, ExactTest(), RandomWalk(0.02), [0.5], 3_000, rng=0, progress=True)
    err = capsys.readouterr().err
    assert "sampling" in err and "3000/3000" in err
    assert "\r" not in err
    assert max(len(line) for line in err.splitlines()) < 200
    # progress never changes the result
    quiet = sample(MODEL, ExactTest(), RandomWalk(0.02), [0.5], 3_000, rng=0, progress=False)
    np.testing.assert_array_equal(chain.samples, quiet.samples)


def test_trial_chain_design_grid_and_clt_check_report(capsys):
    rng = np.random.default_rng(1)
    thetas = 0.5 + 0.02 * rng.standard_normal((4, 1))
    trial = design.TrialChain.from_model(MODEL, thetas, thetas + 0.02, chunk=500, progress=True)
    design.optimize(trial, 0.2, m_grid=[100], epsilon_grid=[0.05, 0.1], workers=1,
                    progress=True)
    validation.clt_check(MODEL, (thetas, thetas + 0.02), batch_size=100, n_sim=1_000,
                         tolerance=0.2, search=False, rng=2, progress=True)
    err = capsys.readouterr().err
    for desc in ("trial-pair statistics", "design grid", "CLT check"):
        assert desc in err


def test_progress_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="progress must be True, False or None, got 1"):
        sample(MODEL, ExactTest(), RandomWalk(0.02), [0.5], 5, progress=1)


def test_one_line_notice_while_numba_compiles(monkeypatch):
    monkeypatch.setattr(progress_mod, "_notice_shown", False)
    out = io.StringIO()

    @numba.njit   # a new function: numba compiles it on its first call
    def twice(x):
        return 2 * x

    with progress_mod.compile_notice(True, stream=out):
        assert twice(2) == 4
        assert twice(3) == 6
    with progress_mod.compile_notice(True, stream=out):
        assert twice(2.5) == 5.0        # a new compilation, but the notice is once per process
    assert out.getvalue() == progress_mod.COMPILE_NOTICE + "\n"
