"""``validation.fit``: the fastest sound route to a posterior, in one call (issues 12, 23, 25).

A short driver over the named steps of :mod:`validation.workflow.steps` (mode and proxy,
Laplace draws and proposal, trial pairs, design, route, verdict, chains, after-run check),
each timed, with the route between designed, exact-minibatch and exact tests chosen by
:mod:`validation.workflow.route` on predicted rows per effective sample.

It lives in the application layer because it needs all three packages: ``samplers`` sits
below ``validation`` and cannot import the CLT check, so it cannot host ``fit``.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import replace

import numpy as np

from design._lib.checks import as_generator, check_int, check_interval
from design._lib.passes import one_blas_thread

from . import route as routes
from . import steps
from .steps import (MAX_REDESIGNS, N_CHECK, N_PATHS, N_SIM, _redesign_austere,  # noqa: F401
                    settings as _settings)

__all__ = ["fit"]

DESIGNED = ("austere", "barker", "confidence")
TESTS = DESIGNED + ("smh", "mh-ss", "exact")
PROPOSALS = steps.PROPOSAL_KINDS
#: Simulation redesigns an unforced Austere design may try before the route chooser moves on
#: to the next candidate: none. Where the Edgeworth expansion fails at the designed m, a
#: design that a simulation on 10 trial pairs passes can still err where the chain goes
#: (``benchmarks/bench_fit.py``, rare-covariate workload: a redesigned Austere test passed
#: its verdict and put the 5% quantile of the rare coefficient 0.27 posterior sds off),
#: while the exact minibatch tests are sound by construction; each simulation is also the
#: dearest part of set-up. The Edgeworth-corrected redesign, where the expansion holds,
#: is still tried. A forced Austere test (``test="austere"``) keeps the full redesign.
AUTO_REDESIGNS = 0
#: Largest median excess kurtosis K of the trial residuals at which an unforced designed test
#: is verified; above it the designed route is unsound and the exact routes compete. When a
#: fraction q of the rows dominates the residuals K is about 1 / q: above 1,000, fewer than
#: one row in a thousand decides every minibatch mean that contains one. Set between two
#: measured workloads (``benchmarks/bench_fit.py``): logistic d = 10 + intercept,
#: N = 10^5, median K = 52 (its designed chain is accurate), and the rare-covariate data,
#: N = 2 x 10^5, median K = 5,650 (an Austere design at m = 1000 passed its simulated
#: verdict on 10 pairs and its chain put the rare coefficient's 5% quantile 0.27 posterior
#: sds off, mean 0.11). Since the designed test reads the heavy rows exactly (``heavy_rows``)
#: the gate sees the rest's residuals; it stays as a guard where heavy rows
#: are not found or not read (``heavy_rows=False``).
HEAVY_KURTOSIS = 1000.0
#: Predicted seconds of sampling per chain above which the chains run in parallel processes
#: by default (starting the pool and the workers costs about a second).
PARALLEL_SECONDS = 2.0
#: Laplace draws at least (Pareto-k needs more than 4 weights in its tail, ceil(n / 5)).
MIN_DRAWS = 30
#: The passes over trial pairs sample the rows only where :func:`samplers.heavy_rows`' rule,
#: run on for a sample (``sample_rows``), stops within this many times sqrt(N) rows (as
#: many as the first sample's floor, ``design.TrialChain.from_row_sample``): those rows are
#: read exactly, and every other row's residual scale is then within 20 times the rms of
#: the rows below it, so the sample's standard error is honest. Where the rule does not
#: stop (covariates from t(1.2): it needs about N / 100 rows) every pass is exact.
SAMPLE_EXACT_PER_SQRT = 8
#: Max R-hat above which fit warns that the chains have not mixed (looser than Vehtari et
#: al.'s 1.01, which short runs of a sound route cross by chance).
RHAT_WARN = 1.05


def fit(model, tolerance=0.01, draws=2000, *, test=None, proposal=None, route=None, chains=2,
        ess=None, max_seconds=600.0, parallel=None, n_trial=40, center=None, order=2,
        clt_tolerance=0.05, on_clt_failure="redesign", heavy_rows="auto", rng=None,
        progress=None, verbose=False, executor=None):
    r"""Sample a posterior by the cheapest sound route, in one call.

    The steps (functions of :mod:`validation.workflow.steps`, each timed in
    ``attrs["timings"]`` and reported in ``attrs["explanation"]``):

    0. **the model's route** (:func:`~validation.workflow.steps.model_route`): a model
       written in JAX (:class:`samplers.models.JaxModel`, a NumPyro model through
       :func:`samplers.models.from_numpyro`) is translated to numba (its row function's
       log-likelihood, gradient and Hessian-vector product, and a JAX ``logprior``), so
       its passes and chains run compiled; a part with a primitive that has no translation
       stays in JAX (the chains then run on the Python loop) and the explanation names the
       primitive. ``attrs["model_route"]`` says which;
    1. **mode and proxy** (:func:`~validation.workflow.steps.mode_and_proxy`):
       ``ControlVariates(model, center, order)``, the Taylor proxy whose residuals make each
       row's ratio small (Bardenet, Doucet & Holmes 2017, section 7), and the Laplace
       approximation N(mode, Sigma) at the posterior mode (searched from ``center`` when one
       is given: the chains always start at the mode); then the **heavy rows**
       (:func:`samplers.heavy_rows`, one pass): rows whose Taylor residuals dwarf the
       others' (a rare covariate's), which the designed test reads exactly in every decision
       (:class:`samplers.ExactRows`) while its minibatches come from the rest;
    2. **proposal** (:func:`~validation.workflow.steps.laplace_draws`,
       :func:`~validation.workflow.steps.choose_proposal`): ``n_trial + 1`` draws from the
       Laplace approximation with their importance weights (exact, one pass over the data;
       or, once the heavy rows are looked for or given, estimated from them and a row sample
       of the rest, with a standard error, :func:`~validation.workflow.steps.pairs_pass`);
       their Pareto-k (PSIS) and spread pick the proposal: the Gaussian independence
       proposal N(mode, Sigma) (k <= 0.5, or nearly equal weights); for k <= 0.7 the
       multivariate t if its own draws (one more pass) fit and it costs at most 2x in ESS
       per step, else the Gaussian; for k > 0.7 the defensive mixture if its own draws fit,
       else the preconditioned random walk (:func:`~validation.workflow.steps.choose_proposal`);
       the weights also predict the independence sampler's acceptance and ESS per step;
    3. **trial pairs** (:func:`~validation.workflow.steps.trial_pairs`): pairs of that
       proposal (for an independence-type proposal its draws themselves, chained);
    4. **design and route** (:func:`~validation.workflow.steps.design_test`,
       :func:`~validation.workflow.route.choose_route`): the designed minibatch test on the
       control variates (:func:`design.optimize`, ``test`` "austere" unless forced; with heavy
       rows, on the split: trial pairs, design and verdict on the rest, the heavy rows added
       to its rows per step, the route named ``"austere+exact-rows / ..."``), SMH and
       MH-SS of order 2 (rows per step from their Poisson batch at the trial pairs) and exact
       MH are priced in one currency, rows read per effective sample
       ``(rows per step + overhead) / ESS per step``; the cheapest sound one runs, never one
       dearer than exact MH. The explanation lists every candidate with its cost;
    5. **verdict** (:func:`~validation.workflow.steps.verdict`), only when the designed test
       is the cheapest candidate: Austere's real test simulated on the real l_i of 10 trial
       pairs against ``tolerance`` (redesigned by the Edgeworth programme or by simulation, or
       replaced by the confidence test, on failure), Barker's KS distance against
       ``clt_tolerance``; unforced, only the Edgeworth redesign is tried (where the expansion
       holds) and a design that still fails (or whose redesign costs more) loses to the
       next candidate;
    6. **chains** (:func:`~validation.workflow.steps.run_chains`): ``chains`` chains of
       ``draws`` steps from the mode, in parallel processes, extended until the min bulk ESS
       reaches ``ess`` when given (within ``max_seconds``); R-hat and ESS in the attributes;
    7. **after the run** (:func:`~validation.workflow.steps.after_run_check`): a designed
       test is evaluated at 10 pairs of the chain itself; the realised cost per effective
       sample is set beside the predicted one.

    Parameters
    ----------
    model : model
        A built-in model (``LogisticRegression``, ``LinearRegression``, ``RobustRegression``,
        ``GaussianMean``), a user's model with ``N``, ``loglik``, ``logprior`` and the
        derivatives :class:`samplers.ControlVariates` needs, or a ``ControlVariates`` wrapper
        already built (then ``center`` and ``order`` must be left at their defaults).
    tolerance : float in (0, 0.5)
        Bound on the mean error in the acceptance probability of a designed test.
    draws : int
        Steps per chain (the first round, with ``ess``).
    test : {None, "austere", "barker", "confidence", "smh", "mh-ss", "exact"}
        Force the test; None compares Austere, SMH, MH-SS and exact MH. SMH and MH-SS need
        a built-in model (per-row remainder bounds).
    proposal : {None, "independence", "t", "mixture", "walk"}
        Force the proposal ("independence" is the Gaussian); None lets Pareto-k decide.
    route : str, optional
        ``"test/proposal"``, e.g. ``"smh/independence"``: both at once.
    chains : int
        Independent chains (``rng.spawn`` streams).
    ess : float, optional
        Target min bulk ESS: the chains are extended until they reach it.
    max_seconds : float
        Cap on the sampling time with ``ess`` (equal seeds give equal chains unless it binds).
    parallel : bool or None
        Run the chains in a process pool; None: when there are several and the route's
        predicted sampling time per chain (for ``draws`` steps, or to reach ``ess``) is over
        ``PARALLEL_SECONDS``. The chains are the same either way.
    n_trial : int
        Trial pairs, >= 10.
    center, order
        Passed to :class:`samplers.ControlVariates`.
    clt_tolerance : float
        KS-distance tolerance of the Barker verdict (the Austere verdict is the design's own
        ``tolerance``; its KS distance is supporting detail).
    on_clt_failure : {"redesign", "warn"}
        What a failed verdict does to a designed test that was forced with ``test=``
        ("warn": keep it and say so); unforced, a failed design loses to the next route.
    heavy_rows : "auto", False or array of int
        Rows the designed test reads exactly: ``"auto"`` finds them
        (:func:`samplers.heavy_rows`; none on a user's model without GLM rows, and then
        nothing changes), False reads none, an array gives them (distinct indices in
        ``[0, N)``, leaving at least 2 rows). The exact routes read all rows regardless.
        Looked for or given, they also let the passes over pairs (the Laplace draws' weights,
        the walk's and the split's trial pairs, the after-run check) read them exactly and
        only a uniform sample of the rest beyond 2^18 rows
        (:func:`~validation.workflow.steps.pairs_pass`). A given array, even empty, asserts
        that these are the heavy rows and the rest's l_i are evenly spread, so these passes
        sample also on a user's model, where ``"auto"`` finds no residual scales and keeps
        them exact; False keeps every such pass exact.
    rng : None, int or numpy.random.Generator
        Equal seeds give identical results.
    progress : bool or None
        Progress bars of the chains (None: only on a terminal).
    verbose : bool
        Print the explanation and the timings.
    executor : optional
        Run the full-data passes (the mode and the sums, the heavy rows' scales, the trial
        pairs' statistics and the after-run check when they read all rows, the sum of
        SMH/MH-SS's per-row remainder bounds that prices them, the verdict's l_i) and the
        chains on a cluster (a row sample of the pairs' passes is read on the client): a
        ``dask.distributed.Client`` (for instance on a ``LocalCluster``, or connected to
        ``dask scheduler`` / ``dask worker`` processes), its ``get_executor()``, or any
        ``concurrent.futures.Executor``. Built-in models: each pass's task rebuilds about
        10^6 rows on its worker (``model.block_recipe``, reopening a store by its path) and
        returns partial sums merged here in row order, so every number is the local one,
        bit for bit (the heavy rows' sum of squares and the remainder bounds' sum to
        rounding), and so are the chains (one task each, on their own streams). The client
        holds O(sqrt N) numbers for the heavy rows and one pair's l_i (8 N bytes) for the
        verdict's simulation. The passes over the rest of the rows after heavy rows
        (:class:`samplers.ExactRows`) run here. None (default): this machine's cores.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
        ``posterior.theta`` of shape (chains, draws, d) and ``sample_stats``; attributes
        (root and groups): ``route`` ("test / proposal"), ``test``, ``proposal``,
        ``model_route`` (step 0: "as given", "JAX -> numba", "JAX -> numba rows, JAX
        prior" or "JAX"),
        ``pareto_k`` (of the Gaussian's weights, all its draws), ``proposals_tried`` (each
        independence-type proposal looked at, with its k-hat +- NOISE_Z se and its draws),
        ``candidates`` (one line per candidate),
        ``acceptance_predicted``, ``ess_per_step_predicted`` and ``ess_per_step_realised``
        (min bulk ESS over all draws of all chains), ``ess_bulk``, ``rhat``, ``timings``
        (seconds per step, ``result`` the InferenceData's, where a first call imports
        ArviZ, and ``total``), ``seconds_per_ess`` (sampling time per
        effective sample), ``interrupted``; and as before ``design``,
        ``settings``, ``rows_predicted``, ``rows_realised``, ``rows_predicted_chain``,
        ``error_predicted``, ``error_predicted_chain``, ``tolerance``, ``clt_passed``
        ("True", "False", "not needed" or "not run"), ``clt_error_simulated``,
        ``clt_error_simulated_se``, ``clt_redesign``, ``clt_max_ks``, ``clt_batch_size``,
        ``center`` (the mode), ``acceptance_rate``, ``N``, ``heavy_rows`` (how many rows
        the designed test reads exactly, 0 for none) and ``explanation``.

    Raises
    ------
    ValueError, TypeError
        A bad argument (named in the message), a model without what ``ControlVariates``
        needs, or a center where no mode can be found.

    Warns
    -----
    UserWarning
        The chains have not mixed: max R-hat above ``RHAT_WARN`` (1.05).

    Notes
    -----
    **Ctrl-C** during the chains stops them at once: ``fit`` returns the draws so far (in
    parallel all chains cut to the shortest; one after the other the chains started so
    far), warns :class:`samplers.ChainInterrupted` and sets
    ``attrs["interrupted"] = True``; before the chains it raises ``KeyboardInterrupt``.

    The proxy makes minibatches cheap: with a second-order Taylor proxy at the mode the
    residual of a pair is of order ``||theta - theta*||^2 ||theta' - theta||`` per row
    (Bardenet et al. 2017, section 7.2), so an independence proposal of posterior scale
    costs a minibatch test no more rows than a short step, and its ESS per step is close to
    1 where the random walk's is about 0.3 / d.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianPrior, LogisticRegression
    >>> from validation import fit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=5000), np.ones(5000)])
    >>> y = (rng.random(5000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    >>> idata = fit(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)), draws=500,
    ...             n_trial=10, parallel=False, rng=1)
    >>> idata.posterior.theta.shape
    (2, 500, 2)
    >>> idata.posterior.attrs["proposal"], idata.posterior.attrs["rows_realised"] < 500
    ('independence', True)
    >>> sorted(idata.posterior.attrs["timings"])[:3]
    ['after_run', 'chains', 'design']
    """
    args = _check(tolerance, draws, chains, n_trial, clt_tolerance, on_clt_failure, test,
                  proposal, route, ess, max_seconds)
    test, proposal = args
    heavy = _check_heavy_rows(heavy_rows, model)
    rng = as_generator(rng)
    executor = _check_executor(executor)
    # its own threads use every core (design._lib.passes): BLAS on one thread meanwhile
    with one_blas_thread():
        clock = _Clock()
        reached = clock("model_route", steps.model_route, model)
        proxy = clock("mode_and_proxy", steps.mode_and_proxy, reached.model, center, order,
                      executor=executor)
        proxy = replace(proxy, lines=(*reached.lines, *proxy.lines))
        split, split_lines, exact_rows, scales = (
            clock("heavy_rows", _split, proxy, heavy, executor)
            if test is None or test in DESIGNED else (None, (), None, None))
        if exact_rows is not None:      # the passes over pairs may sample the rest's rows
            proxy = replace(proxy, exact_rows=exact_rows,
                            scales=_prepared(scales, proxy.cv.N, exact_rows))
            if split:
                rest = _on_rest(exact_rows, split.cv.rows)
                split = replace(split, exact_rows=rest, scales=_prepared(
                    None if scales is None else np.delete(scales, split.cv.rows),
                    split.cv.N, rest))
        draws_ = clock("laplace_draws", steps.laplace_draws, proxy, max(n_trial, MIN_DRAWS),
                       rng, executor=executor)
        choice = clock("proposal", steps.choose_proposal, proxy, draws_, proposal, rng,
                       executor=executor)
        pairs = clock("trial_pairs", steps.trial_pairs, proxy, choice, draws_, rng,
                      executor=executor)
        dpairs = pairs if split is None else clock("trial_pairs", _split_pairs, split,
                                                   pairs, executor, rng)
        mh_acc = (choice.acceptance if choice.kind != "walk"
                  else float(pairs.trial.accept_prob.mean()))
        plan, cands, tests = clock("design", _candidates, proxy, split, choice, pairs,
                                   dpairs, tolerance, test, mh_acc, executor, rng)
        state = {"verdict": None, "plan": plan, "split": split, "split_lines": split_lines,
                 "tables": []}
        try:
            verify = _verifier(split or proxy, dpairs, tolerance, clt_tolerance,
                               on_clt_failure, rng, state, clock, forced=test in DESIGNED,
                               executor=executor)
            chosen = clock("route", routes.choose_route, cands, verify)
            ready, on = _ready(proxy, chosen.chosen, state, tests, executor)
            if parallel is None:    # a process pool costs about a second: for long runs
                c = chosen.chosen
                steps_needed = max(draws, 0 if ess is None else ess / chains / c.ess_per_step)
                parallel = chains > 1 and steps_needed * c.step_rows * routes.ROW_SECONDS > \
                    PARALLEL_SECONDS
            if parallel and chains > 1:
                steps.join_monitor_tables()     # the chains fork: no thread of ours then
            ran = clock("chains", steps.run_chains, on, ready, choice.proposal, proxy.mode,
                        draws, chains=chains, rng=rng, ess=ess, max_seconds=max_seconds,
                        parallel=parallel, progress=progress, executor=executor)
        finally:
            # a table the chains did not take (a failed or redesigned verdict, another route)
            for started in state["tables"]:
                steps.drop_monitor_table(*started)
        after = clock("after_run", _after, proxy, chosen.chosen, state, ran, choice, rng,
                      executor)
        return _result(proxy, draws_, choice, dpairs, chosen, state, ran, after, tolerance,
                       clock, verbose, reached.route)


def _check_executor(executor):
    """``executor``, refused before any work if it is closed (the message names it)."""
    from design._lib.distribute import as_cluster

    as_cluster(executor)
    return executor


def _check(tolerance, draws, chains, n_trial, clt_tolerance, on_clt_failure, test, proposal,
           route, ess, max_seconds):
    """Validate fit's arguments (before any pass over the data); returns (test, proposal)."""
    check_interval("tolerance", tolerance, 0.0, 0.5)
    check_int("draws", draws, low=1)
    check_int("chains", chains, low=1)
    check_int("n_trial", n_trial, low=N_CHECK)
    check_interval("clt_tolerance", clt_tolerance, 0.0, 1.0)
    if on_clt_failure not in ("redesign", "warn"):
        raise ValueError(f"on_clt_failure must be 'redesign' or 'warn', got {on_clt_failure!r}")
    if route is not None:
        if not isinstance(route, str) or route.count("/") != 1:
            raise ValueError(f"route must be 'test/proposal' (e.g. 'smh/independence'), got "
                             f"{route!r}")
        forced_test, forced_proposal = (part.strip() for part in route.split("/"))
        if (test or forced_test) != forced_test or (proposal or forced_proposal) != forced_proposal:
            raise ValueError(f"route={route!r} contradicts test={test!r} or "
                             f"proposal={proposal!r}")
        test, proposal = forced_test, forced_proposal
    if test is not None and test not in TESTS:
        raise ValueError(f"test must be one of {TESTS} or None, got {test!r}")
    if proposal is not None and proposal not in PROPOSALS:
        raise ValueError(f"proposal must be one of {PROPOSALS} or None, got {proposal!r}")
    if ess is not None and not (isinstance(ess, numbers.Real) and not isinstance(ess, bool)
                                and math.isfinite(ess) and ess > 0):
        raise ValueError(f"ess must be a number > 0 or None, got {ess!r}")
    check_interval("max_seconds", max_seconds, 0.0, math.inf)
    return test, proposal


def _check_heavy_rows(heavy_rows, model):
    """``heavy_rows`` checked: "auto", False, or the sorted distinct rows (a copy)."""
    if isinstance(heavy_rows, str):
        if heavy_rows != "auto":
            raise ValueError(f"heavy_rows must be 'auto', False or an array of row indices, "
                             f"got {heavy_rows!r}")
        return "auto"
    if heavy_rows is False:
        return False
    arr = None if heavy_rows is None or isinstance(heavy_rows, (bool, numbers.Number)) \
        else np.asarray(heavy_rows)
    if arr is None or arr.ndim != 1 or not (arr.dtype.kind in "iu" or arr.size == 0):
        raise TypeError(f"heavy_rows must be 'auto', False or a 1-D array of integer row "
                        f"indices, got {heavy_rows!r}")
    rows = np.unique(arr.astype(np.intp))
    if rows.size != arr.size:
        raise ValueError(f"heavy_rows must be distinct, got {arr.size - rows.size} repeat(s)")
    n = getattr(model, "N", None)
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and rows.size and (
            rows[0] < 0 or rows[-1] >= n or n - rows.size < 2):
        raise ValueError(f"heavy_rows must lie in [0, {n - 1}] and leave at least 2 of the "
                         f"{n} rows, got {rows.size} rows in [{rows[0]}, {rows[-1]}]")
    return rows


def _split(proxy, heavy, executor=None):
    """The designed test's proxy on :class:`samplers.ExactRows` (None without heavy rows),
    the explanation's lines, the rows a row sample reads exactly (the heavy rows, and
    beyond them the rest of :func:`samplers.heavy_rows`' cut for a sample, ``sample_rows``;
    empty when none were found or given; None when not looked for or not known, or when
    that cut does not stop within ``SAMPLE_EXACT_PER_SQRT * sqrt(N)`` rows: then the passes
    over pairs read every row, :func:`~validation.workflow.steps.pairs_pass`) and each row's
    residual at the edge of its reach (:func:`samplers.residual_scales`, from the same
    chunked pass as heavy_rows' scales, :func:`samplers.row_and_residual_scales`: a row
    sample checks against them that it did not miss the rows that could carry the fourth
    moment; None where the rows were given, or the passes run on a cluster)."""
    from samplers import ExactRows, heavy_rows, row_and_residual_scales

    if heavy is False:
        return None, ("   heavy rows: not looked for (heavy_rows=False); every row is "
                      "sampled",), None, None
    note, scales = (), None
    if isinstance(heavy, str):
        cap = math.ceil(SAMPLE_EXACT_PER_SQRT * math.sqrt(proxy.cv.N))
        cluster = steps.on_blocks(proxy.cv, executor)
        try:                        # in this process: both scales from one pass over rows
            found, edges = ((None, None) if cluster is not None
                            else row_and_residual_scales(proxy.cv))
            rows, exact = heavy_rows(proxy.cv, executor=cluster, scales=found,
                                     sample_rows=min(cap, int(proxy.cv.N) - 2))
        except TypeError:           # a user's model: no per-row residual scales
            return None, (), None, None
        if exact is not None:       # a pass over pairs may sample: checked against the
            scales = edges          # residual scales (None on a cluster, or for a GLM with
                                    # a family parameter: not checked)
        how = "found by their residual scale (samplers.heavy_rows)"
        if exact is None:
            note = ("   the other rows' residual scales are too unequal for a row sample "
                    f"(samplers.heavy_rows' cut does not stop within {cap:,} rows), so the "
                    "passes over trial pairs read every row",)
    else:
        rows, exact, how = heavy, heavy, "given (heavy_rows=)"
    if rows.size == 0:
        return (None, (() if isinstance(heavy, str) else ("   heavy rows: none given",)),
                exact, scales)
    cv = ExactRows(proxy.cv, rows)
    return replace(proxy, cv=cv), (
        f"   heavy rows: {rows.size:,} {how}; the designed test reads them exactly in every "
        f"decision (their exact sum shifts the minibatch mean) and draws its minibatches "
        f"from the other {cv.N:,} rows; the exact routes read all rows", *note), exact, scales


def _prepared(scales, N, exact_rows):
    """The residual scales prepared once for every sampled pass over pairs
    (:meth:`design.TrialChain.prepare_scales`: one pass over them here, O(rows read) in each
    pass after), or None."""
    import design

    return None if scales is None else design.TrialChain.prepare_scales(scales, N, exact_rows)


def _on_rest(rows, heavy):
    """``rows`` (sorted, holding the sorted ``heavy``) other than ``heavy``, as row indices
    of the rest (:class:`samplers.ExactRows`' numbering)."""
    extra = rows[~np.isin(rows, heavy)]
    return (extra - np.searchsorted(heavy, extra)).astype(np.intp)


def _split_pairs(split, pairs, executor=None, rng=None):
    """The trial pairs summarised on the split (its rows are the rest's): one more pass
    (:func:`~validation.workflow.steps.pairs_pass`: on a sample of the rest's rows, or on
    ``executor``'s workers when the wrapped model has row blocks,
    :meth:`samplers.ExactRows.block_recipe`)."""
    cv = split.cv
    dprior = np.array([cv.logprior(b) - cv.logprior(a)
                       for a, b in zip(pairs.thetas, pairs.news)])
    got = steps.pairs_pass(split, pairs.thetas, pairs.news, pairs.log_const - dprior, rng,
                           executor=executor)
    trial = got.trial
    kurt = "" if trial.kurtosis is None or pairs.trial.kurtosis is None else (
        f"; median excess kurtosis {np.median(pairs.trial.kurtosis):,.0f} on all rows, "
        f"{np.median(trial.kurtosis):,.0f} on the rest")
    line = (f"   on the rest ({cv.N:,} rows): residual sd per row median "
            f"{np.median(trial.sigma):.3g}{kurt}"
            f"{steps._sample_note(float(got.log_ratio_se.max()), got.rows_read, cv.N)}")
    return replace(pairs, trial=trial, lines=(*pairs.lines, line),
                   kurtosis_upper=got.kurtosis_upper if got.sampled else None)


def _n_exact(px) -> int:
    """Rows a decision on ``px.cv`` reads beyond its minibatch (the heavy rows of a split)."""
    return int(getattr(px.cv, "n_exact", 0)) if px is not None else 0


class _Clock:
    """Runs a step and keeps its seconds (a step run twice adds up)."""

    def __init__(self):
        self.seconds, self.t0 = {}, time.perf_counter()

    def __call__(self, name, fn, *args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t

    def timings(self):
        out = {k: round(v, 4) for k, v in self.seconds.items()}
        out["total"] = round(time.perf_counter() - self.t0, 4)
        return out


def _candidates(proxy, split, choice, pairs, dpairs, tolerance, test, mh_acc, executor=None,
                rng=None):
    """The designed test (its plan, on ``split`` when there are heavy rows) and the exact
    routes (on all rows), priced; only ``test`` if forced. ``rng`` draws the exact routes'
    pricing sample (from 2^18 rows on, where the heavy rows are known).

    The two pricings are independent (the design draws nothing), so the exact routes' runs
    on a thread of its own while the design's programme runs: the same numbers, the design's
    grid waiting less for a core."""
    from concurrent.futures import ThreadPoolExecutor

    from samplers.models.remainder import has_remainder_bounds

    d, kind = proxy.cv.dim, choice.kind
    cands, tests, plan = [], {}, None
    designed = test is None or test in DESIGNED
    exact_ones = test is None or test in ("smh", "mh-ss", "exact")
    if exact_ones and test in ("smh", "mh-ss") and not has_remainder_bounds(proxy.cv):
        raise ValueError(f"test={test!r} needs per-row remainder bounds (a built-in "
                         f"model); {type(proxy.cv.model).__name__} has none: use "
                         "test='exact' or a designed test")
    priced = exact_ones and (has_remainder_bounds(proxy.cv) or test == "exact")
    with ThreadPoolExecutor(max_workers=1) as pool:
        exact = (pool.submit(_exact, proxy, choice, pairs, mh_acc, test, executor, rng)
                 if priced else None)
        if designed:
            plan = steps.design_test(dpairs, tolerance, test or "austere")
            k = _n_exact(split)
            cands.append(routes.Candidate(
                plan.test, kind, float(plan.data_fraction * (split or proxy).cv.N + k),
                mh_acc, routes.ess_per_step(kind, mh_acc, d, mh_acc, choice.ess_per_step),
                False, True if plan.test == "confidence" else None,
                note=f"designed: {_settings(plan)}{_heavy_note(k)}", exact_rows=k))
        if exact is not None:
            found, tests = exact.result()
            cands += [c for c in found if test is None or c.test == test]
    if test is None and kind != "walk":     # the walk's exact MH, for reference
        cands.append(routes.Candidate("exact", "walk", float(proxy.cv.N), 0.25,
                                      routes.WALK_EFFICIENCY / d, True, True,
                                      note="all N rows"))
    return plan, cands, tests


def _exact(proxy, choice, pairs, mh_acc, test, executor=None, rng=None):
    from samplers.models.remainder import has_remainder_bounds

    if test == "exact" or not has_remainder_bounds(proxy.cv):       # exact MH only
        c = routes.Candidate("exact", choice.kind, float(proxy.cv.N), mh_acc,
                             routes.ess_per_step(choice.kind, mh_acc, proxy.cv.dim, mh_acc,
                                                 choice.ess_per_step),
                             True, True, note="all N rows")
        return [c], {}
    return routes.exact_candidates(proxy.cv, choice.kind, pairs.thetas, pairs.news,
                                   pairs.log_const, mh_acc, trial=pairs.trial,
                                   mh_ess=choice.ess_per_step, executor=executor,
                                   exact_rows=proxy.exact_rows, rng=rng)


def _heavy_note(k) -> str:
    return f" + {k:,} heavy rows read exactly" if k else ""


def _verifier(proxy, pairs, tolerance, clt_tolerance, on_clt_failure, rng, state, clock,
              forced, executor=None):
    """The verdict of the designed candidate (``proxy`` and ``pairs`` the split's when there
    are heavy rows), as the route chooser asks for it."""
    k = _n_exact(proxy)

    def verify(candidate):
        heavy = _heavy_tails(pairs, state["plan"])
        if heavy is not None and not forced:
            state["verdict"] = steps.Verdict(state["plan"], None, False, "failed", (
                f"5. CLT check: not run; {heavy}: the rows differ too much for a minibatch "
                "mean to be near-normal, so the designed test is not trusted unforced "
                "(test='austere' forces it)",))
            return replace(candidate, sound=False, note=f"designed: {_settings(state['plan'])}"
                           f"{_heavy_note(k)}; {heavy}")
        if executor is None and state["plan"] is not None and state["plan"].test == "austere":
            # the chains' bias-monitor table, on the other core while the verdict runs
            state["tables"].append((proxy.cv, steps.make_test(state["plan"])))
            steps.start_monitor_table(*state["tables"][-1])
        v = clock("verdict", steps.verdict, proxy, pairs, state["plan"], tolerance,
                  clt_tolerance=clt_tolerance,
                  on_clt_failure=on_clt_failure if forced else "redesign",
                  max_redesigns=MAX_REDESIGNS if forced else AUTO_REDESIGNS,
                  fallback=forced, rng=rng, executor=executor)
        state["verdict"], state["plan"] = v, v.plan
        rows = v.plan.data_fraction * proxy.cv.N + k
        return replace(candidate, test=v.plan.test, rows=float(rows), sound=v.passed,
                       note=f"designed: {_settings(v.plan)}{_heavy_note(k)}; verdict "
                            f"{'passed' if v.passed else 'FAILED'}"
                            + ("" if v.redesign == "none" else f" after a {v.redesign} redesign"))
    return verify


def _heavy_tails(pairs, plan):
    """Why a designed test cannot be trusted on these residuals (``HEAVY_KURTOSIS``), or None.

    Where the trial pairs were summarised from a row sample the gate reads each pair's
    sampled kurtosis raised by 2 standard errors (``pairs.kurtosis_upper``): a sample of
    heavy-tailed residuals misses most of the rows that carry their fourth moment, and a
    kurtosis estimated low would let a designed test through that the full data refuse.
    That is not a sure bound (it covered the full data's kurtosis in 0.84-0.99 of the pairs
    at fit's sample sizes counting the samples grown into the exact pass, 0.72-0.90 among
    those still sampled on t(2) data, :class:`design.SampledTrial`): the sample is grown, up to all
    rows, where few of its rows carry the fourth moment (``shape_rows`` of
    :meth:`design.TrialChain.from_row_sample`), so that the rows the gate hinges on are
    read; a sample that drew none of them looks like normal data, and is caught by the
    rows' residual scales (:func:`samplers.residual_scales`, ``shape_unseen``): where the
    rows it did not draw hold far more of their fourth power than the sample estimates, it
    grows too. On the measured data (``benchmarks/results/kurtosis_gate.md``: normal, t(3),
    t(2), t(1.2) and rare-covariate data, 2^18-2^20 rows) the gate's decision was the full
    data's in every sample; from 8,192 of 10^5 rows of t(1.2) data it was in 0.9 of them
    with the growth alone (0.5 without), and in all with the scales."""
    kurt = pairs.trial.kurtosis if pairs.kurtosis_upper is None else pairs.kurtosis_upper
    if kurt is None or plan is None or plan.test == "confidence":
        return None
    k = float(np.median(kurt))
    if k <= HEAVY_KURTOSIS:
        return None
    bound = ("" if pairs.kurtosis_upper is None else
             " (a row sample's estimate plus 2 standard errors)")
    return (f"median excess kurtosis of the residuals {k:,.0f}{bound} > "
            f"{HEAVY_KURTOSIS:,.0f} (about one row in {k:,.0f} dominates them)")


def _ready(proxy, chosen, state, tests, executor=None):
    """The test object and the model it runs on (SMH's and MH-SS's per-row bounds computed
    here, on ``executor``'s workers when given: the chains carry them)."""
    from samplers import ExactTest

    if chosen.test in DESIGNED:
        return steps.make_test(state["plan"]), (state["split"] or proxy).cv
    if chosen.test == "exact":
        return ExactTest(), proxy.cv.model
    test = tests[chosen.test]
    test.prepare(proxy.cv, executor=steps.on_blocks(proxy.cv, executor))
    return test, proxy.cv


def _after(proxy, chosen, state, ran, choice, rng, executor=None):
    """Step 7 for a designed route: (mean |error|, rows per step) at the chain's own pairs."""
    if chosen.test not in DESIGNED or ran.chains.samples.shape[1] == 0:
        return None
    split = state["split"]
    err, rows = steps.after_run_check(split or proxy, state["plan"], ran.chains[0],
                                      choice.proposal, rng, executor=executor)
    return err, rows + _n_exact(split)


def _explain(proxy, choice, pairs, chosen, state, ran, after):
    """The explanation's lines, and the realised rows per step, acceptance and cost."""
    N, c, v = proxy.cv.N, chosen.chosen, state["verdict"]
    res = ran.chains
    used = res.stats["n_used"] + res.stats.get("n_grad", 0)
    if c.test in DESIGNED:      # n_used counts the rest's rows: the heavy rows come on top
        used = used + _n_exact(state["split"])
    rows = float(np.mean(used)) if c.test != "exact" else float(N)
    acc = float(np.mean(res.stats["accepted"]))
    total = res.samples.shape[0] * res.samples.shape[1]
    weight = routes.EXACT_ROW_WEIGHT if c.test == "exact" else 1.0
    realised = (weight * rows + c.overhead) * total / max(ran.ess_bulk, 1e-12)
    say = [*proxy.lines, *state["split_lines"], *choice.lines, *pairs.lines]
    say.append("4. route: candidates in rows read per effective sample, (rows per step + "
               "per-step overhead in rows) / ESS per step (exact MH's rows weighted "
               f"{routes.EXACT_ROW_WEIGHT:g}: one sequential pass):")
    say += chosen.lines()
    say += list(v.lines) if v is not None else [
        "5. CLT check: " + ("not needed (an exact route)" if c.exact else "not needed")
        + ("" if state["plan"] is None else
           "; the designed route was not verified (it was not the cheapest)")]
    say.append(f"6. chains: {res.samples.shape[0]} x {res.samples.shape[1]} steps of "
               f"{c.name} ({ran.rounds} round(s){', INTERRUPTED' if ran.interrupted else ''}); "
               f"acceptance {acc:.3f}; realised {rows:,.1f} rows per step (predicted "
               f"{c.rows:,.1f}); min bulk ESS {ran.ess_bulk:.0f}, max R-hat {ran.rhat:.3f}; "
               f"cost {realised:,.0f} rows per effective sample (predicted {c.cost:,.0f})")
    say.append("7. after the run: " + (
        "an exact route: nothing to check" if after is None else
        f"at {N_CHECK} pairs of the chain itself the design predicts {after[1]:,.1f} rows "
        f"per step and mean |error| {after[0]:.2g}"))
    return say, rows, acc, realised


def _result(proxy, draws_, choice, pairs, chosen, state, ran, after, tolerance, clock, verbose,
            model_route="as given"):
    """The explanation, the attributes and the ArviZ data."""
    N, c, v = proxy.cv.N, chosen.chosen, state["verdict"]
    say, rows, acc, realised = _explain(proxy, choice, pairs, chosen, state, ran, after)
    names = getattr(proxy.cv.model, "names", None)   # a JaxModel's or a NumPyro model's sites
    # timed: a first call imports ArviZ here (ArviZ 1.x: arviz_base alone), and nowhere before
    idata = clock("result", ran.chains.to_arviz, names=None if names is None else list(names))
    timings = clock.timings()
    explanation = "\n".join(say)
    if verbose:
        print(explanation)
        print("timings (s): " + ", ".join(f"{k} {t:.3g}" for k, t in timings.items())
              + f"; {ran.seconds / max(ran.ess_bulk, 1e-12) * 1e3:.3g} ms of sampling per "
              "effective sample")
    plan = state["plan"] if c.test in DESIGNED else None
    clt = None if v is None else v.clt
    attrs = {
        "route": c.name, "test": c.test, "proposal": choice.kind, "model_route": model_route,
        "pareto_k": float(choice.tried[0][1] if choice.tried else draws_.pareto_k),
        "proposals_tried": "; ".join(f"{kind} k {k:.3g} +- {dk:.2g} (n {n}) sd {sd:.3g}"
                                     for kind, k, sd, n, dk, _ in choice.tried),
        "acceptance_predicted": float(c.acceptance),
        "ess_per_step_predicted": float(c.ess_per_step),
        "ess_per_step_realised": float(ran.ess_bulk / max(ran.chains.samples.shape[0]
                                                          * ran.chains.samples.shape[1], 1)),
        "candidates": "\n".join(x.line() for x in chosen.candidates),
        "cost_predicted": float(c.cost), "cost_realised": float(realised),
        "ess_bulk": float(ran.ess_bulk), "rhat": float(ran.rhat), "timings": timings,
        "seconds_per_ess": float(ran.seconds / max(ran.ess_bulk, 1e-12)),
        "interrupted": bool(ran.interrupted),
        "design": str(plan) if plan is not None else f"none ({c.name})",
        "settings": _settings(plan) if plan is not None else c.name,
        "tolerance": tolerance, "N": N,
        "rows_predicted": float(c.rows), "rows_realised": rows,
        "rows_predicted_chain": float("nan") if after is None else after[1],
        "error_predicted": float(plan.error) if plan is not None else 0.0,
        "error_predicted_chain": float("nan") if after is None else after[0],
        "clt_passed": ("not needed" if (plan is None or plan.test == "confidence") and clt is None
                       else "not run" if clt is None else str(bool(clt.passed))),
        "clt_error_simulated": _simulated(clt, "mean_abs_simulated"),
        "clt_error_simulated_se": _simulated(clt, "mean_abs_simulated_se"),
        "clt_redesign": "none" if v is None else v.redesign,
        "clt_max_ks": float(np.max(clt.ks_distance)) if clt is not None else float("nan"),
        "clt_batch_size": int(clt.batch_size) if clt is not None else 0,
        "center": proxy.mode.tolist(), "acceptance_rate": acc, "explanation": explanation,
        "heavy_rows": _n_exact(state["split"]),
    }
    _update_attrs(idata, attrs)
    if ran.rhat > RHAT_WARN:        # NaN with one chain: no warning
        warnings.warn(f"fit: max R-hat {ran.rhat:.3g} > {RHAT_WARN} (min bulk ESS "
                      f"{ran.ess_bulk:.0f}): the chains have not mixed, so the draws do not "
                      "describe the posterior yet; run longer (draws= or ess=)", UserWarning,
                      stacklevel=3)
    return idata


def _simulated(clt, field) -> float:
    """A field of the Austere verdict's simulation, NaN without one."""
    acceptance = None if clt is None else clt.acceptance
    return float("nan") if acceptance is None else float(getattr(acceptance, field))


def _update_attrs(idata, attrs):
    """Attributes on the root and on every group (ArviZ 0.x InferenceData or 1.x DataTree)."""
    root = getattr(idata, "attrs", None)
    if isinstance(root, dict):
        root.update(attrs)
    for name in ("posterior", "sample_stats"):
        group = getattr(idata, name, None)
        if group is None and hasattr(idata, "__getitem__"):
            group = idata[name]
        group.attrs.update(attrs)
