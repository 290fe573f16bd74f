"""validation.simulate_acceptance: the real test repeated on one pair's l_i."""

import math

import numpy as np
import pytest

from samplers import AustereTest, BarkerTest, ConfidenceTest
from validation import acceptance_check, simulate_acceptance


def test_repeated_austere_decisions_agree_with_the_integrated_path_simulation():
    # Independent route: acceptance_check integrates u out along random row orders.
    N = 5_000
    l = np.random.default_rng(0).normal(-2e-4, 0.02, N)
    c = 0.3
    test = AustereTest(m=200, epsilon=0.2, threshold="normal")
    r = simulate_acceptance(test, l, log_const=c, n=40_000, rng=1)
    ref = acceptance_check(l, m=200, epsilon=0.2, tolerance=0.4, threshold="normal",
                           log_const=c, n_paths=4000, rng=2)
    assert r.target == pytest.approx(math.exp(min(N * l.mean() + c, 0.0)))
    assert abs(r.delta) > 5 * r.delta_se           # an error the check can see
    z = (r.delta - ref.delta_simulated[0]) / math.hypot(r.delta_se, ref.delta_simulated_se[0])
    assert abs(z) < 4.5
    assert 200 <= r.rows_per_decision <= N


def test_a_barker_decision_on_every_row_is_barkers_test_and_bad_input_is_refused():
    l = np.random.default_rng(3).normal(1e-4, 1e-3, 400)
    r = simulate_acceptance(BarkerTest(m=400), l, log_const=-0.2, n=20_000, rng=4)
    assert r.rows_per_decision == 400
    assert r.target == pytest.approx(1.0 / (1.0 + math.exp(-(400 * l.mean() - 0.2))))
    assert abs(r.delta) < 4.5 * r.delta_se
    c = simulate_acceptance(ConfidenceTest(delta=0.1), l, n=100, rng=0)
    assert 0.0 <= c.accept_rate <= 1.0
    with pytest.raises(ValueError, match="l must be a finite vector"):
        simulate_acceptance(BarkerTest(), [0.0, math.nan])
    with pytest.raises(ValueError, match="log_const must be finite"):
        simulate_acceptance(BarkerTest(m=2), l, log_const=math.inf)
