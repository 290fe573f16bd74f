"""Reliability case 9 of issue 16: the built-in models' construction scans are chunked, show
progress on a terminal, can be skipped explicitly, and the bound's data summaries are
computed on first use only."""

import numpy as np
import pytest

from design._lib import progress
from samplers import ConfidenceTest, GaussianMean, LinearRegression, LogisticRegression, RandomWalk
from samplers import sample
from samplers.datasets import logistic_regression, write_memmap
from samplers.models import skip_data_checks


def test_construction_checks_and_names_the_bad_row():
    x = np.random.default_rng(0).normal(size=200_000)
    x[150_001] = np.nan
    with pytest.raises(ValueError, match=r"x must be finite; row 150001 holds (np.float64\()?nan"):
        GaussianMean(x)


def test_skip_data_checks_is_explicit_and_scoped():
    x = np.random.default_rng(0).normal(size=200_000)
    x[150_001] = np.nan
    with skip_data_checks():
        model = GaussianMean(x)        # no pass over the data
    assert model.N == 200_000
    with pytest.raises(ValueError):
        GaussianMean(x)                # outside the block the check is back


def test_bound_summaries_are_computed_on_first_use_only(tmp_path):
    x = write_memmap(tmp_path / "x.npy", 100_000, lambda n, rng: rng.normal(0.5, 1.0, n), rng=0)
    model = GaussianMean(x)
    assert "_xrange" not in model.__dict__
    bound = model.loglik_ratio_bound([0.5], [0.51])
    assert model._xrange == (float(np.min(x)), float(np.max(x)))
    l = model.loglik_ratio([0.5], [0.51], np.arange(model.N))
    assert np.abs(l).max() <= bound
    X, y, _ = logistic_regression(20_000, 3, rng=1)
    logit = LogisticRegression(X, y)
    assert "_max_row_norm" not in logit.__dict__
    assert logit._max_row_norm == pytest.approx(np.sqrt(np.max(np.sum(X**2, axis=1))))
    lin = LinearRegression(X, y)
    assert lin._max_abs_y == pytest.approx(np.max(np.abs(y)))
    # the confidence test uses them: a short chain runs
    chain = sample(model, ConfidenceTest(range="model"), RandomWalk(0.005), [0.5], 20, rng=0)
    assert chain.samples.shape == (20, 1)


def test_label_check_stops_early_when_skipped():
    X, y, _ = logistic_regression(200_000, 2, rng=2)
    y = y.copy()
    y[-1] = 7.0                        # a bad label in the last chunk
    with pytest.raises(ValueError, match="y must hold labels"):
        LogisticRegression(X, y)
    with skip_data_checks():
        LogisticRegression(X, y)       # the first chunk decides the {0, 1} convention


def test_scans_show_progress_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(progress, "_isatty", lambda stream: True)
    GaussianMean(np.random.default_rng(3).normal(size=150_000))
    err = capsys.readouterr().err
    assert "checking x" in err and "150000/150000" in err
