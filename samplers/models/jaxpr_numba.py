"""A JAX row function translated to numba: a :class:`~samplers.models.JaxModel` on the
compiled chain loop.

JAX functions cannot run inside a numba loop, and a JAX call costs 75-150 us of dispatch,
so a :class:`~samplers.models.JaxModel` chain runs on the Python loop at milliseconds per
step. Its row function is small, though: a few dozen elementwise and small-vector operations
on one row and theta. :func:`compile_jax_model` traces it once (``jax.make_jaxpr`` for one
row), and writes the program as numba source with every array of the program unrolled into
scalars (shapes are fixed by the trace: theta of length d, one row of data), then does the
same for the per-row gradient (``jax.grad``) and the Hessian-vector product (``jax.jvp`` of
``jax.grad``: O(d) per row, where the full Hessian is O(d^2); the Hessian is its columns).
The result is a :class:`~samplers.models.RowModel`, whose chains, full passes and control
variates run compiled.

The primitives translated are those a row log-likelihood uses (:data:`SUPPORTED`): the
arithmetic, ``exp``/``log``/``log1p``/``expm1``/``logistic``/``tanh``/``sqrt``/``pow``/
``integer_pow``, ``lgamma``/``digamma``/``erf``, ``max``/``min``/``abs``/``sign``, comparisons
and ``select_n`` (``jnp.where``), ``dot_general``, ``reduce_sum``/``max``/``min``,
``broadcast_in_dim``, ``reshape``/``squeeze``/``slice``/``pad``/``concatenate``/``transpose``,
``convert_element_type``, and calls of nested programs (``jit``, ``custom_jvp_call``,
``custom_vjp_call``). Any other primitive raises :class:`UnsupportedPrimitive` naming it;
:func:`compile_jax_model` then warns (naming it) and returns the model unchanged.

No maintained library translates jaxprs to numba (numba4jax goes the other way: numba kernels
called from JAX), so this module writes its own; each primitive is tested against JAX on
random inputs (``tests/samplers/test_jaxpr_numba.py``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from design._lib.jit import jit

__all__ = ["SUPPORTED", "UnsupportedPrimitive", "compile_jax_model", "translate",
           "translate_model", "translate_prior", "Translation"]

#: Most scalars one translated program may hold (the arrays of the program unrolled): above
#: it the source and its compilation grow too large, and the model keeps the JAX path.
MAX_SCALARS = 20_000


class UnsupportedPrimitive(NotImplementedError):
    """A primitive of the traced program that has no numba translation (``.primitive``)."""

    def __init__(self, primitive: str, why: str = ""):
        self.primitive = primitive
        super().__init__(f"the JAX primitive {primitive!r} has no numba translation"
                         + (f" ({why})" if why else ""))


@jit
def digamma(x):
    """The digamma function psi(x) for real x (recurrence to x >= 10, then the asymptotic
    series; reflection for x < 0.5): agrees with ``scipy.special.digamma`` to ~1e-15."""
    if x != x:
        return x
    if x <= 0.0 and x == math.floor(x):
        return math.nan
    result = 0.0
    if x < 0.5:   # psi(1 - x) - psi(x) = pi cot(pi x)
        result -= math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (
        1.0 / 132 - f * (691.0 / 32760 - f / 12))))))
    return result + math.log(x) - 0.5 / x - series


_BERNOULLI = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
              -3617.0 / 510, 43867.0 / 798, -174611.0 / 330)   # B_2 .. B_20


@jit
def polygamma(n, x):
    """psi^(n)(x) for integer n >= 1 and real x > 0 (recurrence to x >= 20, then the
    asymptotic series with Bernoulli numbers B_2 .. B_20); n = 0 is :func:`digamma`."""
    n = int(n)
    if n == 0:
        return digamma(x)
    if x != x or x <= 0.0:
        return math.nan
    sign = 1.0 if n % 2 == 1 else -1.0      # (-1)^(n+1)
    fact = math.gamma(n + 1.0)               # n!
    total = 0.0
    while x < 20.0:
        total += fact / x ** (n + 1)
        x += 1.0
    tail = math.gamma(n * 1.0) / x ** n + fact / (2.0 * x ** (n + 1))
    for k in range(1, 11):
        tail += (_BERNOULLI[k - 1] * math.gamma(2.0 * k + n) / math.gamma(2.0 * k + 1.0)
                 / x ** (2 * k + n))
    return sign * (total + tail)


@jit
def logistic(x):
    """``1 / (1 + exp(-x))`` without overflow."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@jit
def sign(x):
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return x    # 0, -0 or nan


@jit
def fmod(a, b):
    """C's fmod (the sign of ``a``), as ``jax.lax.rem``; numba has no ``math.fmod``."""
    r = a % b
    if r != 0.0 and (r < 0.0) != (a < 0.0):
        r -= b
    return r


@jit
def fmax(a, b):
    """``max`` with NaN propagated (as ``jax.lax.max``)."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@jit
def fmin(a, b):
    if a != a or b != b:
        return a + b
    return a if a <= b else b


_HELPERS = {"math": math, "np": np, "digamma": digamma, "polygamma": polygamma,
            "logistic": logistic, "sign": sign, "fmod": fmod,
            "fmax": fmax, "fmin": fmin}

_UNARY = {
    "neg": "(-{0})", "exp": "math.exp({0})", "log": "math.log({0})",
    "log1p": "math.log1p({0})", "expm1": "math.expm1({0})", "tanh": "math.tanh({0})",
    "logistic": "logistic({0})", "sqrt": "math.sqrt({0})", "rsqrt": "(1.0 / math.sqrt({0}))",
    "abs": "abs({0})", "sign": "sign({0})", "lgamma": "math.lgamma({0})",
    "digamma": "digamma({0})", "erf": "math.erf({0})", "erfc": "math.erfc({0})",
    "sin": "math.sin({0})", "cos": "math.cos({0})", "tan": "math.tan({0})",
    "atan": "math.atan({0})", "asinh": "math.asinh({0})", "square": "({0} * {0})",
    "floor": "np.floor({0})", "ceil": "np.ceil({0})", "not": "(not {0})",
    "is_finite": "math.isfinite({0})", "exp2": "(2.0 ** {0})",
    "cbrt": "math.copysign(abs({0}) ** (1.0 / 3.0), {0})",
    "copy": "{0}", "copy_p": "{0}", "real": "{0}", "stop_gradient": "{0}",
    "optimization_barrier": "{0}", "reduce_precision": "{0}",
}
_BINARY = {
    "add": "({0} + {1})", "add_any": "({0} + {1})", "sub": "({0} - {1})",
    "mul": "({0} * {1})", "div": "({0} / {1})", "pow": "({0} ** {1})",
    "max": "fmax({0}, {1})", "min": "fmin({0}, {1})", "atan2": "math.atan2({0}, {1})",
    "rem": "fmod({0}, {1})", "nextafter": None, "polygamma": "polygamma({0}, {1})",
    "gt": "({0} > {1})", "lt": "({0} < {1})", "ge": "({0} >= {1})", "le": "({0} <= {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "and": "({0} & {1})", "or": "({0} | {1})",
    "xor": "({0} ^ {1})",
}
#: Primitive names with a translation (plus the nested calls ``jit``/``pjit``,
#: ``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``).
SUPPORTED = frozenset(
    [k for k, v in _UNARY.items() if v] + [k for k, v in _BINARY.items() if v] + [
        "integer_pow", "select_n", "clamp", "convert_element_type", "dot_general",
        "reduce_sum", "reduce_max", "reduce_min", "broadcast_in_dim", "reshape", "squeeze",
        "expand_dims", "slice", "pad", "concatenate", "split", "stack", "unstack", "rev",
        "transpose", "iota",
        "jit", "pjit",
        "closed_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"])


def _literal(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    v = float(value)
    if math.isnan(v):
        return "math.nan"
    if math.isinf(v):
        return "math.inf" if v > 0 else "(-math.inf)"
    return repr(v)


def _constant(value) -> np.ndarray:
    arr = np.asarray(value)
    out = np.empty(arr.shape, dtype=object)
    for index in np.ndindex(arr.shape):
        out[index] = _literal(arr[index])
    return out


class _Writer:
    """Writes the statements of one function: each array of the program is an object array
    of scalar expressions (local names or literals)."""

    def __init__(self):
        self.lines: list[str] = []
        self.count = 0

    def bind(self, expr: str) -> str:
        """A local name holding ``expr`` (a name or literal stays as it is)."""
        if expr.isidentifier() or _is_literal(expr):
            return expr
        self.count += 1
        if self.count > MAX_SCALARS:
            raise UnsupportedPrimitive("(size)", f"more than {MAX_SCALARS} scalars unrolled")
        name = f"v{self.count}"
        self.lines.append(f"    {name} = {expr}")
        return name

    def array(self, shape, fill) -> np.ndarray:
        out = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            out[index] = self.bind(fill(index))
        return out

    # -- the program ---------------------------------------------------------------------

    def run(self, jaxpr, consts, args) -> list:
        env = {}

        def read(v):
            if hasattr(v, "val") and not hasattr(v, "count"):   # a Literal
                return _constant(v.val)
            return env[v]

        for var, value in zip(jaxpr.constvars, consts):
            env[var] = _constant(value)
        for var, value in zip(jaxpr.invars, args):
            env[var] = value
        for eqn in _live(jaxpr):
            ins = [read(v) for v in eqn.invars]
            outs = self.equation(eqn, ins)
            for var, value in zip(eqn.outvars, outs):
                env[var] = value
        return [read(v) for v in jaxpr.outvars]

    def equation(self, eqn, ins) -> list:
        name = eqn.primitive.name
        p = eqn.params
        shape = tuple(eqn.outvars[0].aval.shape) if eqn.outvars else ()
        if name in ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call",
                    "custom_vjp_call", "custom_vjp_call_jaxpr", "remat", "checkpoint"):
            closed = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
            if closed is None:
                raise UnsupportedPrimitive(name, "no inner program")
            inner = getattr(closed, "jaxpr", closed)
            consts = getattr(closed, "consts", ())
            n = len(inner.invars)
            return self.run(inner, consts, ins[len(ins) - n:])
        if name in _UNARY and _UNARY[name]:
            (x,) = ins
            return [self.array(x.shape, lambda i: _UNARY[name].format(x[i]))]
        if name in _BINARY and _BINARY[name]:
            a, b = np.broadcast_arrays(*ins)
            return [self.array(a.shape, lambda i: _BINARY[name].format(a[i], b[i]))]
        if name == "integer_pow":
            (x,) = ins
            y = int(p["y"])
            if y == 2:
                return [self.array(x.shape, lambda i: f"({x[i]} * {x[i]})")]
            return [self.array(x.shape, lambda i: f"({x[i]} ** {y})")]
        if name == "select_n":
            pred, *cases = np.broadcast_arrays(*ins)

            def choose(i):
                expr = cases[-1][i]
                for k in range(len(cases) - 2, -1, -1):
                    test = f"not {pred[i]}" if len(cases) == 2 else f"{pred[i]} == {k}"
                    expr = f"({cases[k][i]} if {test} else {expr})"
                return expr
            return [self.array(shape, choose)]
        if name == "clamp":
            lo, x, hi = np.broadcast_arrays(*ins)
            return [self.array(x.shape, lambda i: f"fmin(fmax({x[i]}, {lo[i]}), {hi[i]})")]
        if name == "convert_element_type":
            (x,) = ins
            kind = np.dtype(p["new_dtype"]).kind
            cast = {"f": "float({0})", "i": "int({0})", "u": "int({0})",
                    "b": "({0} != 0)"}.get(kind)
            if np.dtype(eqn.invars[0].aval.dtype).kind == "b":   # numba has no float(bool)
                cast = {"f": "(1.0 if {0} else 0.0)", "i": "(1 if {0} else 0)",
                        "u": "(1 if {0} else 0)", "b": "{0}"}.get(kind)
            if cast is None:
                raise UnsupportedPrimitive(name, f"to {p['new_dtype']}")
            return [self.array(x.shape, lambda i: cast.format(x[i]))]
        if name == "dot_general":
            return [self.dot_general(ins[0], ins[1], p["dimension_numbers"], shape)]
        if name in ("reduce_sum", "reduce_max", "reduce_min"):
            (x,) = ins
            axes = tuple(p["axes"])
            moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
            flat = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
            join = {"reduce_sum": self.sum, "reduce_max": lambda t: self.fold("fmax", t),
                    "reduce_min": lambda t: self.fold("fmin", t)}[name]
            return [self.array(flat.shape[:-1], lambda i: join(list(flat[i])))]
        if name == "broadcast_in_dim":
            (x,) = ins[:1]
            dims = tuple(p["broadcast_dimensions"])
            view_shape = [1] * len(p["shape"])
            for k, dim in enumerate(dims):
                view_shape[dim] = x.shape[k]
            return [np.broadcast_to(x.reshape(view_shape), tuple(p["shape"])).copy()]
        if name == "reshape":
            if p.get("dimensions") is not None:
                raise UnsupportedPrimitive(name, "with dimensions")
            return [ins[0].reshape(tuple(p["new_sizes"]))]
        if name == "squeeze":
            return [np.squeeze(ins[0], axis=tuple(p["dimensions"])).reshape(shape)]
        if name == "expand_dims":
            return [np.expand_dims(ins[0], tuple(p["dimensions"]))]
        if name == "transpose":
            return [np.transpose(ins[0], tuple(p["permutation"]))]
        if name == "slice":
            starts, limits = p["start_indices"], p["limit_indices"]
            strides = p["strides"] or (1,) * len(starts)
            index = tuple(slice(s, e, k) for s, e, k in zip(starts, limits, strides))
            return [ins[0][index]]
        if name == "pad":
            x, value = ins
            config = p["padding_config"]
            if any(int(interior) != 0 or int(lo) < 0 or int(hi) < 0
                   for lo, hi, interior in config):
                raise UnsupportedPrimitive(name, "negative or interior padding")
            out = np.empty(shape, dtype=object)
            out[...] = value.reshape(()).item() if value.shape == () else value
            index = tuple(slice(int(lo), int(lo) + n) for (lo, _, _), n in zip(config, x.shape))
            out[index] = x
            return [out]
        if name == "concatenate":
            return [np.concatenate(ins, axis=int(p["dimension"]))]
        if name == "split":
            cuts = np.cumsum([int(k) for k in p["sizes"]])[:-1]
            return list(np.split(ins[0], cuts, axis=int(p["axis"])))
        if name == "stack":
            return [np.stack(np.broadcast_arrays(*ins), axis=int(p["axis"]))]
        if name == "unstack":
            x = np.moveaxis(ins[0], int(p["axis"]), 0)
            return [x[k:k + 1].reshape(x.shape[1:]) for k in range(x.shape[0])]
        if name == "rev":
            return [np.flip(ins[0], axis=tuple(p["dimensions"]))]
        if name == "iota":
            dim = int(p["dimension"])
            return [_constant(np.broadcast_to(np.arange(shape[dim]).reshape(
                [-1 if k == dim else 1 for k in range(len(shape))]), shape))]
        raise UnsupportedPrimitive(name)

    def sum(self, terms) -> str:
        if not terms:
            return "0.0"
        expr = terms[0]
        for t in terms[1:]:
            expr = f"({expr} + {t})"
        return expr

    def fold(self, fn, terms) -> str:
        expr = terms[0]
        for t in terms[1:]:
            expr = f"{fn}({expr}, {t})"
        return expr

    def dot_general(self, lhs, rhs, numbers, shape) -> np.ndarray:
        (lc, rc), (lb, rb) = numbers
        lc, rc, lb, rb = (tuple(int(k) for k in t) for t in (lc, rc, lb, rb))
        lf = [k for k in range(lhs.ndim) if k not in lc and k not in lb]
        rf = [k for k in range(rhs.ndim) if k not in rc and k not in rb]
        L = np.transpose(lhs, lb + tuple(lf) + lc)
        R = np.transpose(rhs, rb + tuple(rf) + rc)
        nb, nlf, nrf = len(lb), len(lf), len(rf)
        batch = L.shape[:nb]
        lfree, rfree = L.shape[nb:nb + nlf], R.shape[nb:nb + nrf]
        L = L.reshape(batch + lfree + (-1,))
        R = R.reshape(batch + rfree + (-1,))

        def entry(index):
            b, i, j = index[:nb], index[nb:nb + nlf], index[nb + nlf:]
            left, right = L[b + i], R[b + j]
            return self.sum([f"{x} * {y}" for x, y in zip(left, right)])
        return self.array(tuple(batch) + tuple(lfree) + tuple(rfree), entry).reshape(shape)


def _live(jaxpr) -> list:
    """The equations the outputs depend on (in order): a row function traced through a
    NumPyro model seeds a random key it never uses, for instance."""
    needed = {v for v in jaxpr.outvars if not hasattr(v, "val")}
    live = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars):
            live.append(eqn)
            needed.update(v for v in eqn.invars if not hasattr(v, "val"))
    return live[::-1]


def _is_literal(expr: str) -> bool:
    try:
        float(expr)
        return True
    except ValueError:
        return expr in ("True", "False", "math.nan", "math.inf", "(-math.inf)")


def translate(closed_jaxpr, inputs, signature: str, outputs: str, name: str):
    """numba source of a traced program: ``inputs`` the object arrays of expressions of its
    input variables, ``signature`` the function's arguments, ``outputs`` "scalar" (return
    the one output) or "out" (write the one output into ``out``, element by element).
    Returns ``(source, function)``, the function compiled lazily (:func:`design._lib.jit.jit`,
    inlined, not cached: it is made per model). Raises :class:`UnsupportedPrimitive`."""
    writer = _Writer()
    (result,) = writer.run(closed_jaxpr.jaxpr, closed_jaxpr.consts, inputs)
    lines = [f"def {name}({signature}):"]
    lines += writer.lines
    if outputs == "scalar":
        lines.append(f"    return float({result.reshape(()).item()})")
    else:
        for index in np.ndindex(*result.shape):
            lines.append(f"    out[{', '.join(map(str, index))}] = {result[index]}")
    source = "\n".join(lines)
    scope = dict(_HELPERS)
    exec(compile(source, f"<numba translation of {name}>", "exec"), scope)
    return source, jit(scope[name], cache=False)


def _inputs(leaves, dim, extra_vector=False):
    """The expressions of theta (``theta[j]``), of one row of each data leaf
    (``arrays[k][i, ...]``) and, if ``extra_vector``, of ``v[j]``."""
    theta = np.array([f"theta[{j}]" for j in range(dim)], dtype=object)
    rows = []
    for k, leaf in enumerate(leaves):
        shape = leaf.shape[1:]
        arr = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            arr[index] = f"arrays[{k}][{', '.join(['i'] + [str(t) for t in index])}]"
        rows.append(arr)
    out = [theta] + rows
    if extra_vector:
        out.append(np.array([f"v[{j}]" for j in range(dim)], dtype=object))
    return out


def translate_row_function(loglik_row, treedef, leaves, dim):
    """The numba kernels ``(loglik, grad, hvp)`` of ``loglik_row(theta, row)`` for data
    ``leaves`` (flattened with ``treedef``), in :class:`~samplers.models.RowModel`'s
    signatures; raises :class:`UnsupportedPrimitive`."""
    import jax

    def flat(theta, *row_leaves):
        return loglik_row(theta, treedef.unflatten(list(row_leaves)))

    grad = jax.grad(flat)

    def hvp(theta, *rest):
        *row_leaves, v = rest
        return jax.jvp(lambda t: grad(t, *row_leaves), (theta,), (v,))[1]

    theta0 = np.zeros(dim)
    row0 = [np.asarray(leaf[0]) for leaf in leaves]
    with jax.enable_x64(True):
        programs = [jax.make_jaxpr(f)(*args) for f, args in (
            (flat, [theta0] + row0), (grad, [theta0] + row0), (hvp, [theta0] + row0 + [theta0]))]
    base = _inputs(leaves, dim)
    _, f_loglik = translate(programs[0], base, "arrays, i, theta", "scalar", "loglik_row")
    _, f_grad = translate(programs[1], base, "arrays, i, theta, out", "out", "grad_row")
    _, f_hvp = translate(programs[2], _inputs(leaves, dim, True), "arrays, i, theta, v, out",
                         "out", "hvp_row")
    return f_loglik, f_grad, f_hvp


def translate_prior(logprior, dim):
    """A log prior written in JAX (a function of theta alone: the NumPyro bridge's prior and
    Jacobian) as a :class:`~samplers.priors.CompiledPrior`: its program and its gradient's
    (``jax.grad``) translated to numba, which the compiled chain loops call.

    Parameters
    ----------
    logprior : callable
        ``logprior(theta) -> scalar`` in ``jax.numpy``.
    dim : int
        The length of theta.

    Returns
    -------
    samplers.priors.CompiledPrior

    Raises
    ------
    UnsupportedPrimitive
        When a primitive of either program has no translation.

    Examples
    --------
    >>> import numpy as np
    >>> import jax.numpy as jnp
    >>> def logprior(theta):        # N(0, 2^2) on theta[0], a log-normal scale on theta[1]
    ...     return -0.125 * theta[0] ** 2 - 0.5 * theta[1] ** 2
    >>> prior = translate_prior(logprior, 2)
    >>> prior.logpdf(np.array([2.0, 1.0])), prior.grad(np.array([2.0, 1.0])).tolist()
    (-1.0, [-0.5, -1.0])
    """
    import hashlib

    import jax

    from ..priors import CompiledPrior

    theta0 = np.zeros(dim)
    with jax.enable_x64(True):
        programs = [jax.make_jaxpr(f)(theta0) for f in (logprior, jax.grad(logprior))]
    theta = [np.array([f"theta[{j}]" for j in range(dim)], dtype=object)]
    src_lp, f_lp = translate(programs[0], theta, "theta", "scalar", "logprior")
    src_g, f_g = translate(programs[1], theta, "theta, out", "out", "grad_logprior")
    key = hashlib.sha256((src_lp + "\n" + src_g).encode()).hexdigest()[:24]
    return CompiledPrior(f_lp, f_g, dim, key=f"jax-{key}")


def compile_jax_model(model, *, warn=True):
    """A :class:`~samplers.models.JaxModel` (or a NumPyro bridge model) as a
    :class:`~samplers.models.RowModel` whose kernels are its JAX row function translated to
    numba: its chains, full passes and control variates then run compiled.

    Parameters
    ----------
    model : JaxModel
    warn : bool
        When a primitive has no translation, warn (naming it) and return ``model`` itself
        (its JAX path); with ``warn=False`` raise :class:`UnsupportedPrimitive` instead.

    Returns
    -------
    RowModel or JaxModel
        The translated model (the same data, prior and names), or ``model`` unchanged.

    Notes
    -----
    The kernels are the programs JAX traces for one row (log-likelihood, gradient, and
    Hessian-vector product), every array unrolled into scalars: they agree with JAX to
    rounding (~1e-15 relative), not bit for bit (JAX may sum a dot product in another
    order). A ``logprior`` that is a :class:`~samplers.priors.Prior` keeps the chain on the
    compiled loop; a ``logprior`` written in JAX (the NumPyro bridge's prior and Jacobian)
    is translated too (:func:`translate_prior`), so the chain stays compiled; if it has a
    primitive without translation, it stays a JAX function called once per step (with
    ``warn``, a warning says so), and the chain runs on the Python loop with compiled rows. Integer data keep their type; float data are the model's float64 copy.

    Examples
    --------
    >>> import numpy as np
    >>> import jax.numpy as jnp
    >>> from samplers import GaussianPrior
    >>> from samplers.models import JaxModel, compile_jax_model
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(1000), rng.normal(size=1000)])
    >>> y = rng.poisson(np.exp(X @ [0.5, 0.3])).astype(float)
    >>> def poisson_row(theta, row):
    ...     x, y = row
    ...     eta = x @ theta
    ...     return y * eta - jnp.exp(eta)
    >>> jax_model = JaxModel(poisson_row, (X, y), GaussianPrior(0.0, 10.0), dim=2)
    >>> model = compile_jax_model(jax_model)
    >>> type(model).__name__
    'RowModel'
    >>> theta, idx = np.array([0.4, 0.2]), np.arange(1000)
    >>> bool(np.allclose(model.loglik(theta, idx), jax_model.loglik(theta, idx), rtol=1e-13))
    True
    """
    translation = translate_model(model)
    if translation.error is not None and not translation.rows:
        if not warn:
            raise translation.error
        warnings.warn(f"{translation.error}: the JaxModel keeps its JAX path (a Python loop "
                      "with a JAX call per batch)", UserWarning, stacklevel=2)
    elif translation.error is not None and warn:
        warnings.warn(f"{translation.error}: the model's logprior stays a JAX function, so "
                      "its chains run on the Python loop (the rows compiled)", UserWarning,
                      stacklevel=2)
    return translation.model


@dataclass(frozen=True)
class Translation:
    """What :func:`translate_model` made of a :class:`~samplers.models.JaxModel`.

    Attributes
    ----------
    model : RowModel or JaxModel
        The translated model, or the JaxModel itself when its row function has a primitive
        without translation.
    rows : bool
        The row function (log-likelihood, gradient, Hessian-vector product) was translated.
    prior : str
        ``"built-in"`` (a :class:`~samplers.priors.Prior`), ``"flat"`` (none), ``"translated"``
        (a JAX ``logprior`` now numba) or ``"JAX"`` (a JAX ``logprior`` that did not
        translate: the chains run on the Python loop).
    error : UnsupportedPrimitive or None
        Why a part was not translated.
    seconds : float
        Time taken by the translation (tracing and writing the source; numba compiles the
        kernels when they are first called).
    """

    model: object
    rows: bool
    prior: str
    error: UnsupportedPrimitive | None
    seconds: float

    @property
    def compiled(self) -> bool:
        """Whether the chains can run on the compiled loop (rows and prior compiled)."""
        return self.rows and self.prior != "JAX"

    def summary(self) -> str:
        """One sentence: which route the model takes and, when a part stayed in JAX, why."""
        if not self.rows:
            return (f"JaxModel kept on its JAX path: {self.error}; its chains run on the "
                    "Python loop (a JAX call per batch)")
        said = ("row log-likelihood, gradient and Hessian-vector product translated from "
                f"JAX to numba in {self.seconds:.2g} s")
        if self.prior == "translated":
            return said + ", and the JAX logprior with them: the chains run on the compiled loop"
        if self.prior == "JAX":
            return (said + f"; the logprior stays a JAX function ({self.error}), so the chains "
                    "run on the Python loop")
        return said + ": the chains run on the compiled loop"


def translate_model(model) -> Translation:
    """Translate a :class:`~samplers.models.JaxModel`'s row function (and a JAX
    ``logprior``) to numba, saying what was translated (:class:`Translation`); never raises
    :class:`UnsupportedPrimitive`. :func:`compile_jax_model` and :func:`validation.fit` call
    it.

    Examples
    --------
    >>> import numpy as np
    >>> import jax.numpy as jnp
    >>> from samplers.models import JaxModel
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> model = JaxModel(lambda theta, x: -0.5 * jnp.sum((x - theta) ** 2), X,
    ...                  lambda theta: -0.5 * theta @ theta, dim=2)
    >>> t = translate_model(model)
    >>> type(t.model).__name__, t.rows, t.prior, t.compiled
    ('RowModel', True, 'translated', True)
    """
    import time

    from .row_model import RowModel

    t0 = time.perf_counter()
    leaves = [np.asarray(leaf) for leaf in model._leaves]
    try:
        f_loglik, f_grad, f_hvp = translate_row_function(model._row_fn, model._treedef,
                                                         leaves, model.dim)
    except UnsupportedPrimitive as exc:
        kind = ("built-in" if model.prior is not None else
                "flat" if model._logprior_fn is None else "JAX")
        return Translation(model, False, kind, exc, time.perf_counter() - t0)
    logprior, grad_logprior, kind, error = model.prior, None, "built-in", None
    if model.prior is None:
        kind = "flat"
    if model.prior is None and model._logprior_fn is not None:
        try:
            logprior, kind = translate_prior(model._logprior_fn, model.dim), "translated"
        except UnsupportedPrimitive as exc:
            # the prior stays a JAX function: the chains run on the Python loop
            logprior, grad_logprior, kind, error = (model.logprior, model.grad_logprior,
                                                    "JAX", exc)
    row_model = RowModel(f_loglik, tuple(leaves), dim=model.dim, logprior=logprior,
                         grad_row=f_grad, hvp_row=f_hvp, grad_logprior=grad_logprior,
                         names=model.names)
    return Translation(row_model, True, kind, error, time.perf_counter() - t0)
