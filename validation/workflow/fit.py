"""``validation.fit``: the whole control-variate workflow in one call (issue 12, part 4).

mode -> :class:`samplers.ControlVariates` -> trial pairs -> :func:`design.optimize` ->
:func:`validation.clt_check` -> the designed test -> chains -> ArviZ, with the design, its
predicted and realised data use and error in the attributes and a plain-language account of
what was chosen and why.

It lives in the application layer because it needs all three packages: ``samplers`` sits
below ``validation`` and cannot import the CLT check, so it cannot host ``fit``.
"""

from __future__ import annotations

import math

import numpy as np

from design._lib.checks import as_generator, check_int, check_interval

__all__ = ["fit"]

TESTS = ("austere", "barker", "confidence")
#: Pairs on which the CLT check runs (each one O(N) pass) and fresh pairs from the chain
#: on which the design is evaluated after the run.
N_CHECK = 10
#: Row orders simulated per check pair by the Austere verdict (``acceptance_check``): the
#: standard error of the mean |Delta| over N_CHECK pairs is at most about
#: 0.5 / sqrt(N_CHECK * N_PATHS) = 0.0035.
N_PATHS = 2000
#: Minibatches per check pair for the KS distance of the t statistic (supporting detail for
#: Austere; noise 1.36 / sqrt(N_SIM) = 0.01, below half the default ``clt_tolerance``).
N_SIM = 20_000
#: Redesigns an Austere verdict may try (each one simulation of the real test on the
#: check pairs) before the confidence test is designed instead.
MAX_REDESIGNS = 4


def fit(model, tolerance=0.01, draws=2000, *, test="austere", chains=1, n_trial=40,
        center=None, order=2, clt_tolerance=0.05, on_clt_failure="redesign", rng=None,
        progress=None, verbose=False):
    r"""Sample a posterior with a designed minibatch test on control variates, in one call.

    The steps, each reported in ``attrs["explanation"]``:

    1. **mode and proxy**: ``ControlVariates(model, center, order)`` finds the posterior mode
       (chunked Newton / L-BFGS) and the Taylor proxy's sums over all N rows, so that each
       row's ratio is a small residual plus a known mean (Bardenet, Doucet & Holmes 2017,
       section 7);
    2. **proposal**: the random walk with the Laplace covariance at the mode,
       ``RandomWalk.from_laplace`` (2.38 / sqrt(d) in posterior units: nothing to tune);
    3. **trial pairs**: ``n_trial`` pairs, theta from the Laplace approximation
       N(mode, Sigma) and theta' one walk step away, summarised by
       :meth:`design.TrialChain.from_model` (residual means, sds and shape);
    4. **design**: :func:`design.optimize` ``(trial, tolerance, test=test)``: the settings
       that read the fewest rows with mean |P(accept) - P_exact| <= tolerance;
    5. **CLT check** (Austere and Barker, whose thresholds assume a normal minibatch mean),
       on 10 trial pairs. *Austere*: in the currency of the design,
       :func:`validation.clt_check` ``(design=...)``: the real sequential test simulated on
       the real l_i of each pair (u integrated out, :func:`validation.acceptance_check`), its
       mean |Delta| against ``tolerance``; the KS distance is supporting detail. If it fails
       (with ``on_clt_failure="redesign"``) the design is redone on the real l_i: with the
       Edgeworth-corrected programme (``design.optimize(law="edgeworth")``) where the
       expansion holds for every trial pair at every m of the grid
       (:func:`design.edgeworth_reliable`), and by simulation otherwise (or when the
       corrected design fails the simulated verdict too): the Gaussian programme's target is
       scaled down by the ratio of the tolerance to the simulated error, the least-data cell
       within the new target is simulated, and so on, at most ``MAX_REDESIGNS`` times; the
       first design whose simulated verdict passes is kept, and if none does, the confidence
       test (concentration bounds, no CLT) is designed instead. *Barker*: no simulation of
       its verdict exists yet, so the KS distance of the minibatch t statistic decides
       (``clt_tolerance``); on failure the design is redone with batch sizes from the
       smallest passing one (``min_batch_size``), or the confidence test if none passes up
       to N/2. With ``on_clt_failure="warn"`` the design is kept and the failure reported;
    6. **chains**: ``chains`` chains of ``draws`` steps of the designed test from the mode;
    7. **after the run**: the design is evaluated on 10 (state, proposal) pairs of the chain
       itself (:func:`design.evaluate`), predicted and realised rows per step are compared.

    Parameters
    ----------
    model : model
        A built-in model (``LogisticRegression``, ``LinearRegression``, ``RobustRegression``,
        ``GaussianMean``), a user's model with ``N``, ``loglik``, ``logprior`` and the
        derivatives :class:`samplers.ControlVariates` needs, or a ``ControlVariates`` wrapper
        already built (then ``center`` and ``order`` must be left at their defaults).
    tolerance : float in (0, 0.5)
        Bound on the mean error in the acceptance probability.
    draws : int
        Steps per chain.
    test : {"austere", "barker", "confidence"}
        The minibatch test to design.
    chains : int
        Independent chains (``rng.spawn`` streams), run one after the other.
    n_trial : int
        Trial pairs for the design, >= 10.
    center, order
        Passed to :class:`samplers.ControlVariates`.
    clt_tolerance : float
        KS-distance tolerance of the minibatch t statistic. It decides the Barker test's
        CLT check only; for the Austere test the verdict is the design's own ``tolerance``
        (the simulated mean |Delta|) and the KS distance is reported as supporting detail
        (with control variates the residuals are skewed, cubic in the step, so the t
        statistic of a small batch of them is far from Student-t even where the design's
        error is tiny, because the residuals' mean sits many of their sds from the
        threshold).
    on_clt_failure : {"redesign", "warn"}
        What a failed CLT check does (step 5).
    rng : None, int or numpy.random.Generator
        Equal seeds give identical results.
    progress : bool or None
        Progress bars of the chains (None: only on a terminal).
    verbose : bool
        Print the explanation.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
        ``posterior.theta`` of shape (chains, draws, d) and ``sample_stats``; attributes
        (root and groups): ``design`` (the design's summary), ``test``, ``settings``,
        ``rows_predicted`` (per step, ``data_fraction * N`` on the trial pairs),
        ``rows_realised`` (mean rows read per step), ``rows_predicted_chain`` (the design at
        the chain's own pairs), ``error_predicted`` (mean |Delta| on the trial pairs),
        ``error_predicted_chain``, ``tolerance``, ``clt_passed`` (the verdict: for Austere
        the simulated mean |Delta| of the design that runs against ``tolerance``, for
        Barker the KS distance), ``clt_error_simulated`` and ``clt_error_simulated_se``
        (Austere: that mean |Delta| of the real test and its standard error; NaN
        otherwise), ``clt_redesign`` (how the design was redone: ``"none"``,
        ``"edgeworth"``, ``"simulation"``, ``"larger batch"`` or ``"confidence"``),
        ``clt_max_ks``, ``clt_batch_size``, ``center`` (the mode), ``acceptance_rate``, ``N``
        and ``explanation``.

    Raises
    ------
    ValueError, TypeError
        A bad argument (named in the message), a model without what ``ControlVariates``
        needs, or a center where the posterior's Hessian is not negative definite.

    Notes
    -----
    The proxy makes the design cheap: with a second-order Taylor proxy at the mode the
    residual of a pair is of order ``||theta - theta*||^2 ||theta' - theta||`` per row, so at
    steps of posterior scale the standardized drift of the residual test grows like
    ``sqrt(N)`` and one minibatch decides (Bardenet et al. 2017, section 7.2). A center far
    from the mode is allowed; its residuals are large, and the design then predicts a large
    data fraction, which the explanation reports.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianPrior, LogisticRegression
    >>> from validation import fit
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=5000), np.ones(5000)])
    >>> y = (rng.random(5000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    >>> idata = fit(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)), draws=500,
    ...             test="barker", n_trial=10, rng=1)
    >>> idata.posterior.theta.shape
    (1, 500, 2)
    >>> idata.posterior.attrs["rows_realised"] < 0.1 * 5000     # rows read per step
    True
    >>> print(idata.posterior.attrs["explanation"].splitlines()[3])   # doctest: +ELLIPSIS
    4. design (barker): m = 10, Novak threshold delta = None; predicted 10.0 rows per step ...
    """
    import design
    import validation
    from samplers import (AustereTest, BarkerTest, Chains, ConfidenceTest, ControlVariates,
                          RandomWalk, sample)

    tolerance = check_interval("tolerance", tolerance, 0.0, 0.5)
    draws = check_int("draws", draws, low=1)
    chains = check_int("chains", chains, low=1)
    n_trial = check_int("n_trial", n_trial, low=N_CHECK)
    clt_tolerance = check_interval("clt_tolerance", clt_tolerance, 0.0, 1.0)
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if on_clt_failure not in ("redesign", "warn"):
        raise ValueError(f"on_clt_failure must be 'redesign' or 'warn', got {on_clt_failure!r}")
    rng = as_generator(rng)
    say = []

    # 1. mode and proxy
    if isinstance(model, ControlVariates):
        if center is not None or order != 2:
            raise ValueError("center and order apply when fit builds the ControlVariates "
                             "wrapper; model is already one (got center="
                             f"{'given' if center is not None else None}, order={order!r})")
        cv = model
    else:
        cv = ControlVariates(model, center=center, order=order)
    N, d = cv.N, cv.dim
    c = cv.center
    say.append(f"1. mode and proxy: order-{cv.order} Taylor proxy at the "
               f"{'posterior mode' if center is None else 'given center'} "
               f"({c.method}, distance to the mode {c.offset:.2g} posterior sds); every "
               "row's ratio becomes a residual plus the proxy's known mean")
    if c.offset > 1.0:
        say.append("   warning: the center is more than one posterior sd from the mode; the "
                   "residuals, and so the data the test reads, grow with that distance")
    try:
        cov = cv.laplace_covariance()
    except ValueError as exc:
        raise ValueError(f"center: {exc}") from None

    # 2. proposal
    walk = RandomWalk.from_laplace(cv)
    factor = np.linalg.cholesky(cov)
    say.append(f"2. proposal: RandomWalk.from_laplace, step 2.38/sqrt({d}) in units of the "
               "Laplace covariance at the center (optimal for a near-Gaussian posterior)")

    # 3. trial pairs
    thetas = c.theta + rng.standard_normal((n_trial, d)) @ factor.T
    news = thetas + (2.38 / math.sqrt(d)) * rng.standard_normal((n_trial, d)) @ factor.T
    trial = design.TrialChain.from_model(cv, thetas, news, progress=False)
    say.append(f"3. trial pairs: {n_trial} pairs, theta ~ N(center, Sigma), theta' one walk "
               f"step away; residual sd per row: median {np.median(trial.sigma):.3g}")

    # 4. design, 5. CLT check
    plan = _design(design, trial, tolerance, test)
    if plan.test != test:
        say.append(f"   no {test} design meets the tolerance {tolerance:g} on these pairs; "
                   "the confidence test was designed instead")
    say.append(f"4. design ({plan.test}): {_settings(plan)}; predicted "
               f"{plan.data_fraction * N:,.1f} rows per step ({100 * plan.data_fraction:.3g}% "
               f"of N = {N:,}), predicted mean |error| {plan.error:.2g} <= {tolerance:g}")
    if plan.data_fraction > 0.5:
        say.append("   warning: the design reads more than half of the rows per step: the "
                   "residuals are large (a center far from the mode, or a posterior far from "
                   "Gaussian), so control variates save little here")
    clt, redesign = None, "none"
    pairs = (thetas[:N_CHECK], news[:N_CHECK])
    if plan.test == "austere":
        clt = validation.clt_check(cv, pairs, design=plan, tolerance=clt_tolerance,
                                   n_sim=N_SIM, search=False, n_paths=N_PATHS,
                                   rng=rng.spawn(1)[0], progress=False)
        verdict = "5. CLT check in the currency of the design: " + _austere_verdict(clt)
        if clt.passed:
            say.append(verdict)
        elif on_clt_failure == "warn":
            say.append(verdict + "; the design is kept (on_clt_failure='warn')")
        else:
            say.append(verdict)
            plan, clt, redesign, lines = _redesign_austere(design, validation, cv, pairs,
                                                           trial, plan, clt, tolerance,
                                                           clt_tolerance, rng)
            say.extend(lines)
    elif plan.test == "barker":
        m = plan.m
        clt = validation.clt_check(cv, pairs, batch_size=min(m, N - 1), tolerance=clt_tolerance,
                                   search=False, rng=rng.spawn(1)[0], progress=False)
        verdict = (f"5. CLT check at b = {m}: largest KS distance "
                   f"{np.max(clt.ks_distance):.3f} (tolerance {clt_tolerance:g}): ")
        if clt.passed:
            say.append(verdict + "passed")
        elif on_clt_failure == "warn":
            say.append(verdict + "FAILED; the design is kept (on_clt_failure='warn'): its "
                       "error prediction assumes a normal minibatch mean")
        else:
            clt = validation.clt_check(cv, pairs, batch_size=min(m, N - 1),
                                       tolerance=clt_tolerance, search=True,
                                       rng=rng.spawn(1)[0], progress=False)
            b = clt.min_batch_size
            if b is not None:
                grid = sorted({b, 2 * b, 4 * b, 8 * b} & set(range(b, N // 2 + 1)))
                plan = _design(design, trial, tolerance, plan.test, m_grid=grid)
                redesign = "larger batch"
                say.append(verdict + f"FAILED; it passes from b = {b}, so the design was "
                           f"redone with m >= {b}: {_settings(plan)}, predicted "
                           f"{plan.data_fraction * N:,.1f} rows per step")
            else:
                plan = _design(design, trial, tolerance, "confidence")
                redesign = "confidence"
                say.append(verdict + "FAILED at every batch size up to N/2; the confidence "
                           "test (concentration bounds, no CLT) was designed instead: "
                           f"{_settings(plan)}")
    else:
        say.append("5. CLT check: not needed (the confidence test's error bound holds "
                   "without the CLT, Bardenet et al. 2014, Lemma 3.1)")

    # 6. chains
    ready = {"austere": AustereTest, "barker": BarkerTest, "confidence": ConfidenceTest}
    ready_test = ready[plan.test].from_design(plan)
    runs = [sample(cv, ready_test, walk, c.theta, draws, rng=r, progress=progress)
            for r in rng.spawn(chains)]
    result = Chains(tuple(runs))
    used = result.stats["n_used"] + result.stats["n_grad"]
    acc = float(np.mean(result.stats["accepted"]))
    say.append(f"6. chains: {chains} x {draws} steps of {ready_test!r}; acceptance {acc:.3f}; "
               f"realised {used.mean():,.1f} rows per step (predicted "
               f"{plan.data_fraction * N:,.1f})")

    # 7. the design at the chain's own pairs
    chain0 = runs[0]
    k = min(N_CHECK, draws)
    at = rng.choice(draws, size=k, replace=False)
    own = chain0.samples[at]
    prop = np.array([walk.propose(rng, None, None, t, None)[0] for t in own])
    err_chain, frac_chain = design.evaluate(plan, design.TrialChain.from_model(
        cv, own, prop, progress=False))
    say.append(f"7. at {k} pairs of the chain itself the design predicts "
               f"{np.mean(frac_chain) * N:,.1f} rows per step and mean |error| "
               f"{np.mean(np.abs(err_chain)):.2g}")
    explanation = "\n".join(say)
    if verbose:
        print(explanation)
    attrs = {
        "design": str(plan), "test": plan.test, "settings": _settings(plan),
        "tolerance": tolerance, "N": N,
        "rows_predicted": float(plan.data_fraction * N),
        "rows_realised": float(used.mean()),
        "rows_predicted_chain": float(np.mean(frac_chain) * N),
        "error_predicted": float(plan.error),
        "error_predicted_chain": float(np.mean(np.abs(err_chain))),
        "clt_passed": "not needed" if clt is None else str(bool(clt.passed)),
        "clt_error_simulated": _simulated(clt, "mean_abs_simulated"),
        "clt_error_simulated_se": _simulated(clt, "mean_abs_simulated_se"),
        "clt_redesign": redesign,
        "clt_max_ks": float(np.max(clt.ks_distance)) if clt is not None else float("nan"),
        "clt_batch_size": int(clt.batch_size) if clt is not None else 0,
        "center": c.theta.tolist(), "acceptance_rate": acc,
        "explanation": explanation,
    }
    idata = result.to_arviz()
    _update_attrs(idata, attrs)
    return idata


def _simulated(clt, field) -> float:
    """A field of the Austere verdict's simulation, NaN without one."""
    acceptance = None if clt is None else clt.acceptance
    return float("nan") if acceptance is None else float(getattr(acceptance, field))


def _austere_verdict(clt) -> str:
    """One sentence: the simulated verdict of an Austere design, KS beside it."""
    a = clt.acceptance
    return (f"m = {a.m}, epsilon = {a.epsilon:g}: the real test simulated on the real l_i of "
            f"{a.n_pairs} trial pairs has mean |error| {a.mean_abs_simulated:.3g} ± "
            f"{a.mean_abs_simulated_se:.2g} (predicted {a.mean_abs_gaussian:.3g}, "
            f"Edgeworth-corrected {a.mean_abs_edgeworth:.3g}) against the tolerance "
            f"{a.tolerance:g}: {'passed' if clt.passed else 'FAILED'} (supporting detail: "
            f"largest KS distance {np.max(clt.ks_distance):.3f} at b = {clt.batch_size})")


def _redesign_austere(design, validation, cv, pairs, trial, plan, clt, tolerance,
                      clt_tolerance, rng):
    """Redo an Austere design whose simulated verdict failed, on the real l_i.

    Where the Edgeworth expansion holds for every trial pair at every m of the grid, the
    corrected programme designs (``law="edgeworth"``) and the simulation checks it; else (or
    if that check fails) the Gaussian programme's target is scaled down by
    tolerance / simulated error and the least-data cell within it is simulated, at most
    ``MAX_REDESIGNS`` times. Returns (plan, clt, how, lines of the explanation).
    """
    import warnings

    N = trial.N
    lines = []

    def check(candidate):
        return validation.clt_check(cv, pairs, design=candidate, tolerance=clt_tolerance,
                                    n_sim=N_SIM, search=False, n_paths=N_PATHS,
                                    rng=rng.spawn(1)[0], progress=False)

    reliable = trial.skewness is not None and all(
        design.edgeworth_reliable(trial.skewness, trial.kurtosis, int(m)).all()
        for m in plan.m_grid)
    if reliable:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # reliable everywhere: nothing to say
                corrected = design.optimize(trial, tolerance, law="edgeworth")
        except design.InfeasibleDesignError:
            corrected = None
        if corrected is not None:
            clt = check(corrected)
            lines.append("   the Edgeworth expansion holds on every trial pair, so the design "
                         "was redone with the corrected programme (design.optimize(law="
                         "'edgeworth')): " + _austere_verdict(clt))
            if clt.passed:
                return corrected, clt, "edgeworth", lines
    elif trial.skewness is not None:
        worst = int(np.argmax(np.abs(trial.skewness)))
        lines.append(f"   the Edgeworth expansion is outside its validity here (trial pair "
                     f"{worst}: skewness {trial.skewness[worst]:.3g}, excess kurtosis "
                     f"{trial.kurtosis[worst]:.3g}), so the design is redone by simulating the "
                     "real test")
    target = tolerance
    tried = {(plan.m, plan.epsilon)}
    simulated = clt.acceptance.mean_abs_simulated
    errors, datas = plan.error_grid, plan.data_grid
    if getattr(plan, "screen_error_grid", None) is not None:   # cells the screen ruled out
        done = ~np.isnan(errors)
        errors = np.where(done, errors, plan.screen_error_grid)
        datas = np.where(done, datas, plan.screen_data_grid)
    for _ in range(MAX_REDESIGNS):
        target *= min(0.9, tolerance / max(simulated, 1e-12))
        cells = [(datas[i, k], errors[i, k], i, k)
                 for i in range(len(plan.m_grid)) for k in range(len(plan.epsilon_grid))
                 if errors[i, k] <= target
                 and (int(plan.m_grid[i]), float(plan.epsilon_grid[k])) not in tried]
        if not cells:
            break
        _, _, i, k = min(cells)
        tried.add((int(plan.m_grid[i]), float(plan.epsilon_grid[k])))
        try:
            candidate = design.optimize(trial, tolerance, m_grid=[int(plan.m_grid[i])],
                                        epsilon_grid=[float(plan.epsilon_grid[k])])
        except design.InfeasibleDesignError:       # a screened value just below the target
            continue
        clt = check(candidate)
        simulated = clt.acceptance.mean_abs_simulated
        lines.append(f"   simulation redesign (Gaussian target {target:.3g}): "
                     + _austere_verdict(clt))
        if clt.passed:
            return candidate, clt, "simulation", lines
    plan = _design(design, trial, tolerance, "confidence")
    lines.append("   no Austere design on the grid passes the simulated verdict; the "
                 "confidence test (concentration bounds, no CLT) was designed instead: "
                 f"{_settings(plan)}")
    return plan, clt, "confidence", lines


def _design(design, trial, tolerance, test, m_grid=None):
    try:
        return design.optimize(trial, tolerance, test=test, m_grid=m_grid)
    except design.InfeasibleDesignError:
        if test == "confidence":
            raise
        return design.optimize(trial, tolerance, test="confidence")


def _settings(plan) -> str:
    if plan.test == "austere":
        return f"m = {plan.m}, epsilon = {plan.epsilon:g}"
    if plan.test == "barker":
        return f"m = {plan.m}, Novak threshold delta = {plan.delta}"
    return f"first batch {plan.batch_size}, gamma = {plan.gamma:g}, delta = {plan.delta:g}"


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
