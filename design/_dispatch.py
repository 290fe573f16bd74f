"""``design.optimize``: one entry point for the design of every minibatch test."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from ._lib.checks import check_interval
from ._lib.interrupts import interrupt_as_keyboard
from ._lib.passes import one_blas_thread

from . import _optimize
from ._barker_design import optimize_barker
from ._confidence_design import optimize_confidence
from ._trial import TrialChain

__all__ = ["evaluate", "optimize", "TESTS", "SMALL_M"]

TESTS = ("austere", "barker", "confidence")
#: Minibatch sizes below the Austere default grid, tried when the grid's smallest m wins
#: (control variates: one minibatch per step, so the minibatch size is the data use).
SMALL_M = (10, 20, 30)

_OPTIONS = {   # the options each test kind takes besides tolerance and method
    "austere": ("m_grid", "epsilon_grid", "threshold", "prediction_threshold", "workers",
                "progress", "exact", "search", "law"),
    "barker": ("m_grid", "delta_grid"),
    "confidence": ("m_grid", "gamma_grid", "bound"),
}


@interrupt_as_keyboard   # a Ctrl-C while a grid cell's programme returns: KeyboardInterrupt
def optimize(trial_chain, tolerance=0.01, *, test="austere", method="average", m_grid=None,
             epsilon_grid=None, threshold="t", prediction_threshold="normal", workers=None,
             progress=None, exact=None, search=None, delta_grid=None, gamma_grid=None,
             bound=None, law=None):
    """The settings of a minibatch MH test that read the least data within a tolerance.

    Parameters
    ----------
    trial_chain : TrialChain or int
        Pairs of a trial run (:class:`TrialChain`). The Austere worst-case design needs only
        N, so an int N is accepted there. A trial chain of a control-variate model records
        the residuals (see :class:`TrialChain`), and the design is then that of the test run
        on the wrapper.
    tolerance : float
        Bound on the error, in (0, 0.5): on the mean (or, with ``method="worst-case"``,
        the largest) error in the acceptance probability.
    test : {"austere", "barker", "confidence"}
        The test to design:

        * ``"austere"``: the sequential t-test of Korattikara et al. (2014); chooses
          (m, epsilon) by the dynamic programme (:func:`design._optimize.optimize`, Eq. 7,
          or Eq. 8 for the worst case). Error: |P(accept) - P_MH| averaged over the pairs
          and u. When the default m grid's smallest m (50) wins, m = 30, 20 and 10 are
          tried too at the chosen epsilon (with control variates the test reads one
          minibatch per step, so the smallest m that meets the tolerance is the design).
        * ``"barker"``: the minibatch Barker test of Seita et al. (2017); chooses m and the
          Novak threshold delta (None: the variance condition alone). Error:
          |P(accept) - S(Delta)| against Barker's acceptance function S, averaged over the
          pairs (largest with ``method="worst-case"``). The rows read per pair are
          predicted from where s^2 = N^2 s_l^2 (1 - b/N) / b falls below sigma^2 = 1 and
          Corollary 1's bound below delta; the error at the stop by a closed form checked
          against :func:`design.acceptance.barker_acceptance`, plus a first-order estimate
          of the selection bias of stopping on the batch's own variance (conservative: 1.3-6
          times the simulated bias on skewed l_i; ``docs/correction.md`` section 6).
        * ``"confidence"``: the confidence sampler of Bardenet et al. (2014); its error is
          at most delta by construction (Lemma 3.1), so delta = tolerance and the design
          chooses the first batch and the growth factor gamma that read the fewest rows,
          predicted from each pair's mean, sd and range bound C.

    method : {"average", "worst-case"}
    m_grid : sequence of int, optional
        Minibatch sizes (Austere, Barker) or first batch sizes (confidence) to search.
    epsilon_grid, threshold, prediction_threshold, workers, progress, exact, search
        Austere only: per-stage errors; the threshold of the test that will run (``"t"``,
        the default, as ``AustereTest``); the threshold law the dynamic programme predicts
        it with (``"normal"``, the default); threads; a progress bar or callback; the
        reference DP without merged stages; which grid cells to evaluate (the worst case
        bisects in epsilon by default; ``"prune"`` screens only the rows of m that can hold
        the design, as :func:`validation.fit` does; see :func:`design._optimize.optimize`).
    law : {"gaussian", "edgeworth"}, optional
        Austere only: the law of the test statistic (default ``"gaussian"``, the random walk
        of the dynamic programme). ``"edgeworth"`` corrects each stage's law for the
        skewness and excess kurtosis of each pair's l_i (:func:`acceptance_error`), so
        skewed data get a design that meets the tolerance under that law; the returned
        Design reports the Gaussian choice it replaced (``gaussian_m``,
        ``gaussian_epsilon``, ``gaussian_corrected_error``). Slower: about a second per
        pair and visited cell at N = 3e5; the minibatch sizes below the grid
        (``SMALL_M``) are not tried with it.
    delta_grid : sequence of (float or None), optional
        Barker only: Novak thresholds (default None, 0.9, 0.7, 0.5).
    gamma_grid : sequence of float, optional
        Confidence only: growth factors (default 1.2, 1.5, 2, 3).
    bound : str, optional
        Confidence only: concentration inequality (default ``"bernstein-serfling"``).

    Returns
    -------
    Design, BarkerDesign or ConfidenceDesign
        Frozen; ``.test`` names the test kind, ``str()`` says what was chosen and why, and
        ``data_fraction`` and ``error`` are the predictions. The samplers build the ready
        test: ``AustereTest.from_design(d)``, ``BarkerTest.from_design(d)``,
        ``ConfidenceTest.from_design(d)``.

    Raises
    ------
    InfeasibleDesignError
        (Austere, Barker) no grid point meets the tolerance.
    ValueError, TypeError
        A bad argument, or a trial chain without what the test kind needs (the Barker
        design needs the shape of the l_i, the confidence design the model's range bound;
        both are recorded by :meth:`TrialChain.from_model`).

    Examples
    --------
    >>> import numpy as np
    >>> from design import TrialChain, optimize
    >>> rng = np.random.default_rng(0)
    >>> N = 100_000                           # residual-like pairs: a tiny sd
    >>> tc = TrialChain(mu=rng.normal(0, 1, 20) / N, sigma=np.full(20, 1e-7),
    ...                 c0=np.zeros(20), N=N, skewness=np.zeros(20), kurtosis=np.zeros(20),
    ...                 abs_z1=np.full(20, 0.8), abs_z3=np.full(20, 1.6),
    ...                 range_bound=np.full(20, 1e-6))
    >>> d = optimize(tc, 0.01, test="barker")
    >>> d.test, d.m, d.delta, round(d.data_fraction * N)
    ('barker', 10, None, 10)
    >>> optimize(tc, 0.01, test="confidence").test
    'confidence'
    """
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    tolerance = check_interval("tolerance", tolerance, 0.0, 0.5)
    if method not in _optimize.METHODS:
        raise ValueError(f"method must be 'average' or 'worst-case', got {method!r}")
    given = dict(m_grid=m_grid, epsilon_grid=epsilon_grid,
                 threshold=None if threshold == "t" else threshold,
                 prediction_threshold=None if prediction_threshold == "normal"
                 else prediction_threshold, workers=workers,
                 progress=progress, exact=exact, search=search, delta_grid=delta_grid,
                 gamma_grid=gamma_grid, bound=bound, law=None if law == "gaussian" else law)
    for name, value in given.items():
        if value is not None and name not in _OPTIONS[test]:
            takers = [t for t, opts in _OPTIONS.items() if name in opts]
            raise TypeError(f"{name} applies to test={' or '.join(map(repr, takers))}, not "
                            f"test={test!r}")
    if test != "austere" and not isinstance(trial_chain, TrialChain):
        raise TypeError(f"the {test} design needs a TrialChain, got "
                        f"{type(trial_chain).__name__}")
    if test == "barker":
        return optimize_barker(trial_chain, tolerance, method=method, m_grid=m_grid,
                               delta_grid=delta_grid)
    if test == "confidence":
        return optimize_confidence(trial_chain, tolerance, method=method, m_grid=m_grid,
                                   gamma_grid=gamma_grid,
                                   bound="bernstein-serfling" if bound is None else bound)
    laws = dict(threshold=threshold, prediction_threshold=prediction_threshold)
    smaller = (m_grid is None and isinstance(trial_chain, TrialChain) and method == "average"
               and law in (None, "gaussian"))
    # not for the full search (its first full job is at the grid's least epsilon) nor the
    # exact programme (the early start runs the merged one)
    early = (_EarlySmallM(trial_chain, tolerance, prediction_threshold, workers)
             if smaller and search != "full" and not exact else None)
    with one_blas_thread():         # the workers use every core (design._lib.passes)
        try:
            design = _optimize.optimize(
                trial_chain, tolerance, method=method, m_grid=m_grid,
                epsilon_grid=epsilon_grid, workers=workers, progress=progress,
                exact=bool(exact), law="gaussian" if law is None else law,
                search="auto" if search is None else search, on_full=early, **laws)
        except KeyboardInterrupt:
            early = None        # a daemon that only fills the caches: Ctrl-C does not wait
            raise
        finally:
            if early is not None:
                early.join()
        if smaller and design.m == int(design.m_grid[0]):
            design = _smaller_m(design, trial_chain, tolerance, laws, workers,
                                prune=search == "prune", exact=bool(exact))
    return design


class _EarlySmallM:
    """Start the programme of :func:`_smaller_m`'s first cell while the grid's search runs.

    When the grid's smallest m wins, :func:`_smaller_m` runs the screen and the full
    programme at (``SMALL_M[0]``, the chosen epsilon), after the grid's search. The chosen
    epsilon is nearly always that of the search's first full-programme job at the grid's
    smallest m (the candidate of least screened data), so at that job (``on_full``) this
    runs those two programmes on a thread of its own, into the programme's cache
    (``_sequential.run_dp``) and the pair integrals' (``pair_integrals``): the later search
    finds them there, the same arrays, and only the time moves (with two cores, the grid's
    two full jobs and this one share them instead of this one running alone after). The
    full programme runs only where the screen leaves the cell a candidate (as the search
    itself decides) and is not itself the full programme. A wrong guess (another epsilon,
    or a larger m wins) costs that thread's CPU, nothing else. Only from N / m = 10^4
    (below, the programme is short), with more than one worker, and not for
    ``search="full"`` (its first full job is at the grid's least epsilon, not the chosen
    one) or ``exact=True`` (it runs the merged programme). Ctrl-C does not wait for it.
    """

    MIN_STAGES = 10_000

    def __init__(self, trial, tolerance, prediction_threshold, workers):
        self.trial, self.tolerance, self.workers = trial, tolerance, workers
        self.threshold = "normal" if prediction_threshold is None else prediction_threshold
        self.thread = None

    def __call__(self, m, eps):
        m_small = SMALL_M[0]
        if (self.thread is not None or m != _optimize.DEFAULT_M_GRID[0] or m_small >= m
                or self.trial.N / m_small < self.MIN_STAGES
                or (self.workers or os.cpu_count() or 1) < 2):
            return
        import threading

        def run():
            try:
                evaluate = _optimize._Evaluator("average", self.trial.N, self.threshold,
                                                self.trial, m_small, eps)
                error, _ = evaluate(m_small, eps, screen=True)
                if (error <= self.tolerance + evaluate.screen_margins(m_small)[0]
                        and not evaluate.screen_is_exact(m_small)):
                    evaluate(m_small, eps)
            except Exception:       # noqa: BLE001 -- an early start only: the search
                pass                # itself runs these again and raises what they raise
        self.thread = threading.Thread(target=run, name="design-early-small-m", daemon=True)
        self.thread.start()

    def join(self):
        if self.thread is not None:
            self.thread.join()


def _smaller_m(design, trial, tolerance, laws, workers, prune=False, exact=False):
    """Try the minibatch sizes of ``SMALL_M`` below the grid at the chosen epsilon.

    The returned design's grid has the extra rows, with NaN at the epsilons not evaluated.
    ``prune``: search them as ``search="prune"`` does (the larger m only if the smaller
    cannot be shown the best).
    """
    small = [m for m in SMALL_M if m < design.m]
    if not small:
        return design
    try:
        screened = design.screen_error_grid is not None
        extra = _optimize.optimize(trial, tolerance, method="average", m_grid=small,
                                   epsilon_grid=[design.epsilon], workers=workers,
                                   exact=exact, search="prune" if prune else "screen" if screened
                                   else "full", **laws)
    except _optimize.InfeasibleDesignError:
        return design
    if not extra.data_fraction < design.data_fraction:
        return design
    if prune:       # its few cells screened, so the rows are as search="screen" has them
        extra = extra.complete_screen(trial, workers)
    k = int(np.flatnonzero(design.epsilon_grid == design.epsilon)[0])

    def stacked(name):
        rows = np.full((extra.m_grid.size, design.epsilon_grid.size), np.nan)
        rows[:, k] = getattr(extra, name)[:, 0]
        return np.vstack([rows, getattr(design, name)])

    names = ("error_grid", "data_grid") + (
        ("screen_error_grid", "screen_data_grid") if screened else ())
    grids = dict(m_grid=np.concatenate([extra.m_grid, design.m_grid]),
                 **{name: stacked(name) for name in names})
    for a in grids.values():
        a.setflags(write=False)
    return replace(design, m=extra.m, data_fraction=extra.data_fraction, error=extra.error,
                   **grids)


def evaluate(design, trial_chain, *, law=None):
    """Predicted error and data fraction of a design's test at each pair of a trial chain.

    Use it to check a design on fresh pairs (not those it was chosen on), or to predict a
    test at other pairs.

    Parameters
    ----------
    design : Design, BarkerDesign or ConfidenceDesign
        A result of :func:`optimize`.
    trial_chain : TrialChain
        Pairs with what the design's test kind needs (see :func:`optimize`).
    law : {"gaussian", "edgeworth"}, optional
        Austere only: the law of the statistic to predict with; default: the design's
        (``design.law``).

    Returns
    -------
    error, data_fraction : numpy.ndarray
        Signed predicted error in the acceptance probability and expected fraction of the N
        rows read, per pair (u averaged).

    Examples
    --------
    >>> import numpy as np
    >>> from design import TrialChain, evaluate, optimize
    >>> tc = TrialChain(mu=[1e-5, -1e-5], sigma=[1e-7, 1e-7], c0=[0.0, 0.0], N=10_000)
    >>> d = optimize(tc, 0.01, m_grid=[20], epsilon_grid=[0.05])
    >>> err, frac = evaluate(d, tc)
    >>> (frac * 10_000).round(1)      # one minibatch, except for u near the threshold
    array([20. , 20.2])
    """
    from ._acceptance_error import acceptance_error
    from ._barker_design import _check_needs as needs
    from ._barker_design import barker_pair_prediction
    from ._confidence_design import confidence_pair_prediction

    if not isinstance(trial_chain, TrialChain):
        raise TypeError(f"trial_chain must be a TrialChain, got {type(trial_chain).__name__}")
    kind = getattr(design, "test", None)
    if kind not in TESTS:
        raise TypeError(f"design must be a result of design.optimize, got "
                        f"{type(design).__name__}")
    if trial_chain.N != design.N:
        raise ValueError(f"trial_chain.N must be the design's N = {design.N}, got "
                         f"{trial_chain.N}")
    N = trial_chain.N
    if law is not None and kind != "austere":
        raise TypeError(f"law applies to Austere designs, not test={kind!r}")
    if kind == "austere":
        r = acceptance_error(trial_chain, m=design.m, epsilon=design.epsilon,
                             threshold=design.prediction_threshold,
                             law=design.law if law is None else law)
        return np.array(r.delta), np.array(r.data_fraction)
    if kind == "barker":
        needs(trial_chain, ("skewness", "kurtosis", "abs_z1", "abs_z3"), "Barker",
              "the shape of the l_i per pair")
        res = np.array([barker_pair_prediction(trial_chain, p, design.m, design.delta)
                        for p in range(trial_chain.n_pairs)])
    else:
        needs(trial_chain, ("range_bound",), "confidence", "the model's range of the l_i")
        res = np.array([confidence_pair_prediction(
            trial_chain, p, batch_size=design.batch_size, gamma=design.gamma,
            delta=design.delta, prob=design.p, bound=design.bound)
            for p in range(trial_chain.n_pairs)])
        res = res[:, :2]
    return res[:, 1].copy(), res[:, 0] / N
