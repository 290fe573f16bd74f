"""The NumPyro bridge: a NumPyro model whose likelihood sits in a plate over the rows, as a
:class:`~samplers.models.JaxModel`.

See :func:`from_numpyro`. NumPyro and JAX are optional (``pip install "austerity[jax]"``),
imported when a model is bridged.
"""

from __future__ import annotations

import numpy as np

from .jax import JaxModel, import_jax

__all__ = ["from_numpyro", "NumPyroModel"]


def _import_numpyro():
    try:
        import numpyro
    except ImportError:  # pragma: no cover - exercised only without numpyro
        raise ImportError('from_numpyro needs numpyro: pip install "austerity[jax]" '
                          "(numpyro >= 0.15)") from None
    return numpyro


class NumPyroModel(JaxModel):
    """A :class:`~samplers.models.JaxModel` made from a NumPyro model by :func:`from_numpyro`.

    theta is the flat vector of the latent sites in unconstrained space (NumPyro's
    ``biject_to`` of each site's support), sites in alphabetical order, each flattened in C
    order.

    Attributes
    ----------
    sites : dict
        Latent site name -> its shape in unconstrained space.
    observed : list of str
        The observed sites (in the plate over the rows).
    plate : str
        The name of that plate.
    names : list of str
        One per entry of theta: the site name, with ``[i]`` (``[i,j]``...) for an array site
        and ``log(.)`` / ``unconstrained(.)`` around a transformed one; the ArviZ
        coordinates.
    """

    def constrain(self, thetas) -> dict:
        """The latent sites in their own (constrained) space at each row of ``thetas``.

        Parameters
        ----------
        thetas : array of shape (n, dim) or (dim,)

        Returns
        -------
        dict
            Site name -> array of shape ``(n, *site_shape)`` (``site_shape`` without ``n``
            for a single theta).
        """
        jax = self._jax
        arr = np.asarray(thetas, dtype=np.float64)
        single = arr.ndim == 1
        arr = arr.reshape(-1, self.dim)
        with jax.enable_x64(True):
            out = jax.jit(jax.vmap(self._constrain))(arr)
            out = {k: np.asarray(v) for k, v in out.items()}
        return {k: v[0] for k, v in out.items()} if single else out


def from_numpyro(model_fn, *args, **kwargs) -> NumPyroModel:
    r"""A NumPyro model as a :class:`~samplers.models.JaxModel`, for every test here.

    The model is traced once on the data given (``model_fn(*args, **kwargs)``); its
    observed sites must sit inside one ``numpyro.plate`` over the rows, and the arguments
    with that plate's length N along their first axis are the rows. Each row's
    log-likelihood is the sum of the observed sites' ``log_prob`` on that row alone (the
    model run on the row, so the plate has size 1 there), as a function of the latent sites
    in unconstrained space; ``logprior`` is the prior's log density plus the log-Jacobian of
    the transforms (NumPyro's ``potential_energy`` with the observed sites blocked).

    Parameters
    ----------
    model_fn : callable
        A NumPyro model.
    *args, **kwargs
        Its arguments: the data and anything else it takes.

    Returns
    -------
    NumPyroModel
        A JaxModel whose ``names`` are the latent sites (the ArviZ coordinates:
        ``chain.to_arviz(names=model.names)``) and whose :meth:`~NumPyroModel.constrain`
        maps draws back to the sites' own space.

    Raises
    ------
    ValueError
        For observed data outside the support of their distribution (negative or fractional
        counts, a Bernoulli y not in {0, 1}: the site and the first such row are named),
        and for a model shape the bridge does not take: no observed site; observed sites
        outside a plate, or not all in the same single plate ("no plate over the data");
        a plate that subsamples (``subsample_size``: the bridge does the subsampling, so
        write the plate over all rows); a latent site inside the plate (local latent
        variables: one per row, which a minibatch test cannot sample); no argument with
        N rows.

    Notes
    -----
    Accepted shape: global latent sites (outside the row plate; their prior may depend on
    each other but not on the rows), and one plate over the N rows holding every observed
    site, sized by the data (``numpyro.plate("data", len(y))``) or by a fixed N, the data
    passed as arguments with the rows along axis 0 (nested plates inside it, e.g. over a
    row's categories, are summed within the row). Latent sites are sampled in unconstrained
    space, so the chain's draws of a positive site are its logarithm: use
    :meth:`NumPyroModel.constrain` for the site itself.

    Examples
    --------
    A NumPyro logistic regression, bridged, its mode, and fitted (``fit``, not run here:
    tests/test_readme.py fits a bridged model with this call):

    >>> import numpy as np
    >>> import numpyro
    >>> import numpyro.distributions as dist
    >>> from samplers.models import from_numpyro
    >>> from validation import fit
    >>> def logistic(X, y):
    ...     beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([X.shape[1]]))
    ...     with numpyro.plate("data", X.shape[0]):
    ...         numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(20_000), rng.normal(size=20_000)])
    >>> y = (rng.random(20_000) < 1 / (1 + np.exp(-X @ [0.3, -1.0]))).astype(float)
    >>> model = from_numpyro(logistic, X, y)
    >>> model.N, model.names
    (20000, ['beta[0]', 'beta[1]'])
    >>> from samplers import ControlVariates
    >>> cv = ControlVariates(model)      # Newton's method on the model's full-pass sums
    >>> bool(np.allclose(cv.center.theta, [0.3, -1.0], atol=0.06))
    True
    >>> idata = fit(model, draws=500, rng=1)  # doctest: +SKIP
    """
    if not callable(model_fn):
        raise TypeError(f"model_fn must be a NumPyro model (a function), got "
                        f"{type(model_fn).__name__}")
    jax = import_jax()
    _import_numpyro()
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree
    from numpyro import handlers
    from numpyro.distributions.transforms import ExpTransform, IdentityTransform, biject_to
    from numpyro.infer.util import constrain_fn, initialize_model, potential_energy

    name = getattr(model_fn, "__name__", type(model_fn).__name__)
    with jax.enable_x64(True):
        trace = handlers.trace(handlers.seed(model_fn, 0)).get_trace(*args, **kwargs)
    samples = [s for s in trace.values() if s["type"] == "sample"]
    observed = [s for s in samples if s["is_observed"]]
    latent = [s for s in samples if not s["is_observed"]]
    if not observed:
        raise ValueError(f"model_fn {name} has no observed site (numpyro.sample(..., obs=...)): "
                         "there is no likelihood over rows to subsample")
    frames = [{f.name: f for f in s["cond_indep_stack"]} for s in observed]
    common = set(frames[0]).intersection(*frames[1:])
    obs_names = [s["name"] for s in observed]
    if not common:
        raise ValueError(
            f"model_fn {name} has no plate over the data: the observed site(s) {obs_names} "
            "must all sit inside one `with numpyro.plate('data', N):` over the rows")
    if len(common) > 1:
        raise ValueError(
            f"model_fn {name}: the observed sites {obs_names} share the plates "
            f"{sorted(common)}; the bridge takes one plate over the rows (nest any other "
            "plate inside it, or give its sites to the rows' function)")
    plate = common.pop()
    size, subsample_size = trace[plate]["args"][:2]
    N = int(size)
    if subsample_size is not None and int(subsample_size) != N:
        raise ValueError(
            f"model_fn {name}: the plate {plate!r} subsamples ({subsample_size} of {N} rows); "
            "the bridge draws the minibatches itself, so write the plate over all rows "
            f"(numpyro.plate({plate!r}, {N})) without subsample_size")
    _check_support(name, observed, plate, N)
    local = [s["name"] for s in latent
             if plate in {f.name for f in s["cond_indep_stack"]}]
    if local:
        raise ValueError(
            f"model_fn {name} has latent site(s) {local} inside the plate {plate!r} over the "
            "rows (local latent variables, one per row): the bridge takes models whose latent "
            "sites are global; marginalise them out of the row's likelihood")

    # the rows: the arguments with N entries along their first axis
    slots = [("arg", k) for k, a in enumerate(args) if _has_rows(a, N)]
    slots += [("kw", k) for k, a in kwargs.items() if _has_rows(a, N)]
    if not slots:
        raise ValueError(f"model_fn {name}: no argument has the plate {plate!r}'s {N} rows "
                         "along its first axis; pass the data as arguments of the model")

    def with_rows(rows):
        a, kw = list(args), dict(kwargs)
        for (where, key), r in zip(slots, rows):
            if where == "arg":
                a[key] = r
            else:
                kw[key] = r
        return tuple(a), kw

    data = tuple(np.asarray(args[k] if w == "arg" else kwargs[k]) for w, k in slots)
    args0, kwargs0 = with_rows(tuple(d[:1] for d in data))   # the model on one row
    prior_model = handlers.block(model_fn, hide=obs_names)
    with jax.enable_x64(True):
        info = initialize_model(jax.random.PRNGKey(0), model_fn, model_args=args0,
                                model_kwargs=kwargs0)
        z = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in info.param_info.z.items()}
        flat0, unravel = ravel_pytree(z)
    dim = int(flat0.shape[0])
    if dim == 0:
        raise ValueError(f"model_fn {name} has no latent site: nothing to sample")

    names, sites = [], {}
    for site in sorted(z):
        shape = tuple(np.shape(z[site]))
        sites[site] = shape
        t = biject_to(trace[site]["fn"].support)
        label = (site if isinstance(t, IdentityTransform)
                 else f"log({site})" if isinstance(t, ExpTransform)
                 else f"unconstrained({site})")
        if shape == ():
            names.append(label)
        else:
            names.extend(f"{label}[{','.join(map(str, ix))}]" for ix in np.ndindex(*shape))

    def constrain(u):
        return constrain_fn(prior_model, args0, kwargs0, unravel(u))

    def logprior(u):
        return -potential_energy(prior_model, args0, kwargs0, unravel(u))

    def loglik_row(u, row):
        params = constrain(u)
        a, kw = with_rows(tuple(r[None] for r in row))
        # the plate runs over this one row (its indices substituted), and the scale a plate
        # of a fixed size N puts on one row (N / 1) is undone
        data = {**params, plate: jnp.arange(1)}
        tr = handlers.trace(handlers.substitute(handlers.seed(model_fn, 0), data=data)
                            ).get_trace(*a, **kw)
        size = tr[plate]["args"][0]
        total = 0.0
        for site in obs_names:
            s = tr[site]
            lp = s["fn"].log_prob(s["value"])
            if s.get("scale") is not None:
                lp = lp * (s["scale"] / size)
            total = total + jnp.sum(lp)
        return total

    model = NumPyroModel(loglik_row, data, logprior, dim=dim, names=names)
    model._constrain = constrain
    model.sites, model.observed, model.plate = sites, obs_names, plate
    return model


def _check_support(name, observed, plate, N):
    """Refuse an observed value outside its distribution's support (negative or fractional
    counts, a Bernoulli y not in {0, 1}), naming the site and the first such row: one
    vectorised check of the data, before any pass of the model."""
    for s in observed:
        fn, value = s["fn"], s["value"]
        try:
            ok = np.asarray(fn.support(value))
        except Exception:       # a support without a check (or a custom one): left to the model
            continue
        if ok.all():
            continue
        frame = next(f for f in s["cond_indep_stack"] if f.name == plate)
        bad = np.argwhere(~ok)[0]
        axis = ok.ndim + frame.dim if ok.ndim else None
        row = int(bad[axis]) if axis is not None and 0 <= axis < ok.ndim else None
        first = np.asarray(value)[tuple(bad)] if np.ndim(value) == ok.ndim else None
        held = "" if first is None else f" holds {first.item()!r}"
        where = f"row {row}" if row is not None else f"entry {tuple(int(k) for k in bad)}"
        raise ValueError(
            f"model_fn {name}: the observed site {s['name']!r} is outside the support of its "
            f"{type(fn).__name__} ({fn.support}): {where}{held} ({int((~ok).sum())} of "
            f"{ok.size} values outside); pass data the distribution can have produced")


def _has_rows(a, N) -> bool:
    shape = getattr(a, "shape", None)
    return shape is not None and len(shape) >= 1 and shape[0] == N
