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


def test_a_dropped_table_is_forgotten_and_still_joined_while_it_runs():
    model = SimpleNamespace(N=7000)
    test = AustereTest(m=30, epsilon=0.1)
    thread = steps.start_monitor_table(model, test)
    steps.drop_monitor_table(model, test)
    assert steps._table_key(model, test) not in steps._TABLE_THREADS
    assert thread.finished or thread in steps._DROPPED     # a fork still waits for it
    steps.join_monitor_tables()
    assert not thread.is_alive() and thread.finished and thread not in steps._DROPPED
    steps.drop_monitor_table(model, test)                    # nothing left: a no-op
    steps.drop_monitor_table(model, BarkerTest(m=50))        # other tests have no table


def test_fit_keeps_no_table_after_a_failed_verdict(monkeypatch):
    from samplers import GaussianPrior, LogisticRegression
    from validation import fit

    rng = np.random.default_rng(5)
    X = np.column_stack([rng.normal(size=3000), np.ones(3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    started = []
    start = steps.start_monitor_table

    def start_and_count(m, t):
        started.append(steps._table_key(m, t))
        return start(m, t)

    def failed(proxy, pairs, plan, tolerance, **kw):
        return steps.Verdict(plan, None, False, "failed", ("5. CLT check: failed (test)",))

    steps._TABLE_THREADS.clear()
    monkeypatch.setattr(steps, "start_monitor_table", start_and_count)
    monkeypatch.setattr(steps, "verdict", failed)
    idata = fit(model, draws=100, chains=1, n_trial=10, parallel=False, progress=False,
                rng=2)
    assert started and "failed their verdict: austere" in idata.posterior.attrs["explanation"]
    steps.join_monitor_tables()
    assert not steps._TABLE_THREADS and not steps._DROPPED
