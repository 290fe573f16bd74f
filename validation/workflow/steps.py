"""The named steps of :func:`validation.fit`, each a function a user can call alone.

=========================  =====================================================================
:func:`model_route`        a JAX model (JaxModel, a NumPyro bridge) translated to numba, so its
                           chains run on the compiled loop; any other model as given
:func:`mode_and_proxy`     the posterior mode, the Laplace covariance there and the Taylor proxy
                           (:class:`samplers.ControlVariates`) at the center
:func:`laplace_draws`      draws from the Laplace approximation, their log importance weights
                           (exact, or estimated from a row sample with a standard error) and
                           Pareto-k (one pass over the data, or a sample, for all of them)
:func:`choose_proposal`    the Gaussian independence proposal where Laplace fits, the
                           multivariate t or a defensive mixture where it fits less well,
                           else the walk
:func:`trial_pairs`        pairs of the chosen proposal (the Laplace draws themselves for the
                           independence proposal: no second pass)
:func:`design_test`        :func:`design.optimize` on the trial pairs
:func:`verdict`            the design's CLT verdict on the real l_i, redesign on failure
:func:`run_chains`         chains of the chosen route from the mode, in parallel, to a target ESS
:func:`after_run_check`    the design evaluated at pairs of the chain itself
=========================  =====================================================================

The route between the candidate tests is chosen by :mod:`validation.workflow.route`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np

from design._lib.checks import as_generator
from design._lib.warnstate import caught_warnings

__all__ = ["ModelRoute", "model_route", "Proxy", "mode_and_proxy", "LaplaceDraws", "laplace_draws", "pareto_k",
           "proposal_draws", "independence_proposal", "imh_ess_per_step", "K_GOOD", "K_OK",
           "LOGW_SD_OK", "T_DF", "T_PRICE", "NOISE_Z", "DRAWS_GROWTH", "MAX_DRAWS",
           "KHAT_SD_41", "pareto_k_se", "more_draws",
           "MIXTURE_WEIGHT", "MIXTURE_INFLATION",
           "ProposalChoice", "choose_proposal", "TrialPairs", "trial_pairs", "design_test",
           "Verdict", "verdict", "ChainsResult", "run_chains", "after_run_check",
           "make_test", "pairs_pass", "N_CHECK", "N_PATHS", "N_SIM", "MAX_REDESIGNS"]

#: Pairs on which the CLT verdict runs and fresh pairs from the chain on which the design is
#: evaluated after the run. How many pairs each step needs, and what they cost: the
#: Laplace draws (``n_trial + 1``, at least ``MIN_DRAWS + 1``) serve three jobs from one pass
#: over the rows, whose cost with ``loglik_many`` grows with the distinct parameter vectors:
#: Pareto-k fits the largest ceil(min(n / 5, 3 sqrt n)) weights (9 at 41 draws; more than 4
#: are needed), the design averages its error over the ``n_trial`` chained pairs, and the
#: verdict simulates the real test on the first ``N_CHECK`` of them (their statistics from
#: that pass, their l_i computed only at the rows the simulation reads), whose mean |error|
#: then has a standard error of about 0.5 / sqrt(N_CHECK x N_PATHS) = 0.0035 at most.
N_CHECK = 10
#: Row orders simulated per check pair by the Austere verdict (``acceptance_check``): the
#: standard error of the mean |Delta| over N_CHECK pairs is at most about
#: 0.5 / sqrt(N_CHECK * N_PATHS) = 0.0035.
N_PATHS = 2000
#: Minibatches per check pair for the KS distance of the t statistic (supporting detail for
#: Austere; noise 1.36 / sqrt(N_SIM) = 0.01, below half the default ``clt_tolerance``).
N_SIM = 20_000
#: How the Austere verdict simulates (``validation.clt_check``): in rounds of row orders,
#: stopped as soon as the verdict of all ``N_PATHS`` is clear (``sequential``: it differs
#: from the full run's with probability below 0.15%), and without the Edgeworth-corrected
#: prediction, which is reported beside the verdict but never decides it (at N = 10^6 it
#: cost more than the simulation itself).
VERDICT_OPTIONS = dict(sequential=True, edgeworth=False)
#: Redesigns an Austere verdict may try (each one simulation of the real test on the
#: check pairs) before the confidence test is designed instead.
MAX_REDESIGNS = 4
#: Pareto-k thresholds of importance weights (PSIS, Vehtari et al. 2024, section 3): below
#: K_GOOD the weights have a finite variance (k < 1/2) and the Gaussian independence
#: proposal N(mode, Sigma) is used; up to K_OK their mean is still reliably estimated
#: (PSIS's "ok" range: the variance is infinite, the Gaussian's tails are slightly too
#: light); above it importance sampling, and an independence sampler with that proposal,
#: is unreliable. LOGW_SD_OK: the sd of the log weights below which a proposal is used
#: whatever k-hat says: k-hat measures the shape of the weights' tail, not its size, and a
#: Taylor expansion's cubic term gives every near-Gaussian posterior a heavy-shaped but
#: negligible tail (sd 0.04 of the log weights and k-hat above 1 on a 2-parameter logistic
#: regression at N = 3000, where the independence sampler accepts 98% of its proposals).
K_GOOD, K_OK, LOGW_SD_OK = 0.5, 0.7, 0.25
#: Degrees of freedom of the multivariate t tried when the Gaussian's k-hat is "ok": heavy
#: enough tails (|x|^-(5 + d)) to bound pi / t for any log-concave tail, light enough to
#: keep most of the Gaussian's acceptance (its scale is sqrt(5/3) the Laplace sd).
T_DF = 5.0
#: The defensive mixture tried when the Gaussian's k-hat is "bad": weight and sd inflation of
#: its wide component (the weights are at most 1 / MIXTURE_WEIGHT those of a Gaussian
#: MIXTURE_INFLATION times wider than the Laplace fit; Hesterberg 1995).
MIXTURE_WEIGHT, MIXTURE_INFLATION = 0.15, 2.5
#: The least ESS per step of the t, relative to the Gaussian's, at which it replaces a Gaussian
#: whose k-hat is "ok": safety is worth at most a factor 2 in sampling time.
T_PRICE = 0.5
#: How the ladder treats the noise of k-hat and of the log weights' sd (``choose_proposal``).
#: Each is read with its standard error (``pareto_k_se``; the sd's by the delta method from
#: the draws' fourth moment) and compared through its upper bound, estimate + NOISE_Z x se: a
#: proposal is called good ("k <= 0.5") only when the bound is below the threshold. While the
#: lower bound is on the other side of a threshold (more draws could change the answer) the
#: proposal draws DRAWS_GROWTH times as many draws, in one more pass, up to MAX_DRAWS; there
#: the upper bound decides (the heavier-tailed proposal). k-hat's sd is about 0.24 at 41
#: draws (9 tail weights, half of k-hat PSIS's prior), 0.2 at 164 and 0.15 at 656, measured
#: over 12 seeds on five logistic posteriors beside the formula.
NOISE_Z, DRAWS_GROWTH, MAX_DRAWS = 1.0, 4, 656
#: k-hat's sd at 41 draws as measured (``pareto_k_se``'s floor): 0.18-0.34 over 12 seeds on
#: six logistic posteriors, mean 0.25; it falls about as n^(-1/4) (0.13 at 641).
KHAT_SD_41 = 0.26


# -- 0. the model's route ---------------------------------------------------------------------

@dataclass(frozen=True)
class ModelRoute:
    """The model the steps run on, and how it was reached.

    Attributes
    ----------
    model : model
        The translated model (a :class:`samplers.models.RowModel`) or the model given.
    route : str
        ``"as given"``, ``"JAX -> numba"`` (rows and prior compiled), ``"JAX -> numba rows,
        JAX prior"`` (the chains on the Python loop) or ``"JAX"`` (nothing translated: the
        chains on the Python loop, a JAX call per batch).
    lines : tuple of str
        The explanation.
    """

    model: object
    route: str
    lines: tuple


def model_route(model) -> ModelRoute:
    """Step 0: a model written in JAX (one that offers ``numba_translation()``: a
    :class:`samplers.models.JaxModel` or a NumPyro bridge model) translated to numba, its
    row log-likelihood, gradient and Hessian-vector product and a JAX ``logprior``
    (:func:`samplers.models.jaxpr_numba.translate_model`), so that its passes and chains
    run compiled; where a primitive has no translation the model keeps that part in JAX and
    the explanation names the primitive. Any other model (a built-in, a
    :class:`~samplers.models.RowModel` or a JaxModel already translated by
    :func:`~samplers.models.compile_jax_model`) is used as given. A
    :class:`samplers.ControlVariates` around a JAX model becomes the same wrapper (center,
    order, sums) around the translation (:meth:`samplers.ControlVariates.with_model`). No pass
    over the data.

    Examples
    --------
    A built-in model is used as given (a JaxModel's route is ``'JAX -> numba'``, its model
    a RowModel: ``tests/samplers/test_jax_model.py``; this example runs without JAX):

    >>> import numpy as np
    >>> from samplers import GaussianMean
    >>> model = GaussianMean(np.random.default_rng(0).normal(size=100))
    >>> r = model_route(model)
    >>> r.route, r.model is model, r.lines
    ('as given', True, ())
    """
    from samplers import ControlVariates

    wrapped = isinstance(model, ControlVariates)
    ask = getattr(model.model if wrapped else model, "numba_translation", None)
    if ask is None:
        return ModelRoute(model, "as given", ())
    t = ask()
    route = ("JAX" if not t.rows else "JAX -> numba rows, JAX prior" if t.prior == "JAX"
             else "JAX -> numba")
    if not wrapped:
        return ModelRoute(t.model, route, (f"0. model: {t.summary()}",))
    # control variates around a JAX model: the same center and sums around the translation
    return ModelRoute(model.with_model(t.model), route,
                      (f"0. model (inside the ControlVariates, rebuilt around it with their "
                       f"center and sums, no pass): {t.summary()}",))


# -- 1. mode and proxy -----------------------------------------------------------------------

@dataclass(frozen=True)
class Proxy:
    """The control-variate wrapper and the Laplace approximation at the posterior mode.

    Attributes
    ----------
    cv : samplers.ControlVariates
        Its center is the mode, or the ``center`` given.
    mode : ndarray of shape (d,)
        The posterior mode (found from the given center when one is given): chains start here.
    covariance : ndarray of shape (d, d)
        The Laplace covariance at the mode.
    lines : tuple of str
        The explanation.
    exact_rows : ndarray of int or None
        The rows a pass over pairs reads exactly when it samples the rest
        (:func:`pairs_pass`): the heavy rows fit split off, found by
        :func:`samplers.heavy_rows` or given by the user (``fit(heavy_rows=[...])``, which
        asserts that these are the heavy rows and the rest's l_i are evenly spread, so the
        passes sample even on a user's model); empty when it looked and found none, when the
        user gave none (``heavy_rows=[]``: none are heavy), or on the split itself, whose
        heavy rows are folded in exactly. None (the default: no split looked for, a user's
        model without per-row residual scales under ``heavy_rows="auto"``,
        ``heavy_rows=False``): nothing says the rows' l_i are evenly spread, so every pass
        reads all rows.
    scales : object or None
        Each row's residual scale (:func:`samplers.residual_scales`, from fit's heavy-row
        pass), prepared once (:meth:`design.TrialChain.prepare_scales`), against which a
        sampled pass checks that it did not miss the rows that could carry the fourth moment
        (``scales`` of :meth:`design.TrialChain.from_row_sample`); None: not checked.
    """

    cv: object
    mode: np.ndarray
    covariance: np.ndarray
    lines: tuple
    exact_rows: np.ndarray | None = None
    scales: np.ndarray | None = None


def mode_and_proxy(model, center=None, order=2, *, executor=None) -> Proxy:
    """Step 1: the Taylor proxy at ``center`` (default the mode) and the Laplace approximation
    at the mode.

    With a center away from the mode, the mode is searched from it too, so that the chains
    start there and the proposals take the posterior's shape, whatever the expansion point.
    ``executor`` runs the passes on a cluster (:class:`samplers.ControlVariates`).

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianPrior, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=2000), np.ones(2000)])
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    >>> px = mode_and_proxy(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> bool(np.allclose(px.mode, px.cv.center.theta)), px.covariance.shape
    (True, (2, 2))
    """
    from samplers import ControlVariates

    executor = _sums_executor(model, executor)
    if isinstance(model, ControlVariates):
        if center is not None or order != 2:
            raise ValueError("center and order apply when fit builds the ControlVariates "
                             "wrapper; model is already one (got center="
                             f"{'given' if center is not None else None}, order={order!r})")
        cv = model
    else:
        cv = ControlVariates(model, center=center, order=order, executor=executor)
    c = cv.center
    at_mode = c.method != "given" or c.offset < 1e-3
    finder = cv if at_mode else ControlVariates(cv.model, order=cv.order, start=c.theta,
                                                executor=executor)
    try:
        cov = finder.laplace_covariance()
    except ValueError as exc:
        if finder is cv and c.method == "given":    # the Hessian at the center itself
            raise ValueError(f"center: {exc}") from None
        # at the mode searched for: the data, not a center, leave a flat direction
        raise ValueError(
            "model: the posterior Hessian at the mode is not negative definite (or singular "
            "to rounding), so the "
            "posterior has no single mode there (collinear columns of X, such as a constant "
            "column beside an intercept or a duplicated column, under a flat prior); drop "
            "or combine those columns, or give a proper prior") from None
    lines = [f"1. mode and proxy: order-{cv.order} Taylor proxy at the "
             f"{'posterior mode' if c.method != 'given' else 'given center'} "
             f"({c.method}, distance to the mode {c.offset:.2g} posterior sds); every "
             "row's ratio becomes a residual plus the proxy's known mean"]
    if c.offset > 1.0:
        lines.append("   warning: the center is more than one posterior sd from the mode; the "
                     "residuals, and so the data the test reads, grow with that distance; "
                     "the mode was found from it and the chains start there")
    mode = np.array(finder.center.theta, dtype=float)
    return Proxy(cv, mode, cov, tuple(lines))


# -- 2. the Laplace draws and the proposal ---------------------------------------------------

@dataclass(frozen=True)
class LaplaceDraws:
    """Draws from N(mode, Sigma), their log importance weights and the pairs they form.

    Attributes
    ----------
    thetas : ndarray of shape (n + 1, d)
    log_weights : ndarray of shape (n + 1,)
        ``log pi(theta) - log q(theta)`` up to a constant: exact (all N rows), or estimated
        from a row sample within ``log_weight_se``.
    trial : design.TrialChain
        The n chained pairs ``(thetas[k], thetas[k + 1])`` as independence-proposal pairs:
        the sum of their l_i is the log-likelihood ratio, so the weights come free.
    pareto_k : float
        PSIS's k-hat of the weights (:func:`pareto_k`).
    acceptance : float
        The independence sampler's acceptance rate the weights predict.
    seconds : float
        Time of the pass.
    ess_per_step : float
        The independence sampler's effective samples per step the weights predict
        (:func:`imh_ess_per_step`).
    kind : str
        The proposal that drew them: ``"independence"`` (the Gaussian N(mode, Sigma)),
        ``"t"`` or ``"mixture"``.
    log_weight_se : float
        The largest standard error (nats) of the log weights when they were estimated from a
        row sample (:func:`pairs_pass`); 0 when exact.
    rows_read : int
        Rows whose l_i the weighing computed, summed over its passes (each reads N rows
        when exact, fewer when sampled).
    passes : int
        Passes over pairs the weighing made (:func:`more_draws` adds one).
    trial_sampled : bool
        Whether ``trial``'s statistics were estimated from a row sample (the first pass's).
    trial_kurtosis_upper : ndarray or None
        Each pair's sampled excess kurtosis raised by 2 standard errors
        (:attr:`design.SampledTrial.kurtosis_upper`) where ``trial`` was sampled; else None.
    """

    thetas: np.ndarray
    log_weights: np.ndarray
    trial: object
    pareto_k: float
    acceptance: float
    seconds: float
    ess_per_step: float = float("nan")
    kind: str = "independence"
    log_weight_se: float = 0.0
    rows_read: int = 0
    passes: int = 1
    trial_sampled: bool = False
    trial_kurtosis_upper: object = None


def laplace_draws(proxy: Proxy, n=40, rng=None, *, executor=None) -> LaplaceDraws:
    """Step 2a: ``n + 1`` draws from the Laplace approximation and their importance weights
    (exact, or estimated from a row sample within ``log_weight_se``).

    The draws are chained into ``n`` pairs, each one an independence-proposal pair, and
    summarised by :func:`pairs_pass` (one pass over the data, or over the heavy rows and a
    row sample of the rest where ``proxy.exact_rows`` is known); the log MH ratio of pair k
    is ``log w(theta_{k+1}) - log w(theta_k)``, so the cumulative sums are the log
    importance weights (estimated from the sample's rows, which all pairs share, within
    ``log_weight_se``).
    """
    from samplers import Independence

    rng = as_generator(rng)
    factor = np.linalg.cholesky(proxy.covariance)
    thetas = proxy.mode + rng.standard_normal((n + 1, proxy.cv.dim)) @ factor.T
    return _weighed(proxy, Independence(proxy.mode, proxy.covariance), thetas, "independence",
                    executor, rng)


def proposal_draws(proxy: Proxy, kind: str, n=40, rng=None, *, executor=None) -> LaplaceDraws:
    """``n + 1`` draws from the independence proposal ``kind`` ("t": the multivariate t with
    ``T_DF`` degrees of freedom, "mixture": the defensive mixture) around the Laplace
    approximation, with their importance weights (exact, or estimated from a row sample
    within ``log_weight_se``), k-hat, predicted acceptance and ESS per step, as
    :func:`laplace_draws` (one pass over the data, or a sample)."""
    rng = as_generator(rng)
    q = independence_proposal(proxy, kind)
    thetas = np.array([q.propose(rng, None, None, proxy.mode, None)[0] for _ in range(n + 1)])
    return _weighed(proxy, q, thetas, kind, executor, rng)


def more_draws(proxy: Proxy, got: LaplaceDraws, n, rng=None, *, executor=None) -> LaplaceDraws:
    """``got`` with ``n`` more draws of its proposal, weighed in one more pass over pairs
    (:func:`pairs_pass`: all rows, or a sample).

    The new draws are chained from ``got``'s last one, so their log weights continue its
    cumulative sum (one more distinct parameter vector in the pass); k-hat, the predicted
    acceptance and ESS per step are those of all the draws. ``trial`` stays ``got``'s pairs
    (the design's trial pairs are the first ``trial.n_pairs + 1`` draws).
    """
    rng = as_generator(rng)
    q = independence_proposal(proxy, got.kind)
    if got.kind == "independence":
        factor = np.linalg.cholesky(proxy.covariance)
        new = proxy.mode + rng.standard_normal((n, proxy.cv.dim)) @ factor.T
    else:
        new = np.array([q.propose(rng, None, None, proxy.mode, None)[0] for _ in range(n)])
    ext = _weighed(proxy, q, np.vstack([got.thetas[-1:], new]), got.kind, executor, rng)
    thetas = np.vstack([got.thetas, new])
    logw = np.concatenate([got.log_weights, got.log_weights[-1] + ext.log_weights[1:]])
    return LaplaceDraws(thetas, logw, got.trial, pareto_k(logw), _imh_acceptance(logw),
                        got.seconds + ext.seconds, imh_ess_per_step(thetas, logw), got.kind,
                        math.hypot(got.log_weight_se, ext.log_weight_se),
                        got.rows_read + ext.rows_read, got.passes + ext.passes,
                        got.trial_sampled, got.trial_kurtosis_upper)


def independence_proposal(proxy: Proxy, kind: str):
    """The independence proposal ``kind`` around the Laplace approximation."""
    from samplers import Independence, MixtureIndependence, StudentTIndependence

    if kind == "t":
        return StudentTIndependence(proxy.mode, proxy.covariance, df=T_DF)
    if kind == "mixture":
        return MixtureIndependence(proxy.mode, proxy.covariance, weight=MIXTURE_WEIGHT,
                                   inflation=MIXTURE_INFLATION)
    return Independence(proxy.mode, proxy.covariance)


def _weighed(proxy, q, thetas, kind, executor=None, rng=None) -> LaplaceDraws:
    """The draws ``thetas`` of the independence proposal ``q`` chained and summarised."""
    logq = np.array([q.log_density(t) for t in thetas])
    t0 = time.perf_counter()
    got = pairs_pass(proxy, thetas[:-1], thetas[1:], logq[:-1] - logq[1:], rng,
                     executor=executor, cumulative=True)
    seconds = time.perf_counter() - t0
    trial = got.trial
    logw = np.concatenate([[0.0], np.cumsum(trial.log_accept_ratio)])
    return LaplaceDraws(thetas, logw, trial, pareto_k(logw), _imh_acceptance(logw), seconds,
                        imh_ess_per_step(thetas, logw), kind,
                        float(max(got.cumulative_se.max(), got.log_ratio_se.max())),
                        got.rows_read, 1, got.sampled,
                        got.kurtosis_upper if got.sampled else None)


def pairs_pass(proxy: Proxy, thetas, news, log_q_ratios, rng=None, *, executor=None,
               cumulative=False):
    """The pairs ``(thetas[k], news[k])`` summarised on ``proxy.cv``: a
    :class:`design.SampledTrial`.

    Where ``proxy.exact_rows`` is known (fit's heavy-row split was looked for), from those
    rows and a uniform sample of the rest (:meth:`design.TrialChain.from_row_sample`: the
    sample grows until every log ratio's standard error is at most its ``se_tolerance``
    default, 0.001 nats, and the exact pass runs once it would exceed a quarter of the rows,
    so below 2^18 rows nothing is sampled and ``rng`` is not drawn from; it grows too, up
    to all rows, where few of its rows carry the fourth moment, its ``shape_rows``, or
    where the rows it did not draw could carry far more of it, judged by ``proxy.scales``,
    its ``shape_unseen``). Once
    the heavy rows are read exactly, a control-variate model's residuals are evenly spread
    and their mean over the sample is normal; the proxy's sum, the prior and the proposal
    stay exact. Where it is not known (None), one exact pass over all rows (:meth:`design.TrialChain.from_model`),
    with standard errors 0: a sample could miss the few rows that carry the sum.
    ``executor`` runs the exact pass on a cluster (:func:`on_blocks`); a sample is read here.
    """
    import design

    cv = proxy.cv
    if proxy.exact_rows is None:
        trial = design.TrialChain.from_model(cv, thetas, news, log_q_ratios, progress=False,
                                             executor=on_blocks(cv, executor))
        zero = np.zeros(trial.n_pairs)
        return design.SampledTrial(trial, zero, zero, int(cv.N), False)
    return design.TrialChain.from_row_sample(
        cv, thetas, news, log_q_ratios, rng=as_generator(rng), exact_rows=proxy.exact_rows,
        cumulative=cumulative, progress=False, executor=on_blocks(cv, executor),
        scales=proxy.scales)


def _sample_note(se, rows, N, heavy=0, passes=1) -> str:
    """The explanation's note on ``passes`` passes over pairs that read ``rows`` rows in
    all, ``heavy`` of them exactly in each sampled pass ("" when every pass was exact: each
    sampled pass reads fewer than N rows, an exact one N)."""
    if not 0 < rows < passes * N:
        return ""
    exact = f", the {heavy:,} heavy rows exact" if heavy else ""
    if passes == 1:
        return (f"; l_i from {rows:,} of {N:,} rows (a uniform sample{exact}), log ratios "
                f"within {se:.1g} nats (1 se)")
    return (f"; l_i from {rows:,} rows over {passes} passes over {N:,} rows (uniform "
            f"samples{exact}, or all rows where a sample would exceed a quarter of them), "
            f"log weights within {se:.1g} nats (1 se)")


def _n_heavy(proxy) -> int:
    """Rows a sampled pass over pairs on ``proxy`` reads exactly."""
    return 0 if proxy.exact_rows is None else int(proxy.exact_rows.size)


def _imh_acceptance(logw) -> float:
    """E[min(1, w(theta') / w(theta))], theta ~ pi (the draws reweighted), theta' ~ q."""
    W, a = _imh_local(logw)
    return float(W @ a)


def _imh_local(logw):
    """Self-normalised weights W_i and the acceptance a(theta_i) = E_q[min(1, w' / w_i)] of an
    independence sampler at each draw (the other draws as the proposal's)."""
    lw = np.asarray(logw) - np.max(logw)
    W = np.exp(lw)
    W /= W.sum()
    ratio = np.exp(np.minimum(lw[None, :] - lw[:, None], 0.0))
    np.fill_diagonal(ratio, 0.0)
    return W, ratio.sum(axis=1) / (lw.size - 1)


def imh_ess_per_step(thetas, log_weights) -> float:
    r"""Effective samples per step of an independence sampler, predicted from draws of its
    proposal and their importance weights: the least over the coordinates.

    An independence chain at theta stays there for a geometric number of steps of mean
    ``1 / a(theta)``, ``a(theta) = E_q[min(1, w(theta') / w(theta))]``, and then moves to a
    draw nearly independent of theta. Counting the chain in such sojourns (renewal-reward), the
    asymptotic variance of the mean of f per step is

    .. math::

        \sigma_f^2 = E_\pi\Bigl[rac{2 - a(	heta)}{a(	heta)} (f(	heta) - \mu_f)^2\Bigr],

    so ESS per step is ``Var_pi(f) / sigma_f^2``: ``a / (2 - a)`` when a is constant, less when
    the sojourns are long exactly where f is far from its mean (a tail the proposal
    under-covers: a large weight, a small a). The expectations under pi are the draws
    reweighted by their self-normalised weights; ``a(theta_i)`` averages over the other draws.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(400, 2))
    >>> round(imh_ess_per_step(x, np.zeros(400)), 3)    # exact proposal: every move accepted
    1.0
    >>> lw = -0.5 * (x ** 2).sum(axis=1) * 0.5           # proposal 1/sqrt(0.5) too wide ...
    >>> bool(imh_ess_per_step(x, lw) < 0.8)
    True
    """
    x = np.asarray(thetas, dtype=float)
    W, a = _imh_local(log_weights)
    mu = W @ x
    dev2 = (x - mu) ** 2
    var = W @ dev2
    hold = (W * (2.0 - a) / a) @ dev2
    return float(np.min(var / np.maximum(hold, 1e-300)))


def pareto_k(log_weights) -> float:
    """PSIS's Pareto-k diagnostic of importance weights (Vehtari et al. 2024, section 3).

    The ``M = ceil(min(n / 5, 3 sqrt(n)))`` largest weights above the cut-off, minus it, are
    fitted by a generalised Pareto law with Zhang & Stephens' (2009) empirical-Bayes
    estimator, with PSIS's weakly informative prior (k shrunk towards 0.5 with weight 10);
    inf when the tail has 4 points or fewer.

    Examples
    --------
    >>> import numpy as np
    >>> lw = np.random.default_rng(0).normal(size=1000) * 0.1     # light tails
    >>> bool(pareto_k(lw) < 0.5)
    True
    >>> lw = np.log(np.random.default_rng(0).pareto(1.0, 1000))   # tail index 1
    >>> bool(pareto_k(lw) > 0.7)
    True
    """
    x = np.sort(np.asarray(log_weights, dtype=float))
    x = x - x[-1]
    n = x.size
    m = int(math.ceil(min(0.2 * n, 3.0 * math.sqrt(n))))
    cut = x[n - m - 1]
    tail = np.exp(x[x > cut]) - math.exp(cut)
    if tail.size <= 4:
        return math.inf
    return _gpd_shape(tail)


def _gpd_shape(y) -> float:
    """Zhang & Stephens (2009) posterior-mean shape of a generalised Pareto fit to sorted y."""
    n = y.size
    m = 30 + int(math.sqrt(n))
    b = 1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))
    b = b / (3.0 * y[int(n / 4 + 0.5) - 1]) + 1.0 / y[-1]
    k = np.log1p(-b[:, None] * y).mean(axis=1)
    lik = n * (np.log(-b / k) - k - 1.0)
    w = 1.0 / np.exp(lik - lik[:, None]).sum(axis=1)
    keep = w >= 10 * np.finfo(float).eps
    w, b = w[keep] / w[keep].sum(), b[keep]
    k_post = float(np.log1p(-np.sum(b * w) * y).mean())
    return (n * k_post + 10 * 0.5) / (n + 10)


def pareto_k_se(k, n) -> float:
    """Standard error of :func:`pareto_k` ``k`` from ``n`` weights.

    The generalised Pareto shape fitted to the M tail weights has asymptotic sd
    ``(1 + k) / sqrt(M)`` (its maximum-likelihood estimator, k > -1/2), and PSIS's prior
    shrinks the fit by ``M / (M + 10)``; at few draws that understates the spread, which is
    floored at the measured one, ``KHAT_SD_41 (41 / n)^(1/4)``. Over 12 seeds on six logistic
    posteriors the sd of k-hat was 0.18-0.34 at n = 41 (the asymptotic formula 0.16-0.24),
    0.15-0.27 at 161 (0.14-0.2) and 0.10-0.16 at 641 (0.12-0.15).

    Examples
    --------
    >>> round(pareto_k_se(0.5, 41), 2), round(pareto_k_se(0.5, 641), 2)
    (0.26, 0.15)
    """
    m = int(math.ceil(min(0.2 * n, 3.0 * math.sqrt(n))))
    if not math.isfinite(k) or m <= 4:
        return math.inf
    k_fit = (k * (m + 10) - 5.0) / m            # the fit before the prior's shrinkage
    return max(m / (m + 10) * (1.0 + max(k_fit, 0.0)) / math.sqrt(m),
               KHAT_SD_41 * (41.0 / n) ** 0.25)


def _spread(log_weights):
    """The sd of the log weights and its standard error (delta method, fourth moment)."""
    x = np.asarray(log_weights, dtype=float)
    c = x - x.mean()
    var = float(np.mean(c ** 2))
    if var <= 0.0:
        return 0.0, 0.0
    m4 = float(np.mean(c ** 4))
    return math.sqrt(var), math.sqrt(max(m4 - var ** 2, 0.0) / x.size) / (2.0 * math.sqrt(var))


@dataclass(frozen=True)
class ProposalChoice:
    """The proposal and what it predicts.

    Attributes
    ----------
    proposal : samplers.Proposal
    kind : {"independence", "t", "mixture", "walk"}
        ``"independence"`` is the Gaussian N(mode, Sigma).
    acceptance : float
        Exact MH's predicted acceptance with it (NaN for the walk: its trial pairs measure it).
    lines : tuple of str
    draws : LaplaceDraws or None
        The draws of an independence-type proposal with their weights (its trial pairs);
        None for the walk.
    ess_per_step : float
        Exact MH's predicted effective samples per step with it (NaN for the walk).
    tried : tuple of (str, float, float, int, float, bool)
        Each independence-type proposal looked at: (kind, k-hat, sd of the log weights,
        number of draws, ``NOISE_Z`` standard errors of k-hat, whether it fitted).
    """

    proposal: object
    kind: str
    acceptance: float
    lines: tuple
    draws: object = None
    ess_per_step: float = float("nan")
    tried: tuple = ()


#: The proposals ``choose_proposal`` can be forced to.
PROPOSAL_KINDS = ("independence", "t", "mixture", "walk")


def choose_proposal(proxy: Proxy, draws: LaplaceDraws, proposal=None, rng=None, *,
                    executor=None) -> ProposalChoice:
    """Step 2b: the proposal by how well the Laplace approximation fits, from the Pareto-k
    (PSIS's k-hat) of the importance weights of the Laplace draws.

    * k <= ``K_GOOD`` (0.5; the weights have a finite variance) or sd of the log weights
      <= ``LOGW_SD_OK``: the Gaussian independence proposal N(mode, Sigma), using the draws
      already weighed;
    * ``K_GOOD`` < k <= ``K_OK`` (0.7: PSIS's "ok", the Gaussian's tails a little too light):
      the multivariate t with ``T_DF`` degrees of freedom, whose weights stay bounded where a
      log-concave posterior's tails exceed the Gaussian's, if its own k <= ``K_OK`` and its
      predicted ESS per step is at least ``T_PRICE`` times the Gaussian's (a t with few
      degrees of freedom is a poor independence proposal in high dimension: its radius
      varies by about sqrt(2 / df) relative, the posterior's by sqrt(2 / d); measured at
      d = 101, acceptance 0.2-0.3 against the Gaussian's 0.95); if the t fits at a higher
      price the Gaussian, which PSIS still calls usable; if the t does not fit (a tail
      heavier than the t's: the Gaussian's "ok" was its k-hat's noise), as k > ``K_OK``;
    * k > ``K_OK`` (PSIS's "bad": skewness or a direction the Gaussian under-covers): the
      defensive mixture (wide component ``MIXTURE_INFLATION`` times wider, weight
      ``MIXTURE_WEIGHT``) if its own k <= ``K_OK`` or its log weights' sd <= ``LOGW_SD_OK``;
      else the preconditioned random walk ``RandomWalk.from_laplace`` (2.38 / sqrt(d) in
      posterior units), which needs no fit.

    The t or the mixture is drawn and weighed in its own pass (:func:`proposal_draws`; these
    draws are its trial pairs). ``proposal`` forces one of ``PROPOSAL_KINDS``.

    Each comparison is made with k-hat's noise (its sd is about 0.24 at 41 draws): k-hat
    and the sd of the log weights count as below a threshold only when their upper bound
    (estimate + ``NOISE_Z`` standard errors, :func:`pareto_k_se`) is; while the lower and
    upper bounds fall on different sides of a threshold, the proposal's draws grow
    ``DRAWS_GROWTH``-fold (:func:`more_draws`, one pass each) up to ``MAX_DRAWS``, where
    the upper bound decides (the heavier-tailed choice). ``tried`` records k-hat, the sd,
    the number of draws, k-hat's half-width and whether the proposal fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from samplers import GaussianPrior, LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=2000), np.ones(2000)])
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(float)
    >>> px = mode_and_proxy(LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0)))
    >>> choice = choose_proposal(px, laplace_draws(px, 40, rng=0), rng=1)
    >>> choice.kind, choice.tried[0][3]          # the sd of the log weights settles it
    ('independence', 41)
    """
    from samplers import RandomWalk

    rng = as_generator(rng)
    d, tried = proxy.cv.dim, []
    kind, got = proposal, draws
    if proposal is None:
        kind, got, _ = _ladder(proxy, draws, rng, tried, executor)
    elif proposal in ("t", "mixture"):
        got = proposal_draws(proxy, proposal, draws.trial.n_pairs, rng, executor=executor)
    lines = [f"2. proposal: {_proposal_name(kind, d)} "
             f"({'forced' if proposal else _why(tried, kind)})"]
    if kind == "walk":
        return ProposalChoice(RandomWalk.from_laplace(proxy.covariance), kind, float("nan"),
                              tuple(lines), tried=tuple(tried))
    note = _sample_note(got.log_weight_se, got.rows_read, proxy.cv.N, _n_heavy(proxy),
                        got.passes)
    lines[0] += (f"; predicted acceptance {got.acceptance:.2f}, ESS per step "
                 f"{got.ess_per_step:.2f} (from the weights of its {got.thetas.shape[0]} "
                 f"draws{note})")
    return ProposalChoice(independence_proposal(proxy, kind), kind, got.acceptance,
                          tuple(lines), got, got.ess_per_step, tuple(tried))


def _ladder(proxy, draws, rng, tried, executor=None):
    """The unforced choice: (kind, its draws, the Gaussian's draws); appends to ``tried`` what
    it looked at."""
    gauss = _settled(proxy, draws, (K_GOOD, K_OK), rng, executor)
    level = _level(gauss, (K_GOOD, K_OK))
    tried.append(_looked(gauss, level == 0))
    if level == 0:
        return "independence", gauss, gauss
    if level == 1:                       # "ok": the t if it fits at a bounded price
        t = _settled(proxy, proposal_draws(proxy, "t", draws.trial.n_pairs, rng,
                                           executor=executor), (K_OK,), rng, executor)
        fits = _level(t, (K_OK,)) == 0
        tried.append(_looked(t, fits))
        if fits and t.ess_per_step >= T_PRICE * gauss.ess_per_step:
            return "t", t, gauss
        if fits:
            return "independence", gauss, gauss
        # a tail even the t's does not cover: the Gaussian's "ok" k-hat was its noise
    mixture = _settled(proxy, proposal_draws(proxy, "mixture", draws.trial.n_pairs, rng,
                                             executor=executor), (K_OK,), rng, executor)
    fits = _level(mixture, (K_OK,)) == 0
    tried.append(_looked(mixture, fits))
    if fits:
        return "mixture", mixture, gauss
    return "walk", None, gauss


def _bounds(got):
    """(k-hat's lower and upper bound, the log weights' sd's lower and upper bound)."""
    n = got.log_weights.size
    k, spread = got.pareto_k, _spread(got.log_weights)
    dk = NOISE_Z * pareto_k_se(k, n)
    return k - dk, k + dk, spread[0] - NOISE_Z * spread[1], spread[0] + NOISE_Z * spread[1]


def _level(got, limits, side=1):
    """The first of ``limits`` k-hat's upper bound (``side`` 1; -1: its lower bound) is at or
    below (0 when the log weights' sd's bound is at most ``LOGW_SD_OK``); ``len(limits)``
    when above all."""
    k_lo, k_hi, s_lo, s_hi = _bounds(got)
    if (s_hi if side > 0 else s_lo) <= LOGW_SD_OK:
        return 0
    k = k_hi if side > 0 else k_lo
    return next((i for i, limit in enumerate(limits) if k <= limit), len(limits))


def _settled(proxy, got, limits, rng, executor):
    """``got`` with more draws (``DRAWS_GROWTH`` times as many per round, at most
    ``MAX_DRAWS``) while the lower and upper bounds of k-hat and of the sd of the log weights
    fall on different sides of a threshold."""
    while (_level(got, limits, -1) != _level(got, limits) and
           got.log_weights.size < MAX_DRAWS):
        n = min(DRAWS_GROWTH * got.log_weights.size, MAX_DRAWS) - got.log_weights.size
        got = more_draws(proxy, got, n, rng, executor=executor)
    return got


def _looked(got, fits):
    """One entry of ``ProposalChoice.tried``."""
    k_lo, k_hi, s_lo, s_hi = _bounds(got)
    return (got.kind, got.pareto_k, _spread(got.log_weights)[0], got.log_weights.size,
            0.5 * (k_hi - k_lo), bool(fits))


def _proposal_name(kind, d) -> str:
    return {"independence": "independence N(mode, Sigma)",
            "t": f"independence multivariate t (df {T_DF:g}, location the mode, scale Sigma)",
            "mixture": f"independence defensive mixture {1 - MIXTURE_WEIGHT:g} N(mode, Sigma) "
                       f"+ {MIXTURE_WEIGHT:g} N(mode, {MIXTURE_INFLATION:g}^2 Sigma)",
            "walk": f"RandomWalk.from_laplace, step 2.38/sqrt({d}) in units of the Laplace "
                    "covariance"}[kind]


def _why(tried, kind) -> str:
    """The thresholds each proposal looked at met or missed, with k-hat's noise."""
    out = []
    for looked, k, spread, n, dk, ok in tried:
        limit = K_GOOD if looked == "independence" else K_OK
        name = {"independence": "Gaussian", "t": "t", "mixture": "mixture"}[looked]
        out.append(f"{name}: Pareto-k {k:.2f} +- {dk:.2f} from {n} draws, sd of the log "
                   f"weights {spread:.2g}: "
                   + (f"k + {NOISE_Z:g} se <= {limit:g} or sd <= {LOGW_SD_OK:g}" if ok else
                      f"k + {NOISE_Z:g} se > {limit:g} and sd > {LOGW_SD_OK:g}"))
    if len(tried) > 1 and kind == "independence":
        out.append(f"the Gaussian kept (PSIS: k <= {K_OK:g} is usable): the t would cost "
                   f"more than 1/{T_PRICE:g} in ESS per step")
    elif len(tried) > 2:
        out.append("the t does not fit: a tail heavier than the t's, so the mixture")
    elif kind == "walk":
        out.append("no independence proposal fits")
    return ("; ".join(out) + f"; PSIS: k <= {K_GOOD:g} good, <= {K_OK:g} ok, above bad; "
            f"more draws while k-hat is within {NOISE_Z:g} se of a threshold, at most "
            f"{MAX_DRAWS}")


# -- 3. trial pairs --------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialPairs:
    """Pairs of the chosen proposal, summarised.

    Attributes
    ----------
    thetas, news : ndarray of shape (n, d)
    log_const : ndarray of shape (n,)
        Log prior ratio plus log proposal ratio of each pair.
    trial : design.TrialChain
    lines : tuple of str
    kurtosis_upper : ndarray or None
        Each pair's excess kurtosis raised by 2 standard errors where ``trial`` was
        estimated from a row sample (:attr:`design.SampledTrial.kurtosis_upper`); None: use
        ``trial.kurtosis``. Fit's heavy-tails gate reads it (a sample of heavy-tailed l_i
        under-estimates their kurtosis in most samples).
    """

    thetas: np.ndarray
    news: np.ndarray
    log_const: np.ndarray
    trial: object
    lines: tuple
    kurtosis_upper: object = None


def trial_pairs(proxy: Proxy, choice: ProposalChoice, draws: LaplaceDraws, rng=None, *,
                executor=None):
    """Step 3: the trial pairs of the chosen proposal.

    For an independence-type proposal they are its draws' pairs (no new pass);
    for the walk theta ~ N(mode, Sigma) and theta' from the proposal, one more pass.
    """
    rng = as_generator(rng)
    cv, n = proxy.cv, draws.trial.n_pairs
    q = choice.proposal
    if choice.kind != "walk":
        got = choice.draws if choice.draws is not None else draws
        n = got.trial.n_pairs              # more draws may follow (the ladder's): not pairs
        thetas, news, trial = got.thetas[:n], got.thetas[1:n + 1], got.trial
        sampled, upper = got.trial_sampled, got.trial_kurtosis_upper
        where = ("the Laplace draws chained (theta, theta' both ~ N(mode, Sigma))"
                 if got.kind == "independence" else
                 f"the {got.kind} proposal's draws chained")
    else:
        factor = np.linalg.cholesky(proxy.covariance)
        thetas = proxy.mode + rng.standard_normal((n, cv.dim)) @ factor.T
        moves = [q.propose(rng, None, None, t, None)[:2] for t in thetas]
        news = np.array([m[0] for m in moves])
        got = pairs_pass(proxy, thetas, news, [m[1] for m in moves], rng, executor=executor)
        trial, sampled = got.trial, got.sampled
        upper = got.kurtosis_upper if sampled else None
        where = (f"theta ~ N(mode, Sigma), theta' from the {choice.kind} proposal"
                 + _sample_note(float(got.log_ratio_se.max()), got.rows_read, cv.N,
                                _n_heavy(proxy)))
    how = "estimated" if sampled else "exact"
    line = (f"3. trial pairs: {n} pairs, {where}; exact MH's acceptance ({how}) "
            f"{trial.accept_prob.mean():.2f}; residual sd per row: median "
            f"{np.median(trial.sigma):.3g}")
    return TrialPairs(thetas, news, -trial.N * trial.c0, trial, (line,), upper)


# -- 4. design and 5. verdict ----------------------------------------------------------------

def design_test(pairs: TrialPairs, tolerance, test="austere", m_grid=None):
    """Step 4: :func:`design.optimize` on the trial pairs; the confidence test where no design
    of ``test`` meets the tolerance."""
    import design

    search = dict(search="prune") if test == "austere" else {}   # the same design, cheaper
    try:
        return design.optimize(pairs.trial, tolerance, test=test, m_grid=m_grid, **search)
    except design.InfeasibleDesignError:
        if test == "confidence":
            raise
        return design.optimize(pairs.trial, tolerance, test="confidence")


def make_test(plan):
    """The ready test of a design (the test family its ``test`` field names)."""
    from samplers import AustereTest, BarkerTest, ConfidenceTest

    families = {"austere": AustereTest, "barker": BarkerTest, "confidence": ConfidenceTest}
    return families[plan.test].from_design(plan)


@dataclass(frozen=True)
class Verdict:
    """The design that runs and its CLT verdict.

    Attributes
    ----------
    plan : the design (possibly redone).
    clt : validation.CLTCheck or None (the confidence test needs none).
    passed : bool
        Whether the design keeps its promise (True for the confidence test).
    redesign : {"none", "edgeworth", "simulation", "larger batch", "confidence", "failed"}
    lines : tuple of str
    """

    plan: object
    clt: object
    passed: bool
    redesign: str
    lines: tuple


def verdict(proxy: Proxy, pairs: TrialPairs, plan, tolerance, *, clt_tolerance=0.05,
            on_clt_failure="redesign", max_redesigns=MAX_REDESIGNS, fallback=True,
            rng=None, executor=None) -> Verdict:
    """Step 5: is the design sound on the real l_i? Redesign on failure.

    *Austere*: the real sequential test simulated on the real l_i of ``N_CHECK`` trial pairs
    (:func:`validation.clt_check` with ``design=``), its mean |Delta| against ``tolerance``;
    on failure :func:`_redesign_austere`. *Barker*: the KS distance of the minibatch t
    statistic at b = m against ``clt_tolerance``; on failure the smallest passing batch
    size, or the confidence test. *Confidence*: no CLT needed. ``max_redesigns`` bounds
    the simulation redesigns of Austere; with ``fallback=False`` a design that still fails is
    reported unsound instead of being replaced by the confidence test (the route chooser
    then moves on to the next candidate).
    """
    rng = as_generator(rng)
    executor = on_blocks(proxy.cv, executor)
    if plan.test == "austere":
        return _austere_verdict(proxy.cv, pairs, plan, tolerance, clt_tolerance,
                                on_clt_failure, rng, max_redesigns, fallback, executor)
    if plan.test == "barker":
        return _barker_verdict(proxy.cv, pairs, plan, tolerance, clt_tolerance,
                               on_clt_failure, rng, executor)
    return Verdict(plan, None, True, "none", (
        "5. CLT check: not needed (the confidence test's error bound holds without the CLT, "
        "Bardenet et al. 2014, Lemma 3.1)",))


def _check_pairs(pairs):
    return (pairs.thetas[:N_CHECK], pairs.news[:N_CHECK]), pairs.log_const[:N_CHECK]


def _check_trial(pairs):
    """The trial chain's summary of the check pairs (its first ``N_CHECK``), which
    ``clt_check`` reads instead of a pass of its own over the data; None if the trial chain
    carries no shape of the l_i (then the check makes that pass)."""
    import design

    t = pairs.trial
    k = min(N_CHECK, len(pairs.thetas))
    if any(getattr(t, f, None) is None for f in ("skewness", "kurtosis", "abs_z1", "abs_z3")):
        return None
    shape = {f: getattr(t, f)[:k] for f in ("skewness", "kurtosis", "abs_z1", "abs_z3",
                                            "max_abs", "range_bound")
             if getattr(t, f, None) is not None}
    return design.TrialChain(mu=t.mu[:k], sigma=t.sigma[:k], c0=t.c0[:k], N=t.N, **shape)


def _austere_verdict(cv, pairs, plan, tolerance, clt_tolerance, on_clt_failure, rng,
                     max_redesigns=MAX_REDESIGNS, fallback=True, executor=None):
    import design
    import validation

    check, const = _check_pairs(pairs)
    trial = _check_trial(pairs)
    clt = validation.clt_check(cv, check, design=plan, tolerance=clt_tolerance, n_sim=N_SIM,
                               search=False, n_paths=N_PATHS, log_const=const,
                               rng=rng.spawn(1)[0], progress=False, executor=executor,
                               trial=trial, **VERDICT_OPTIONS)
    line = "5. CLT check in the currency of the design: " + _austere_sentence(clt)
    if clt.passed or on_clt_failure == "warn":
        extra = "" if clt.passed else "; the design is kept (on_clt_failure='warn')"
        return Verdict(plan, clt, bool(clt.passed), "none", (line + extra,))
    plan, clt, how, lines = _redesign_austere(design, validation, cv, check, pairs.trial,
                                              plan, clt, tolerance, clt_tolerance, rng,
                                              log_const=const, max_redesigns=max_redesigns,
                                              fallback=fallback, executor=executor,
                                              check_trial=trial)
    return Verdict(plan, clt, how != "failed", how, (line, *lines))


def _barker_verdict(cv, pairs, plan, tolerance, clt_tolerance, on_clt_failure, rng,
                    executor=None):
    import validation

    check, _ = _check_pairs(pairs)
    trial = _check_trial(pairs)
    N, m = cv.N, plan.m
    clt = validation.clt_check(cv, check, batch_size=min(m, N - 1), tolerance=clt_tolerance,
                               search=False, rng=rng.spawn(1)[0], progress=False,
                               executor=executor, trial=trial)
    line = (f"5. CLT check at b = {m}: largest KS distance {np.max(clt.ks_distance):.3f} "
            f"(tolerance {clt_tolerance:g}): ")
    if clt.passed:
        return Verdict(plan, clt, True, "none", (line + "passed",))
    if on_clt_failure == "warn":
        return Verdict(plan, clt, False, "none", (
            line + "FAILED; the design is kept (on_clt_failure='warn'): its error prediction "
            "assumes a normal minibatch mean",))
    clt = validation.clt_check(cv, check, batch_size=min(m, N - 1), tolerance=clt_tolerance,
                               search=True, rng=rng.spawn(1)[0], progress=False,
                               executor=executor, trial=trial)
    b = clt.min_batch_size
    if b is not None:
        grid = sorted({b, 2 * b, 4 * b, 8 * b} & set(range(b, N // 2 + 1)))
        plan = design_test(pairs, tolerance, plan.test, m_grid=grid)
        return Verdict(plan, clt, True, "larger batch", (
            line + f"FAILED; it passes from b = {b}, so the design was redone with m >= {b}: "
            f"{settings(plan)}, predicted {plan.data_fraction * N:,.1f} rows per step",))
    plan = design_test(pairs, tolerance, "confidence")
    return Verdict(plan, clt, True, "confidence", (
        line + "FAILED at every batch size up to N/2; the confidence test (concentration "
        f"bounds, no CLT) was designed instead: {settings(plan)}",))


def _austere_sentence(clt) -> str:
    """One sentence: the simulated verdict of an Austere design, KS beside it."""
    a = clt.acceptance
    corrected = ("" if not math.isfinite(a.mean_abs_edgeworth) else
                 f", Edgeworth-corrected {a.mean_abs_edgeworth:.3g}")
    return (f"m = {a.m}, epsilon = {a.epsilon:g}: the real test simulated on the real l_i of "
            f"{a.n_pairs} trial pairs ({a.n_paths:,} row orders each) has mean |error| "
            f"{a.mean_abs_simulated:.3g} ± {a.mean_abs_simulated_se:.2g} (predicted "
            f"{a.mean_abs_gaussian:.3g}{corrected}) against the tolerance "
            f"{a.tolerance:g}: {'passed' if clt.passed else 'FAILED'} (supporting detail: "
            f"largest KS distance {np.max(clt.ks_distance):.3f} at b = {clt.batch_size})")


def _redesign_austere(design, validation, cv, pairs, trial, plan, clt, tolerance,
                      clt_tolerance, rng, log_const=None, max_redesigns=MAX_REDESIGNS,
                      fallback=True, executor=None, check_trial=None):
    """Redo an Austere design whose simulated verdict failed, on the real l_i.

    Where the Edgeworth expansion holds for every trial pair at every m of the grid, the
    corrected programme designs (``law="edgeworth"``) and the simulation checks it; else (or
    if that check fails) the Gaussian programme's target is scaled down by
    tolerance / simulated error and the least-data cell within it is simulated, at most
    ``max_redesigns`` times; then the confidence test (``fallback``) or ``how = "failed"``.
    Returns (plan, clt, how, lines of the explanation).
    """
    lines = []

    def check(candidate):
        return validation.clt_check(cv, pairs, design=candidate, tolerance=clt_tolerance,
                                    n_sim=N_SIM, search=False, n_paths=N_PATHS,
                                    log_const=log_const, rng=rng.spawn(1)[0], progress=False,
                                    executor=executor, trial=check_trial, **VERDICT_OPTIONS)

    reliable = trial.skewness is not None and all(
        design.edgeworth_reliable(trial.skewness, trial.kurtosis, int(m)).all()
        for m in plan.m_grid)
    if reliable:
        try:
            with caught_warnings("ignore"):           # reliable everywhere: nothing to say
                corrected = design.optimize(trial, tolerance, law="edgeworth")
        except design.InfeasibleDesignError:
            corrected = None
        if corrected is not None:
            clt = check(corrected)
            lines.append("   the Edgeworth expansion holds on every trial pair, so the design "
                         "was redone with the corrected programme (design.optimize(law="
                         "'edgeworth')): " + _austere_sentence(clt))
            if clt.passed:
                return corrected, clt, "edgeworth", lines
    elif trial.skewness is not None:
        worst = int(np.argmax(np.abs(trial.skewness)))
        lines.append(f"   the Edgeworth expansion is outside its validity here (trial pair "
                     f"{worst}: skewness {trial.skewness[worst]:.3g}, excess kurtosis "
                     f"{trial.kurtosis[worst]:.3g}), so the design is redone by simulating the "
                     "real test")
    found = _simulation_redesign(design, trial, plan, clt, tolerance, check, lines,
                                 max_redesigns)
    if found is not None:
        return (*found, "simulation", lines)
    if not fallback:
        lines.append(f"   no Austere design passes the simulated verdict within "
                     f"{max_redesigns} redesign(s): the route goes to the next candidate")
        return plan, clt, "failed", lines
    plan = _confidence(design, trial, tolerance)
    lines.append("   no Austere design on the grid passes the simulated verdict; the "
                 "confidence test (concentration bounds, no CLT) was designed instead: "
                 f"{settings(plan)}")
    return plan, clt, "confidence", lines


def _confidence(design, trial, tolerance):
    return design.optimize(trial, tolerance, test="confidence")


def _simulation_redesign(design, trial, plan, clt, tolerance, check, lines,
                         max_redesigns=MAX_REDESIGNS):
    """Scale the Gaussian target down until a simulated cell passes; (plan, clt) or None."""
    target = tolerance
    tried = {(plan.m, plan.epsilon)}
    simulated = clt.acceptance.mean_abs_simulated
    if hasattr(plan, "complete_screen") and (plan.N, plan.n_pairs) == (trial.N, trial.n_pairs):
        plan = plan.complete_screen(trial)     # the rows the pruned search did not screen
    errors, datas = plan.error_grid, plan.data_grid
    if getattr(plan, "screen_error_grid", None) is not None:   # cells the screen ruled out
        done = ~np.isnan(errors)
        errors = np.where(done, errors, plan.screen_error_grid)
        datas = np.where(done, datas, plan.screen_data_grid)
    for _ in range(max_redesigns):
        target *= min(0.9, tolerance / max(simulated, 1e-12))
        cells = [(datas[i, k], errors[i, k], i, k)
                 for i in range(len(plan.m_grid)) for k in range(len(plan.epsilon_grid))
                 if errors[i, k] <= target
                 and (int(plan.m_grid[i]), float(plan.epsilon_grid[k])) not in tried]
        if not cells:
            return None
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
                     + _austere_sentence(clt))
        if clt.passed:
            return candidate, clt
    return None


def settings(plan) -> str:
    """The design's settings in words."""
    if plan.test == "austere":
        return f"m = {plan.m}, epsilon = {plan.epsilon:g}"
    if plan.test == "barker":
        return f"m = {plan.m}, Novak threshold delta = {plan.delta}"
    return f"first batch {plan.batch_size}, gamma = {plan.gamma:g}, delta = {plan.delta:g}"


# -- 6. chains -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChainsResult:
    """The chains and how they ran.

    Attributes
    ----------
    chains : samplers.Chains
    interrupted : bool
        Ctrl-C stopped them (the samples so far are kept, all chains cut to one length).
    ess_bulk : float
        Min bulk ESS over the parameters (NaN with one chain of under 4 draws).
    rhat : float
        Max rank-normalised R-hat (NaN with one chain).
    seconds : float
        Wall time of the sampling.
    rounds : int
        Sampling rounds (more than 1 when a target ESS extended the chains).
    """

    chains: object
    interrupted: bool
    ess_bulk: float
    rhat: float
    seconds: float
    rounds: int


def run_chains(model, test, proposal, start, draws, *, chains=2, rng=None, ess=None,
               max_seconds=600.0, parallel=None, progress=None, executor=None) -> ChainsResult:
    """Step 6: ``chains`` chains of ``draws`` steps from ``start``, in parallel processes.

    With ``ess`` the chains are extended, from where they stopped, until the min bulk ESS
    reaches it or ``max_seconds`` of sampling have passed; equal seeds give equal chains
    unless the time cap binds. ``parallel`` None runs the chains in a process pool when
    there is more than one and more than 0.2 s of sampling is expected. Ctrl-C stops at once
    with the draws so far (:class:`samplers.ChainInterrupted` is warned; all chains cut to
    the shortest; run one after the other, the chains not yet started are left out).
    With ``executor`` (a ``dask.distributed.Client``, its ``get_executor()`` or any
    ``concurrent.futures.Executor``) the chains run there, one task each (the same chains:
    each has its own stream), whatever ``parallel``.
    """
    from samplers import ChainInterrupted

    rng = as_generator(rng)
    streams = rng.spawn(chains)
    theta0 = np.broadcast_to(np.asarray(start, dtype=float), (chains, len(start))).copy()
    # the chains run here (not forked, not on a cluster): the monitor's table meanwhile
    in_process = executor is None and not (chains > 1 and (parallel is None or parallel))
    table = _monitor_table(model, test) if in_process else None
    parts, t0, rounds, goal = [], time.perf_counter(), 0, draws
    ranks = None, None          # the last round's rank-normalised draws, and of which chains
    while True:
        rounds += 1
        seen = []
        try:
            with caught_warnings("always", ChainInterrupted, record=True) as seen:
                runs, stopped = _round(model, test, proposal, theta0, goal, streams,
                                       parallel, progress, executor)
        except KeyboardInterrupt:    # before any step of this round: keep the earlier ones
            if not parts:
                raise
            joined, interrupted = _join(parts), True
            break
        finally:
            for w in seen:     # the chains' other warnings reach the caller (this one's below)
                if not issubclass(w.category, ChainInterrupted):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        parts.append(runs)
        joined = _join(parts)
        interrupted = stopped or any(issubclass(w.category, ChainInterrupted) for w in seen)
        spent = time.perf_counter() - t0
        if interrupted or ess is None or spent >= max_seconds:
            break
        ranks = _split_ranks(joined), joined     # R-hat only for the chains returned
        found = _ess_rhat(joined, rhat=False, ranks=ranks[0])[0]
        if found >= ess:
            break
        streams = [s.spawn(1)[0] for s in streams]
        theta0 = np.array([c.samples[-1] for c in runs])
        n = joined[0].samples.shape[0]
        found = 0.0 if math.isnan(found) else found      # fewer than 4 draws, a NaN
        goal = int(min(max(n * (ess / max(found, 1.0) - 1.0) * 1.2, 100),
                       n * max(1.0, (max_seconds - spent) / spent)))
    if interrupted:
        warnings.warn(f"interrupted: returning {len(joined)} chain(s) of "
                      f"{joined[0].samples.shape[0]} draws", ChainInterrupted, stacklevel=3)
    else:
        joined, interrupted = _checked(joined, table)
    same = ranks[1] is not None and len(ranks[1]) == len(joined) and all(
        a is b for a, b in zip(ranks[1], joined))    # the bias check returns the chains
    found, rhat = _ess_rhat(joined, ranks=ranks[0] if same else None)
    from samplers import Chains
    return ChainsResult(Chains(tuple(joined)), interrupted, found, rhat,
                        time.perf_counter() - t0, rounds)


def _round(model, test, proposal, theta0, n, streams, parallel, progress, executor=None):
    """One round: each chain ``n`` steps on its stream; (chains, interrupted).

    A model whose rows sit in a store draws its rows by ``row_draws="keyed"`` (each
    decision's rows known ahead, so the chain fetches exactly those, in sorted reads: about
    3-5x the in-memory step at 10^7 rows, against 30-70x for the shared scheme); a model in
    memory keeps the shared scheme, so its chains stay those of earlier versions. Equal seeds
    give identical chains either way."""
    from samplers import sample

    k = len(streams)
    rows = "keyed" if _on_store(model) else "shared"
    if executor is not None:
        from samplers import sample_chains

        if callable(getattr(executor, "get_executor", None)):   # a Dask client: its executor,
            executor = executor.get_executor(pure=False)        # without hashing the model
        got = sample_chains(model, test, proposal, theta0, n, n_chains=k,
                            rng=_Streams(streams), executor=executor, progress=progress,
                            row_draws=rows, bias_check=False)
        runs = list(got)
        return runs, any(c.samples.shape[0] < n for c in runs)
    if parallel is None:
        parallel = k > 1
    if parallel and k > 1:
        from samplers import sample_chains

        # compile in this process first (a throwaway 2-step chain on its own stream): the
        # forked workers inherit the compiled kernels instead of each compiling them again
        sample(model, test, proposal, theta0[0], 2, rng=np.random.default_rng(0),
               progress=False, row_draws=rows, bias_check=False)
        # sample_chains' own pool: a Ctrl-C reaches its workers from here, also when it
        # came to this process alone (a notebook's interrupt, kill -INT)
        got = sample_chains(model, test, proposal, theta0, n, n_chains=k,
                            rng=_Streams(streams), progress=progress, row_draws=rows,
                            bias_check=False)
        runs = list(got)
        return runs, any(c.samples.shape[0] < n for c in runs)
    from samplers import ChainInterrupted

    runs = []
    for j, s in enumerate(streams):
        seen = []
        # a Ctrl-C in a chain's last step, or while its records are assembled, leaves it
        # whole with a ChainInterrupted warning: that, not its length, says to stop here
        try:
            with caught_warnings("always", ChainInterrupted, record=True) as seen:
                runs.append(sample(model, test, proposal, theta0[j], n, rng=s,
                                   progress=progress, row_draws=rows, bias_check=False))
        except KeyboardInterrupt:                # before this chain's first step
            if not runs:
                raise
            return runs, True
        finally:
            for w in seen:                       # the caller's record sees them too
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        stopped = any(issubclass(w.category, ChainInterrupted) for w in seen)  # not others
        if stopped or runs[-1].samples.shape[0] < n:   # Ctrl-C: stop, keep what was drawn
            return _cut(runs), True
    return runs, False


def _checked(chains, table):
    """``(chains, interrupted)``: the chains after the bias check of :func:`samplers.sample`,
    run once on the joined chains (the rounds skip it); a Ctrl-C while the table is computed
    ends the check, as in :func:`samplers.sample`, and is reported (``fit`` then stops)."""
    from samplers import ChainInterrupted

    if table is not None:
        try:
            table.join()
        except KeyboardInterrupt:
            warnings.warn("interrupted during the bias check after the chains: returning "
                          "them unchecked", ChainInterrupted, stacklevel=4)
            return chains, True
    return [c.check_bias() for c in chains], False


#: Monitor-table threads started ahead of the chains (:func:`start_monitor_table`), by
#: (N, m, epsilon) of their Austere test; :func:`run_chains` takes its own from here.
_TABLE_THREADS: dict = {}
#: Threads dropped from ``_TABLE_THREADS`` (:func:`drop_monitor_table`) while still running:
#: :func:`join_monitor_tables` still waits for them before a fork; each leaves the set as
#: it finishes, so nothing finished is kept.
_DROPPED: set = set()
_TABLE_LOCK = threading.Lock()


def start_monitor_table(model, test):
    """Start computing the bias monitor's error table of an Austere ``test`` on ``model``
    ahead of :func:`run_chains`, which then waits for this thread instead of starting its
    own. ``fit`` calls it as the verdict starts: the table (about a CPU-second at a
    thousand drifts) then runs on the other core beside the verdict instead of after the
    chains. The table is a pure function of (N, m, epsilon), cached per process, so the
    chains' bias check is the same whenever it is computed. Returns the thread, or None
    for other tests."""
    key = _table_key(model, test)
    if key is None:
        return None
    # the modules the thread runs are imported here, on the caller's thread: the thread
    # then takes no import lock while the caller imports (the verdict's lazy imports)
    import numpy.polynomial  # noqa: F401
    import scipy.optimize  # noqa: F401

    from design import decision_errors  # noqa: F401
    for k in [k for k, t in _TABLE_THREADS.items() if not t.is_alive()]:
        if k != key:
            del _TABLE_THREADS[k]
    if key not in _TABLE_THREADS:
        _TABLE_THREADS[key] = _monitor_thread(model, test)
    return _TABLE_THREADS[key]


def drop_monitor_table(model, test):
    """Forget the table :func:`start_monitor_table` started for ``test`` on ``model``, if
    the chains did not take it: ``fit`` calls it when its chains are done (or it stopped),
    so a table started for a design whose verdict failed, or that was redesigned, is not
    kept. A thread still running stays known to :func:`join_monitor_tables` until it
    finishes."""
    key = _table_key(model, test) if test is not None else None
    if key is None:
        return
    with _TABLE_LOCK:
        thread = _TABLE_THREADS.pop(key, None)
        if thread is not None and not thread.finished:
            _DROPPED.add(thread)


def join_monitor_tables():
    """Wait for the tables :func:`start_monitor_table` started: before the chains fork
    into processes, no thread of ours should be running (a fork copies only the caller's
    thread, and a lock another thread holds stays held in the child)."""
    with _TABLE_LOCK:
        threads = [*_TABLE_THREADS.values(), *_DROPPED]
    for thread in threads:
        thread.join()


def _table_key(model, test):
    from samplers import AustereTest

    if not isinstance(test, AustereTest):
        return None
    return int(model.N), int(test.m), float(test.epsilon)


def _monitor_table(model, test):
    """A thread computing the bias monitor's error table of an Austere test (the dynamic
    programme at about a thousand drifts, :func:`design.decision_errors`; cached per design)
    while the chains run: the programme releases the GIL, so it runs on another core, and the
    check after the chains finds it ready. The thread :func:`start_monitor_table` started for
    the same table, if any; None for other tests."""
    key = _table_key(model, test)
    if key is None:
        return None
    early = _TABLE_THREADS.pop(key, None)
    return early if early is not None else _monitor_thread(model, test)


def _monitor_thread(model, test):
    empty = {"mean": np.zeros(0), "sd": np.zeros(0), "n_used": np.zeros(0),
             "log_const": np.zeros(0)}

    def warm():
        try:
            test.decision_errors(empty, int(model.N))   # zero decisions: only the table
        except Exception:   # noqa: BLE001 -- the check after the chains reports it
            pass
        finally:
            with _TABLE_LOCK:
                thread.finished = True
                _DROPPED.discard(thread)

    thread = threading.Thread(target=warm, name="austerity-monitor-table", daemon=True)
    thread.finished = False
    thread.start()
    return thread


def _on_store(model) -> bool:
    """Whether any of the model's rows (or those of a model it wraps) sit in a store."""
    sources = getattr(model, "data_sources", None)
    return bool(sources()) if callable(sources) else False


class _Streams(np.random.Generator):
    """A Generator whose ``spawn(k)`` hands out given streams (so that the parallel and the
    sequential runs use the same stream per chain)."""

    def __init__(self, streams):
        super().__init__(np.random.PCG64(0))
        self._given = list(streams)

    def spawn(self, n_children):
        return self._given[:n_children]


def _cut(runs):
    n = min(c.samples.shape[0] for c in runs)
    return [c if c.samples.shape[0] == n else dataclasses.replace(
        c, samples=c.samples[:n], stats={k: v[:n] for k, v in c.stats.items()})
        for c in runs]                       # kernel, store_reads kept


def _join(parts):
    """Chains of several rounds joined end to end, cut to a common length."""
    from samplers import Chain

    if len(parts) == 1:
        return _cut(parts[0])
    out = []
    for pieces in zip(*parts):
        first = pieces[0]
        out.append(Chain(np.concatenate([p.samples for p in pieces]),
                         {k: np.concatenate([p.stats[k] for p in pieces]) for k in first.stats},
                         first.N, sum(p.wall_time for p in pieces), first.test, first.proposal,
                         first.theta0, first.kernel, _total_reads(pieces)))
    return _cut(out)


def _total_reads(pieces):
    """What the rounds of one chain read from a store, added field by field (None for rows
    in memory)."""
    reads = [p.store_reads for p in pieces]
    if any(r is None for r in reads) or not dataclasses.is_dataclass(reads[0]):
        return None
    return dataclasses.replace(reads[0], **{f.name: sum(getattr(r, f.name) for r in reads)
                                            for f in dataclasses.fields(reads[0])})


def _ess_rhat(runs, rhat=True, ranks=None):
    """(min bulk ESS, max R-hat) of chains; NaN where undefined (R-hat also when not asked
    for, ``rhat=False``: the rounds that only decide whether to go on).

    ArviZ's estimators (:func:`bulk_ess`, :func:`rank_rhat`) computed with NumPy, so the
    chains' rounds do not import ArviZ (about a second and a half of a first call): only the
    InferenceData that ``fit`` returns needs it. ``ranks``, :func:`_split_ranks` of the same
    chains when already at hand: each parameter's split draws are rank-normalised once, for
    its bulk ESS and its bulk R-hat."""
    ranks = _split_ranks(runs) if ranks is None else ranks
    if ranks is None:
        return float("nan"), float("nan")
    per, n_chains = ranks
    both = rhat and n_chains > 1
    esses, rhats = [], []
    with np.errstate(invalid="ignore", divide="ignore"):   # a stuck parameter: NaN, quietly
        for got in per:
            if got is None:                                 # a NaN draw
                esses.append(float("nan"))
                rhats.append(float("nan"))
                continue
            s, z = got
            esses.append(_ess_of(z))
            if both:
                rhats.append(_rank_rhat_of(s, z))
    # np.min / np.max: a NaN anywhere gives NaN (Python's min and max only when it is first)
    return float(np.min(esses)), (float(np.max(rhats)) if both else float("nan"))


def _split_ranks(runs):
    """``([(split draws, their rank-normalised values) or None for a parameter with a NaN
    draw, ...], chains)`` of chains, None with fewer than 4 draws."""
    x = np.stack([c.samples for c in runs])
    if x.shape[1] < 4:
        return None
    per = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(x.shape[2]):
            a = x[:, :, j]
            if np.isnan(a).any():
                per.append(None)
                continue
            s = _split(a)
            per.append((s, _z_scale(s)))
    return per, x.shape[0]


def _fast_fft_len(n: int) -> int:
    """The least 5-smooth number (2^a 3^b 5^c) >= n: the FFT length ArviZ's autocovariance
    pads to (``scipy.fftpack.next_fast_len``), so the sums round as ArviZ's do."""
    best = 1 << max(int(n - 1).bit_length(), 0)
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _z_scale(a):
    """Rank-normalised values (Vehtari et al. 2021): average ranks over the whole array,
    Blom's offset 3/8, then the standard normal quantile.

    The same values as ArviZ's ``scipy.stats.rankdata(a, method="average",
    nan_policy="omit")`` and ``scipy.stats.norm.ppf`` (``scipy.special.ndtri``), bit for bit,
    without importing ``scipy.stats`` (a third of a second of a first ``fit``)."""
    from scipy import special

    r = _average_ranks(a)
    return special.ndtri((r - 3 / 8) / (r.size - 2 * (3 / 8) + 1)).reshape(a.shape)


def _average_ranks(a):
    """Ranks 1..n of the flattened ``a``, ties sharing the average of their ranks, NaN
    left out of the ranking and given rank NaN (``scipy.stats.rankdata(a,
    method="average", nan_policy="omit")``)."""
    x = np.ravel(a)
    ranks = np.full(x.size, np.nan)
    finite = ~np.isnan(x)
    v = x[finite]
    order = np.argsort(v, kind="stable")
    s = v[order]
    start = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])   # first position of each tie
    stop = np.r_[start[1:], s.size]
    sorted_ranks = np.repeat((start + 1 + stop) / 2, stop - start)
    within = np.empty(s.size)
    within[order] = sorted_ranks
    ranks[finite] = within
    return ranks


def _split(a):
    """Each chain's first and last halves as separate chains (the middle draw dropped when
    the count is odd)."""
    half = a.shape[1] // 2
    return np.vstack((a[:, :half], a[:, -half:]))


def _ess_of(a):
    """Effective sample size of the (chains, draws) array ``a``: the autocorrelations'
    sum by Geyer's initial positive, then monotone, sequence over chains (Vehtari et al.
    2021, eq. 10), as ArviZ 0.x's ``_ess`` computes it (same operations, same order)."""
    a = np.asarray(a, dtype=float)
    if np.isnan(a).any():
        return float("nan")
    if (np.max(a) - np.min(a)) < np.finfo(float).resolution:
        return float(a.size)
    n_chain, n_draw = a.shape
    m = _fast_fft_len(2 * n_draw)
    centred = a - a.mean(1, keepdims=True)
    f = np.fft.rfft(centred, n=m, axis=1)
    f *= np.conjugate(f)
    acov = np.fft.irfft(f, n=m, axis=1)[:, :n_draw]
    acov /= n_draw
    chain_mean = a.mean(axis=1)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(chain_mean, axis=None, ddof=1)
    rho = np.zeros(n_draw)
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[1] = rho_odd
    t = 1
    while t < (n_draw - 3) and (rho_even + rho_odd) > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if (rho_even + rho_odd) >= 0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:
        if (rho[t + 1] + rho[t + 2]) > (rho[t - 1] + rho[t]):
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0
            rho[t + 2] = rho[t + 1]
        t += 2
    n = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[:max_t + 1]) + np.sum(rho[max_t + 1:max_t + 2])
    tau = max(tau, 1 / np.log10(n))
    return float("nan") if np.isnan(rho).any() else float(n / tau)


def bulk_ess(draws) -> float:
    """Bulk effective sample size of one parameter's draws, shape (chains, draws): the
    rank-normalised split-chain ESS of Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021),
    equal to ``arviz.ess(draws, method="bulk")`` (ArviZ 0.x, NumPy path) to rounding.

    NaN with fewer than 4 draws per chain or a NaN draw.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(2, 1000))
    >>> 1500 < bulk_ess(x) < 2500
    True
    """
    a = np.atleast_2d(np.asarray(draws, dtype=float))
    if a.ndim != 2:
        raise ValueError(f"draws must have shape (chains, draws), got shape {a.shape}")
    if a.shape[1] < 4 or np.isnan(a).any():
        return float("nan")
    return _ess_of(_z_scale(_split(a)))


def _rhat_of(a):
    """Split R-hat of already split (chains, draws) values ``a`` (Gelman-Rubin)."""
    n = a.shape[1]
    chain_var = np.var(a, axis=1, ddof=1)
    between = n * np.var(np.mean(a, axis=1), axis=None, ddof=1)
    within = np.mean(chain_var)
    return float(np.sqrt((between / within + n - 1) / n))


def rank_rhat(draws) -> float:
    """Rank-normalised split R-hat of one parameter's draws, shape (chains, draws): the
    larger of the bulk and the folded (tail) R-hat (Vehtari et al. 2021), equal to
    ``arviz.rhat(draws)`` (ArviZ 0.x, NumPy path) to rounding.

    NaN with fewer than 2 chains, fewer than 4 draws per chain or a NaN draw.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(2, 1000))
    >>> abs(rank_rhat(x) - 1.0) < 0.01
    True
    """
    a = np.atleast_2d(np.asarray(draws, dtype=float))
    if a.ndim != 2:
        raise ValueError(f"draws must have shape (chains, draws), got shape {a.shape}")
    if a.shape[0] < 2 or a.shape[1] < 4 or np.isnan(a).any():
        return float("nan")
    s = _split(a)
    return _rank_rhat_of(s, _z_scale(s))


def _rank_rhat_of(s, z):
    """Rank-normalised R-hat of split draws ``s`` whose rank-normalised values are ``z``."""
    bulk = _rhat_of(z)
    tail = _rhat_of(_z_scale(abs(s - np.median(s))))
    return max(bulk, tail)


# -- 7. after the run ------------------------------------------------------------------------

def after_run_check(proxy: Proxy, plan, chain, proposal, rng=None, *, executor=None):
    """Step 7: the design evaluated at ``N_CHECK`` (state, proposal) pairs of the chain itself.

    Returns ``(mean |error|, rows per step)`` predicted there (:func:`design.evaluate`). The
    pairs' statistics come from :func:`pairs_pass`: exact, or, where ``proxy.exact_rows``
    is known, estimated from a row sample, each pair's log ratio within 0.001 nats (1 se;
    :meth:`design.TrialChain.from_row_sample`'s ``se_tolerance`` default) and the sd and
    shape of its l_i within a relative error of order 1/sqrt(rows sampled). The predicted
    error is then an estimate too: it moves with all of these, not only with the log
    ratio, so its error is not bounded by 0.001.
    """
    import design

    rng = as_generator(rng)
    draws = chain.samples.shape[0]
    k = min(N_CHECK, draws)
    own = chain.samples[rng.choice(draws, size=k, replace=False)]
    moves = [proposal.propose(rng, None, None, t, None)[:2] for t in own]
    trial = pairs_pass(proxy, own, np.array([m[0] for m in moves]), [m[1] for m in moves],
                       rng, executor=executor).trial
    err, frac = design.evaluate(plan, trial)
    return float(np.mean(np.abs(err))), float(np.mean(frac) * proxy.cv.N)


def _sums_executor(model, executor):
    """``executor`` for the control variates' construction passes when ``model``'s sums run
    by row blocks on other processes (:meth:`samplers.ControlVariates.sums_on_blocks`), else
    None: they run here, as for a user's model or a compiled row model."""
    from samplers import ControlVariates

    inner = model.model if isinstance(model, ControlVariates) else model
    if executor is None or not ControlVariates.sums_on_blocks(inner):
        return None
    return executor


def on_blocks(model, executor):
    """``executor`` if ``model`` can be rebuilt by row blocks on its workers
    (``block_recipe``: the built-in models, their control variates and
    :class:`samplers.ExactRows` around either), else None: the pass then runs here."""
    if executor is None:
        return None
    try:
        model.block_recipe(0, min(1, int(model.N)))
    except (AttributeError, TypeError):
        return None
    return executor
