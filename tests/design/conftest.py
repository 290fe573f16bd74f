"""Fixtures of the design tests: the reference implementations kept in ``reference/``,
loaded by path (the suite runs with ``--import-mode=importlib``)."""

import importlib.util
from pathlib import Path

import pytest

REFERENCE = Path(__file__).parent / "reference"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"design_reference_{name}", REFERENCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def dense_dp():
    """Brute-force Nystrom dynamic programme (NumPy/SciPy), independent of design._dp."""
    return _load("dense_dp")


@pytest.fixture(scope="session")
def simulation():
    """Monte Carlo of the real sequential t-test."""
    return _load("simulate_sequential_test")


@pytest.fixture(scope="session")
def coarse_dp():
    """Re-implementation of the authors' 100-bin dynamic programme."""
    return _load("coarse_dp")
