"""fit's passes over pairs (Laplace draws, the split's trial pairs, the after-run check) on
the heavy rows and a row sample of the rest (design.TrialChain.from_row_sample)."""

import numpy as np
import pytest

from design import TrialChain
from samplers import GaussianPrior, LogisticRegression
from samplers.datasets import rare_covariate_logistic
from validation import fit
from validation.workflow import steps

N = 40_000


@pytest.fixture(scope="module")
def model():
    X, y, _ = rare_covariate_logistic(N, rng=2)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


@pytest.fixture
def passes(monkeypatch):
    """The pair passes fit makes, recorded; the first sample lowered to 1,024 rows (and
    the tolerance to 0.01 nats, and no growth for the fourth moment, which so few rows
    carry too thinly) so that 40,000 rows are sampled."""
    defaults = TrialChain.from_row_sample.__func__.__kwdefaults__
    monkeypatch.setitem(defaults, "start", 1024)
    monkeypatch.setitem(defaults, "se_tolerance", 0.01)
    monkeypatch.setitem(defaults, "shape_rows", 0.0)
    seen, real = [], steps.pairs_pass

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        seen.append(got)
        return got

    monkeypatch.setattr(steps, "pairs_pass", spy)
    return seen


def run(model, **kw):
    return fit(model, draws=300, chains=1, n_trial=10, parallel=False, progress=False,
               rng=4, **kw)


def test_fit_samples_its_pair_passes_and_equal_seeds_give_identical_fits(model, passes):
    a = run(model)
    first = list(passes)
    # Laplace draws, the split's trial pairs, the after-run check: all sampled, on far
    # fewer rows than N, each log ratio within the tolerance
    assert len(first) >= 3 and all(p.sampled for p in first)
    assert all(p.rows_read <= N / 4 for p in first)
    assert all(0 < p.log_ratio_se.max() <= 0.01 for p in first)
    # each checked against the rows' residual scales (samplers.residual_scales), unfired
    assert all(p.unseen_fourth is not None and p.unseen_fourth < 16.0 for p in first)
    attrs = a.posterior.attrs
    assert attrs["heavy_rows"] > 0
    assert "uniform sample" in attrs["explanation"]
    # the chain is still right: the posterior means within 5 MCSE-ish of the Laplace mode
    theta = np.asarray(a.posterior.theta).reshape(-1, len(attrs["center"]))
    assert np.all(np.abs(theta.mean(axis=0) - attrs["center"]) < 5 * theta.std(axis=0)
                  / np.sqrt(theta.shape[0] / 10))
    passes.clear()
    b = run(model)
    np.testing.assert_array_equal(a.posterior.theta, b.posterior.theta)
    for p, q in zip(first, passes):
        np.testing.assert_array_equal(p.trial.mu, q.trial.mu)


def test_without_a_heavy_row_split_every_pass_is_exact(model, passes):
    run(model, heavy_rows=False)
    assert passes and not any(p.sampled for p in passes)
    assert all(p.rows_read == N for p in passes)


@pytest.fixture(scope="module")
def even_model():
    """A logistic regression without heavy rows (normal covariates)."""
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.normal(size=(N, 2)), np.ones(N)])
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ [0.5, -0.3, -1.0]))).astype(float)
    return LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))


def test_a_given_empty_list_of_heavy_rows_samples_and_false_does_not(even_model, passes):
    """``heavy_rows=[]`` asserts that no row is heavy: the pair passes sample (the
    explanation names no heavy rows); ``heavy_rows=False`` keeps them exact."""
    a = run(even_model, heavy_rows=[])
    assert passes and all(p.sampled and p.rows_read <= N / 4 for p in passes)
    text = a.posterior.attrs["explanation"]
    assert "(a uniform sample)" in text and "heavy rows exact" not in text
    assert "exact MH's acceptance (estimated)" in text
    passes.clear()
    b = run(even_model, heavy_rows=False)
    assert passes and not any(p.sampled for p in passes)
    assert "exact MH's acceptance (exact)" in b.posterior.attrs["explanation"]


def test_more_draws_counts_its_passes_and_the_note_names_a_mix_of_sampled_and_exact(
        even_model, passes):
    from dataclasses import replace

    px = replace(steps.mode_and_proxy(even_model), exact_rows=np.empty(0, dtype=np.intp))
    more = steps.more_draws(px, steps.laplace_draws(px, 5, rng=1), 5, rng=2)
    assert more.passes == 2 and more.trial_sampled and more.log_weight_se > 0
    assert more.rows_read == sum(p.rows_read for p in passes) < N
    # one pass sampled, one exact (N rows): more than N rows in all, still a sampled note
    note = steps._sample_note(0.002, 5_000 + N, N, 0, passes=2)
    assert "over 2 passes" in note and "heavy" not in note
    assert steps._sample_note(0.0, 2 * N, N, 0, passes=2) == ""      # both exact
    assert "the 40 heavy rows exact" in steps._sample_note(0.001, 3_000, N, 40)


def test_the_sample_reads_the_cut_past_the_heavy_rows_or_every_pass_is_exact(model, passes,
                                                                              monkeypatch):
    """fit samples with the rows of heavy_rows' cut for a sample read exactly (the split's
    pass: those beyond the heavy rows, in the rest's numbering), and makes every pass exact
    where that cut does not stop (heavy_rows returns None for it)."""
    import samplers
    from validation.workflow import fit as fit_module

    real = samplers.heavy_rows
    heavy = real(fit_module.steps.mode_and_proxy(model).cv)
    extra = np.array([5, 17, 30_000])                    # three more rows, none heavy
    assert not np.any(np.isin(extra, heavy))
    monkeypatch.setattr(samplers, "heavy_rows", lambda cv, **kw: (
        real(cv, **{k: v for k, v in kw.items() if k != "sample_rows"}),
        np.union1d(heavy, extra)))
    run(model)
    assert passes and all(p.sampled for p in passes)
    rest = np.setdiff1d(np.arange(N), heavy)
    got = fit_module._on_rest(np.union1d(heavy, extra), heavy)
    np.testing.assert_array_equal(rest[got], extra)      # the same rows, renumbered
    # each pass reads its exact rows and a sample of start * 2^j rows of the others (start:
    # 1,024, or 8 sqrt of the rows sampled from, the same on the split)
    start = max(1024, int(np.ceil(8 * np.sqrt(rest.size - extra.size))))
    on_split = 0
    for p in passes:
        split = p.trial.N == rest.size                   # a pass on the split's rest
        on_split += split
        n_exact = extra.size + (0 if split else heavy.size)
        assert (p.rows_read - n_exact) % start == 0, (p.rows_read, n_exact, start)
    assert on_split >= 1
    passes.clear()
    monkeypatch.setattr(samplers, "heavy_rows", lambda cv, **kw: (
        real(cv, **{k: v for k, v in kw.items() if k != "sample_rows"}), None))
    text = run(model).posterior.attrs["explanation"]
    assert passes and not any(p.sampled for p in passes)
    assert "too unequal for a row sample" in text
