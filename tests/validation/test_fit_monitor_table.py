"""fit starts the chains' bias-monitor table as the verdict starts; the chains take it."""

from types import SimpleNamespace

import numpy as np

from samplers import AustereTest, BarkerTest
from validation.workflow import steps


def test_the_chains_take_the_early_table_and_it_equals_a_fresh_one():
    import design

    model = SimpleNamespace(N=5000)
    test = AustereTest(m=50, epsilon=0.1)
    early = steps.start_monitor_table(model, test)
    assert early is not None and steps.start_monitor_table(model, test) is early
    assert steps._monitor_table(model, test) is early            # taken, not started again
    assert steps._table_key(model, test) not in steps._TABLE_THREADS
    early.join()
    rng = np.random.default_rng(0)
    stats = {"mean": rng.normal(0, 1e-4, 20), "sd": np.full(20, 1e-3),
             "n_used": np.full(20, 100.0), "log_const": rng.normal(0, 1e-3, 20)}
    got = test.decision_errors(stats, 5000)      # reads the table the thread made
    want = design.decision_errors(stats["mean"], stats["sd"], stats["n_used"],
                                  stats["log_const"], N=5000, m=50, epsilon=0.1)
    assert np.array_equal(got, want) and np.all(np.isfinite(got))


def test_other_tests_start_nothing_and_join_waits():
    model = SimpleNamespace(N=5000)
    assert steps.start_monitor_table(model, BarkerTest(m=50)) is None
    thread = steps.start_monitor_table(model, AustereTest(m=40, epsilon=0.1))
    steps.join_monitor_tables()
    assert not thread.is_alive()
    steps._TABLE_THREADS.clear()
