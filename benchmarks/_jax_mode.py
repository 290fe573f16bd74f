"""The posterior mode by Newton's method in JAX, for the NumPyro baselines' set-up.

Shared by ``bench_fit.py`` (logistic, analytic derivatives) and ``bench_models.py`` /
``bench_models_accuracy.py`` (any log posterior, derivatives by autodiff). Not
``jax.scipy.optimize``'s BFGS: on bench_fit's d10-N1e6 it stopped (status 5) 50 posterior
sds from the mode, leaving HMCECS a Taylor proxy centred wrongly and an estimator far too
noisy to mix.
"""

from __future__ import annotations


def newton_mode_jax(logpost_grad_hess, theta0, max_steps=50):
    """Maximise a log posterior by Newton's method from ``theta0``.

    ``logpost_grad_hess(theta) -> (lp, g, H)``: the log posterior, its gradient and the
    negative log posterior's Hessian (positive definite near the mode). Each step solves
    ``H step = g``, halving the step (up to 30 times) while the log posterior falls; where
    ``H`` is not positive definite along the step (``g @ step <= 0``, far from the mode of a
    non-concave posterior), the step is the gradient scaled by the Hessian's diagonal. Stops
    once the Newton decrement ``g @ H^-1 g`` is below 1e-12.

    Returns the mode, ``H`` and ``g`` there, and the number of steps taken.
    """
    import jax
    import jax.numpy as jnp

    th = jnp.asarray(theta0, dtype=float)
    lp, g, H = logpost_grad_hess(th)
    steps = 0
    for steps in range(1, max_steps + 1):
        step = jnp.linalg.solve(H, g)
        dec = float(g @ step)
        if dec < 0.0 or dec != dec:           # not an ascent direction, or NaN
            step = g / jnp.maximum(jnp.abs(jnp.diag(H)), 1.0)
        elif dec < 1e-12:
            steps -= 1
            break
        for _ in range(30):
            lp_new, g_new, H_new = logpost_grad_hess(th + step)
            if float(lp_new) >= float(lp):
                break
            step = step / 2
        th, lp, g, H = th + step, lp_new, g_new, H_new
    return jax.block_until_ready(th), H, g, steps


def autodiff_grad_hess(logpost):
    """``logpost_grad_hess`` for :func:`newton_mode_jax` from a JAX log posterior
    ``logpost(theta) -> scalar``: gradient by ``jax.grad``, Hessian by ``jax.hessian``
    (forward over reverse), one jitted function."""
    import jax

    value_and_grad = jax.value_and_grad(logpost)
    hess = jax.hessian(logpost)

    @jax.jit
    def f(th):
        lp, g = value_and_grad(th)
        return lp, g, -hess(th)
    return f


def mode_check(mode, H, grad, center, sd):
    """How right a mode is: the gradient's norm there, the Newton decrement ``g' H^-1 g``
    (twice the log posterior's predicted rise to the true mode) and the largest distance to
    another mode estimate ``center`` (fit's, by the model's own Newton pass) in posterior
    sds ``sd``."""
    import numpy as np

    mode, grad, center, sd = (np.asarray(a, dtype=float) for a in (mode, grad, center, sd))
    return dict(grad_norm=float(np.linalg.norm(grad)),
                newton_decrement=float(grad @ np.linalg.solve(np.asarray(H), grad)),
                max_distance_to_fit_mode_sd=float(np.max(np.abs(mode - center) / sd)))
