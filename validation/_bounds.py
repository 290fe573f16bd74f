"""Bounds on the distance between the posterior and an approximate chain's stationary law."""

from __future__ import annotations

from design._lib.checks import check_int, check_interval, check_positive

__all__ = ["stationary_bound", "subsampling_bound", "delta_max"]


def stationary_bound(delta_max, eta) -> float:
    """Korattikara et al.'s bound ``Delta_max / (1 - eta)`` on ``d_TV(S_0, S_eps)``.

    Parameters
    ----------
    delta_max : float
        ``sup_theta ||T_0(theta, .) - T_eps(theta, .)||_TV``, in [0, 1]; at most the largest
        error ``sup |Delta(theta, theta')|`` of the test's acceptance probability.
    eta : float
        Contraction constant of the exact kernel, in [0, 1).

    Returns
    -------
    float
        The bound (values >= 1 say nothing: a total variation distance is at most 1).

    Notes
    -----
    Korattikara, Chen & Welling (2014), Theorem 1; Seita et al. (2017), Lemma 5. Assumes
    the exact kernel ``T_0`` contracts in total variation towards the posterior ``S_0``:
    ``d_TV(P T_0, S_0) <= eta d_TV(P, S_0)`` for every distribution P, which holds with
    eta = Dobrushin's coefficient of ``T_0``. Then

        d(S_0, S_eps) <= d(S_0 T_0, S_eps T_0) + d(S_eps T_0, S_eps T_eps)
                      <= eta d(S_0, S_eps) + Delta_max.

    A random-walk kernel moves locally, so its one-step coefficient is usually 1; apply the
    bound to ``k`` steps instead (``T_0^k`` against ``T_eps^k``, whose distance is at most
    ``k Delta_max``) with eta the coefficient of ``T_0^k`` (:func:`stationary_check` does).
    For a sequential test ``Delta_max <= E(0, m, eps)`` (:func:`delta_max`); for Seita et
    al.'s test it is the error bound of the acceptance test (their Corollary 2).

    Examples
    --------
    >>> from validation import stationary_bound
    >>> stationary_bound(0.01, 0.5)
    0.02
    """
    delta_max = check_interval("delta_max", delta_max, 0.0, 1.0, closed="both")
    eta = check_interval("eta", eta, 0.0, 1.0, closed="left")
    return delta_max / (1.0 - eta)


def subsampling_bound(delta, A, m, rho) -> float:
    """Bardenet et al.'s bound ``A m delta / (1 - rho)`` on ``||pi - pi_tilde||_TV``.

    Parameters
    ----------
    delta : float
        Error of each accept/reject decision, ``|alpha - alpha_tilde| <= delta``, in (0, 1)
        (the confidence sampler's ``delta``, their Lemma 3.1).
    A : float
        Constant of the uniform ergodicity of the exact kernel, > 0 (1 under the
        minorisation below).
    m : int
        Number of steps of the minorisation, >= 1.
    rho : float
        ``1 -`` its mass, in [0, 1).

    Returns
    -------
    float
        The bound (values >= 1 say nothing).

    Notes
    -----
    Bardenet, Doucet & Holmes (2014), Proposition 3.2. Assumes the exact MH kernel P is
    uniformly geometrically ergodic: ``P^m(theta, .) >= (1 - rho) nu(.)`` for every theta
    and some probability nu, so that ``||P^k(theta, .) - pi||_TV <= A rho^floor(k / m)``
    (with A = 1 under this Doeblin condition). Then the approximate kernel has a stationary
    law ``pi_tilde`` with ``||pi - pi_tilde||_TV <= A m delta / (1 - rho)``. TV norms with
    the factor 1/2 (the largest difference of probabilities).

    Examples
    --------
    >>> from validation import subsampling_bound
    >>> subsampling_bound(0.01, 1.0, 2, 0.5)
    0.04
    """
    delta = check_interval("delta", delta, 0.0, 1.0)
    A = check_positive("A", A)
    m = check_int("m", m, low=1)
    rho = check_interval("rho", rho, 0.0, 1.0, closed="left")
    return A * m * delta / (1.0 - rho)


def delta_max(design=None, *, m=None, epsilon=None, N=None, threshold="normal",
              trial_chain=None) -> float:
    """``Delta_max`` of a sequential test: ``E(0, m, eps)`` or the largest |Delta| of a trial.

    Parameters
    ----------
    design : design.Design, optional
        Takes ``m``, ``epsilon``, ``threshold`` and ``N`` from an optimal design; otherwise
        pass them as keywords.
    m, epsilon, N, threshold
        The test, when no design is given (see :func:`design.sequential_error`).
    trial_chain : design.TrialChain, optional
        Pairs of a trial run: return ``max |Delta|`` over them (Korattikara et al. 2014,
        Eq. 6, by :func:`design.acceptance_error`) instead of the worst case.

    Returns
    -------
    float

    Notes
    -----
    ``|Delta(theta, theta')| <= E(0, m, eps)`` for every pair (section 5.1), so
    ``E(0, m, eps)`` bounds ``Delta_max`` a priori; the largest ``|Delta|`` over the pairs
    a chain actually proposes is usually much smaller, but only estimates the supremum.
    Both rest on the dynamic programme's Gaussian model of the test statistic, which
    :func:`clt_check` and :func:`sequential_check` test on the data.

    Examples
    --------
    >>> from design import TrialChain
    >>> from validation import delta_max
    >>> round(delta_max(m=500, epsilon=0.05, N=100_000), 4)
    0.4237
    >>> tc = TrialChain(mu=[2e-4, -1e-4], sigma=[0.05, 0.05], c0=[0.0, 0.0], N=10_000)
    >>> round(delta_max(m=500, epsilon=0.05, N=10_000, trial_chain=tc), 4)
    0.1192
    """
    from design import Design, TrialChain, acceptance_error, sequential_error

    if design is not None:
        if not isinstance(design, Design):
            raise TypeError(f"design must be a design.Design, got {type(design).__name__}")
        if any(v is not None for v in (m, epsilon, N)):
            raise TypeError("pass either design or m, epsilon and N, not both")
        m, epsilon, N, threshold = design.m, design.epsilon, design.N, design.threshold
    elif trial_chain is not None and N is None:
        N = getattr(trial_chain, "N", None)
    if m is None or epsilon is None or N is None:
        raise TypeError("delta_max needs a design, or m, epsilon and N")
    if trial_chain is None:
        return float(sequential_error(0.0, m=m, epsilon=epsilon, N=N,
                                      threshold=threshold).error)
    if not isinstance(trial_chain, TrialChain):
        raise TypeError(f"trial_chain must be a design.TrialChain, got "
                        f"{type(trial_chain).__name__}")
    if trial_chain.N != N:
        raise ValueError(f"trial_chain.N = {trial_chain.N} differs from N = {N}")
    err = acceptance_error(trial_chain, m=m, epsilon=epsilon, threshold=threshold)
    return float(abs(err.delta).max())
