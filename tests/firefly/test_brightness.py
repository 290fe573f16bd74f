"""The brightness set, geometric skips, and the z-updates' transition probabilities."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from samplers import BrightSet, ExplicitZ, ImplicitZ, IndexSampler
from samplers._firefly.zupdates import _skips, bernoulli_positions

# --- the bright/dark set -------------------------------------------------------------------

ops = st.lists(st.tuples(st.sampled_from(["brighten", "darken"]), st.integers(0, 29)), max_size=80)


@given(ops)
def test_bright_set_agrees_with_a_python_set(operations):
    z = BrightSet(30)
    reference = set()
    for op, n in operations:
        getattr(z, op)(n)
        (reference.add if op == "brighten" else reference.discard)(n)
        assert z.count == len(reference)
    assert sorted(z.arr.tolist()) == list(range(30))  # a permutation
    np.testing.assert_array_equal(z.tab[z.arr], np.arange(30))  # tab is its inverse
    assert set(z.bright.tolist()) == reference
    assert {z.ith_bright(i) for i in range(z.count)} == reference
    assert {z.ith_dark(i) for i in range(30 - z.count)} == set(range(30)) - reference
    assert all(z.is_bright(n) == (n in reference) for n in range(30))


def test_bright_set_bulk_and_checks():
    z = BrightSet(10)
    z.set_bright([3, 3, 7])
    assert z.count == 2 and repr(z) == "BrightSet(N=10, count=2)"
    with pytest.raises(ValueError):
        z.bright[0] = 1  # read-only view
    with pytest.raises(ValueError, match=r"n must be in \[0, 9\], got 10"):
        z.brighten(10)
    with pytest.raises(ValueError, match=r"i must be in \[0, 1\], got 2"):
        z.ith_bright(2)
    with pytest.raises(TypeError, match="n must be an integer"):
        z.darken(1.5)
    with pytest.raises(ValueError, match="idx must lie in"):
        z.set_bright([-1])
    with pytest.raises(ValueError, match="N must be >= 1"):
        BrightSet(0)


# --- geometric skips ----------------------------------------------------------------------


def test_geometric_skips_choose_each_position_with_probability_q():
    rng = np.random.default_rng(1)
    arr = np.arange(200, dtype=np.int64)[::-1].copy()
    q, draws = 0.05, 4000
    hits = np.zeros(200)
    sizes = []
    for _ in range(draws):
        chosen = bernoulli_positions(rng, arr, 50, 200, q)
        hits[chosen] += 1
        sizes.append(chosen.shape[0])
    # positions 50..199 hold the values 149..0; nothing outside them is chosen
    assert hits[150:].sum() == 0
    chi2 = ((hits[:150] - draws * q) ** 2 / (draws * q * (1 - q))).sum()
    assert stats.chi2.sf(chi2, 150) > 1e-4
    assert abs(np.mean(sizes) - 150 * q) < 5 * math.sqrt(150 * q * (1 - q) / draws)
    np.testing.assert_array_equal(bernoulli_positions(rng, arr, 3, 9, 1.0), arr[3:9])
    assert bernoulli_positions(rng, arr, 7, 7, 0.5).shape == (0,)


def test_skips_resume_where_the_uniforms_ran_out():
    arr = np.arange(10_000, dtype=np.int64)
    u = np.random.default_rng(2).random(400)
    log1m_q = math.log1p(-0.03)
    whole, _, done = _skips(arr, -1, 10_000, log1m_q, u)
    first, pos, more = _skips(arr, -1, 10_000, log1m_q, u[:150])
    rest, _, done2 = _skips(arr, pos, 10_000, log1m_q, u[150:])
    assert done and done2 and not more
    np.testing.assert_array_equal(np.r_[first, rest], whole)


# --- z-updates: one sweep's transition probabilities ----------------------------------------


class FixedGaps:
    """A target whose gap r_n = log L_n - log B_n is fixed per row; it records its queries."""

    def __init__(self, r):
        self.log_odds_of = np.log(np.expm1(np.asarray(r, dtype=float)))
        self.asked = []

    def log_odds(self, theta, idx):
        self.asked.append(np.array(idx))
        return self.log_odds_of[idx]


def one_sweep(z_update, r, bright, seed):
    N = len(r)
    target = FixedGaps(r)
    z = BrightSet(N)
    z.set_bright(np.flatnonzero(bright))
    cache = np.where(bright, target.log_odds_of, np.nan)  # valid for bright rows only
    info = z_update.update(np.random.default_rng(seed), None, target, z, cache,
                           IndexSampler(N, np.random.default_rng(seed + 1)))
    assert not np.isnan(cache[z.bright]).any()
    np.testing.assert_array_equal(cache[z.bright], target.log_odds_of[z.bright])
    return z, target, info


def implicit_probabilities(r, q_db, q_bd):
    """P(0 -> 1) and P(1 -> 0) of one implicit sweep for a row with gap r (Algorithm 2)."""
    e = math.expm1(r)
    return q_db * min(1.0, e * q_bd / q_db), q_bd * min(1.0, q_db / (q_bd * e))


@pytest.mark.parametrize("r, q_db, q_bd", [(0.02, 0.1, 1.0), (0.5, 0.1, 1.0), (0.3, 0.5, 0.4),
                                           (3.0, 1.0, 1.0), (0.01, 0.005, 0.2)])
def test_implicit_sweep_has_the_algorithm_2_transition_probabilities(r, q_db, q_bd):
    N = 40_000
    up, down = implicit_probabilities(r, q_db, q_bd)
    # detailed balance for p(z = 1 | theta) = 1 - exp(-r): the sweep leaves it invariant
    p1 = -math.expm1(-r)
    assert p1 * down == pytest.approx((1 - p1) * up, rel=1e-12)
    z, target, info = one_sweep(ImplicitZ(q_db, q_bd), np.full(N, r), np.zeros(N, bool), 0)
    assert abs(info.n_brightened - N * up) <= 5 * math.sqrt(N * up * (1 - up)) + 1
    asked = np.concatenate(target.asked)
    assert info.n_queried == asked.shape[0]  # only proposed dark rows are queried
    assert abs(asked.shape[0] - N * q_db) < 5 * math.sqrt(N * q_db * (1 - q_db)) + 1
    z, target, info = one_sweep(ImplicitZ(q_db, q_bd), np.full(N, r), np.ones(N, bool), 1)
    assert abs(info.n_darkened - N * down) < 5 * math.sqrt(N * down * (1 - down)) + 1
    assert info.n_queried == 0  # bright rows use their cached gaps
    assert z.count == N - info.n_darkened


def test_a_mixed_sweep_queries_dark_rows_only_and_caches_what_it_brightens():
    rng = np.random.default_rng(3)
    r = rng.exponential(0.3, 5000)
    bright = rng.random(5000) < 0.3
    z, target, info = one_sweep(ImplicitZ(0.2), r, bright, 4)
    asked = np.concatenate(target.asked)
    assert not bright[asked].any()
    assert z.count == bright.sum() + info.n_brightened - info.n_darkened


@pytest.mark.parametrize("fraction", [0.25, 1.0])
def test_explicit_sweep_gibbs_resamples_a_fraction(fraction):
    N, r = 20_000, 0.4
    p = -math.expm1(-r)
    m = round(fraction * N)
    for bright in (np.zeros(N, bool), np.ones(N, bool)):
        z, target, info = one_sweep(ExplicitZ(fraction), np.full(N, r), bright, 5)
        touched_bright = m * p if not bright[0] else m * (1 - p)
        flips = info.n_brightened if not bright[0] else info.n_darkened
        assert abs(flips - touched_bright) < 5 * math.sqrt(m * p * (1 - p))
        assert info.n_queried == (0 if bright[0] else m)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ImplicitZ(q_db=0.0), r"q_db must be in \(0, 1\], got 0.0"),
        (lambda: ImplicitZ(q_db=1.5), r"q_db must be in \(0, 1\], got 1.5"),
        (lambda: ImplicitZ(q_db=-0.1), r"q_db must be in \(0, 1\], got -0.1"),
        (lambda: ImplicitZ(q_db=float("nan")), r"q_db must be in \(0, 1\], got nan"),
        (lambda: ImplicitZ(q_bd=0.0), r"q_bd must be in \(0, 1\], got 0.0"),
        (lambda: ExplicitZ(fraction=0.0), r"fraction must be in \(0, 1\], got 0.0"),
        (lambda: ExplicitZ(fraction=2), r"fraction must be in \(0, 1\], got 2"),
    ],
)
def test_bad_z_update_settings(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_z_update_settings_must_be_numbers():
    with pytest.raises(TypeError, match="q_db must be a real number, got '0.1'"):
        ImplicitZ(q_db="0.1")
    with pytest.raises(TypeError, match="fraction must be a real number"):
        ExplicitZ(fraction=None)
