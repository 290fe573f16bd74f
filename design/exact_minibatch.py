"""Design of the exact minibatch tests (SMH, TunaMH, MH-SS): expected batch and proposal scale.

Setting: the posterior is close to its Laplace approximation ``N(theta_hat, Sigma)``, the
proxy is centred at ``theta_hat``, the proposal is the preconditioned random walk
``theta' = theta + h Sigma^{1/2} z``. Then ``u = theta - theta_hat ~ N(0, Sigma)`` and the step
``Delta ~ N(0, h^2 Sigma)`` are independent, ``u' = u + Delta ~ N(0, (1 + h^2) Sigma)``, and
the Poisson batch of an exact test has mean ``E[B] = chi C^2 E[phi^2] + C E[phi]`` with
``C = sum_i c_i = N c_bar`` and (``samplers.models.remainder``)

    phi_k = ||Delta|| (||u||^k + ||u'||^k) / 2.

With ``T = tr Sigma`` and ``Q = E||u||^4 = T^2 + 2 tr(Sigma^2)``, Jensen and Cauchy-Schwarz
give the closed forms used here (upper bounds, tight when the norms concentrate, i.e. for
d of 10 or more):

    E phi_0 <= h sqrt(T),                        E phi_0^2 = h^2 T,
    E phi_1 <= h T (1 + sqrt(1 + h^2)) / 2,
    E phi_2 <= h sqrt(T Q) (2 + h^2) / 2.

Since ``T ~ T_1 / N`` and ``Q ~ Q_1 / N^2`` at posterior scale, ``E[B] ~ N^{(1-k)/2}``:
``sqrt(N)`` without control variates (and ``N`` for TunaMH's ``chi`` term), ``O(1)`` for a
first-order proxy, ``O(N^{-1/2})`` for a second-order one (Cornish et al. 2019, section 3.3;
Prado et al. 2024, section 4).

The proposal scale maximising efficiency per row read, MH-SS section 4's criterion
``MSJD / E[B]``, uses the random-walk acceptance ``a(h) = 2 Phi(-h sqrt(d) / 2)`` (Roberts,
Gelman & Gilks 1997) times ``exp(-kappa E[B])``, ``kappa`` the excess log-acceptance SMH's
factorisation loses per expected row (``TaylorRemainder.tightness`` estimates it from trial
pairs; 0 for MH-SS, whose Poisson factor stays close to MH's), ``MSJD = h^2 T a``, and the
rows read per step ``a_det E[B] + overhead``: the Poisson rows are drawn only when the
deterministic factor accepts, which it does with probability about ``a(h)`` at order 2
(the proxy carries the posterior's shape) and about 1 at orders 0 and 1 (a first-order proxy
is flat at the mode). Approximate: the benchmark shows where it errs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, special

__all__ = ["ExactBatchDesign", "exact_expected_batch", "exact_design"]


def _check(name, value, *, low=0.0, strict=True):
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or (v <= low if strict else v < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low:g}, got {value!r}")
    return v


def exact_expected_batch(h, *, order, N, c_mean, trace, trace_sq=None, chi=0.0) -> float:
    """Closed-form bound on ``E[B]`` of an exact test (see the module docstring).

    Parameters
    ----------
    h : float
        Proposal scale relative to the posterior (``2.38 / sqrt(d)`` is the usual choice).
    order : {0, 1, 2}
        Taylor order of the control variates (0: none, TunaMH).
    N : int
        Rows.
    c_mean : float
        Mean per-row constant ``c_bar = C / N`` (``TaylorRemainder.c_sum / N``).
    trace : float
        ``tr Sigma`` of the posterior (Laplace) covariance.
    trace_sq : float, optional
        ``tr(Sigma^2)`` (needed for order 2; default ``trace^2 / d``-free bound ``trace^2``).
    chi : float
        TunaMH's extra rate, >= 0.

    Examples
    --------
    >>> b5 = exact_expected_batch(0.7, order=2, N=10**5, c_mean=0.5, trace=10 / 10**5)
    >>> b7 = exact_expected_batch(0.7, order=2, N=10**7, c_mean=0.5, trace=10 / 10**7)
    >>> round(b5 / b7, 3)  # second order: E[B] falls like N^(-1/2)
    10.0
    """
    h = _check("h", h)
    if isinstance(order, bool) or order not in (0, 1, 2):
        raise ValueError(f"order must be 0, 1 or 2, got {order!r}")
    N = _check("N", N)
    c_mean = _check("c_mean", c_mean, strict=False)
    T = _check("trace", trace)
    chi = _check("chi", chi, strict=False)
    C = N * c_mean
    if order == 0:
        e_phi, e_phi2 = h * math.sqrt(T), h * h * T
    elif order == 1:
        e_phi, e_phi2 = 0.5 * h * T * (1.0 + math.sqrt(1.0 + h * h)), math.nan
    else:
        tsq = T * T if trace_sq is None else _check("trace_sq", trace_sq)
        Q = T * T + 2.0 * tsq
        e_phi, e_phi2 = 0.5 * h * math.sqrt(T * Q) * (2.0 + h * h), math.nan
    if chi > 0 and order > 0:
        raise ValueError("chi > 0 is supported here for order 0 (TunaMH) only")
    return C * e_phi + (chi * C * C * e_phi2 if chi > 0 else 0.0)


@dataclass(frozen=True)
class ExactBatchDesign:
    """The proposal scale an exact test should use, and what it predicts.

    Attributes
    ----------
    h : float
        Proposal scale relative to the posterior: use ``RandomWalk(h**2 * laplace_cov)``.
    expected_batch : float
        Predicted ``E[B]`` (rows per step when the deterministic factor accepts).
    acceptance : float
        Predicted acceptance rate.
    msjd : float
        Predicted mean squared jump distance ``h^2 tr(Sigma) acceptance``.
    efficiency : float
        ``msjd / (a_det expected_batch + overhead)`` (see the module docstring).
    growth_exponent : float
        ``E[B]`` grows like ``N ** growth_exponent`` at fixed h: ``(1 - order) / 2``
        (1 for TunaMH with chi > 0).
    """

    h: float
    expected_batch: float
    acceptance: float
    msjd: float
    efficiency: float
    growth_exponent: float


def exact_design(*, order, N, d, c_mean, trace, trace_sq=None, chi=0.0, kappa=0.0,
                 overhead=1.0) -> ExactBatchDesign:
    """The proposal scale maximising ``MSJD / (E[B] + overhead)`` (MH-SS section 4).

    ``kappa`` is the acceptance penalty per expected row (1 for SMH's worst case, 0 for MH-SS);
    ``overhead`` the per-step cost in rows (proposal, prior, proxy: a row or so).

    Examples
    --------
    >>> des = exact_design(order=2, N=10**6, d=10, c_mean=0.5, trace=10 / 10**6)
    >>> round(des.h * math.sqrt(10), 1)  # the batch is negligible: about 2.38 / sqrt(d)
    2.4
    >>> des.growth_exponent
    -0.5
    """
    d = _check("d", d)
    kappa = _check("kappa", kappa, strict=False)
    overhead = _check("overhead", overhead, strict=False)
    T = _check("trace", trace)

    def parts(h):
        eb = exact_expected_batch(h, order=order, N=N, c_mean=c_mean, trace=T,
                                  trace_sq=trace_sq, chi=chi)
        a_mh = 2.0 * special.ndtr(-0.5 * h * math.sqrt(d))
        acc = a_mh * math.exp(-kappa * eb)
        msjd = h * h * T * acc
        rows = (a_mh if order == 2 else 1.0) * eb + overhead
        return eb, acc, msjd, msjd / rows if rows > 0 else math.inf

    res = optimize.minimize_scalar(lambda h: -parts(h)[3], bounds=(1e-4 / math.sqrt(d),
                                   6.0 / math.sqrt(d)), method="bounded",
                                   options=dict(xatol=1e-6))
    h = float(res.x)
    eb, acc, msjd, eff = parts(h)
    growth = 1.0 if (order == 0 and chi > 0) else (1 - order) / 2
    return ExactBatchDesign(h, float(eb), float(acc), float(msjd), float(eff), growth)
