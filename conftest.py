"""Doctest collection: the modules whose examples need an optional dependency are left out
when it is not installed (CI's lowest job has no JAX); their tests importorskip it."""

from importlib.util import find_spec

collect_ignore = []
if find_spec("jax") is None:
    collect_ignore += ["samplers/models/jax.py", "samplers/models/numpyro_bridge.py"]
elif find_spec("numpyro") is None:
    collect_ignore.append("samplers/models/numpyro_bridge.py")
