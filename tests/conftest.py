"""Shared test configuration: a derandomised, capped hypothesis profile."""

import warnings

from hypothesis import HealthCheck, settings

settings.register_profile(
    "austerity",
    derandomize=True,
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("austerity")

# ArviZ announces its refactor on import; the tests use only its stable API.
warnings.filterwarnings("ignore", message=".*ArviZ is undergoing a major refactor.*")
