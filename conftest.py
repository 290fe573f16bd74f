"""Doctest collection: the modules whose examples need an optional dependency are left out
when it is not installed (CI's lowest job has no JAX; pyarrow, zarr and h5py come with the
`distributed` extra); their tests importorskip it."""

from importlib.util import find_spec

collect_ignore = []
if find_spec("jax") is None:
    collect_ignore += ["samplers/models/jax.py", "samplers/models/numpyro_bridge.py",
                       "samplers/models/jaxpr_numba.py"]
elif find_spec("numpyro") is None:
    collect_ignore.append("samplers/models/numpyro_bridge.py")
for module, files in (("zarr", ["samplers/sources.py"]),
                      ("pyarrow", ["validation/workflow/convert.py"])):
    if find_spec(module) is None:
        collect_ignore += files
