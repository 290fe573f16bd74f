"""Fixtures of the design tests: the reference implementations kept in ``reference/``,
loaded by path (the suite runs with ``--import-mode=importlib``)."""

import importlib.util
import sys
from pathlib import Path

import pytest

REFERENCE = Path(__file__).parent / "reference"


def _load(name):
    """Import ``reference/<name>.py`` as module ``name`` (numba's cache and pickling
    refer to compiled functions by module name, so it must be importable as such)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REFERENCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
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
def logistic_pairs():
    """Synthetic logistic regression, its model protocol, and MH / Laplace pairs."""
    return _load("logistic_pairs")


@pytest.fixture(scope="session")
def coarse_dp():
    """Re-implementation of the authors' 100-bin dynamic programme."""
    return _load("coarse_dp")


@pytest.fixture(scope="session")
def real_tests():
    """Populations of l_i as a model, and drivers of the samplers' real test loops."""
    return _load("real_tests")


@pytest.fixture
def count_evaluations(monkeypatch):
    """``start()`` begins counting the design programme's runs: it returns the list that
    then collects each run's (m, epsilon, screen)."""
    def start():
        from design import _optimize

        calls = []
        original = _optimize._Evaluator.__call__

        def counting(self, m, eps, screen=False):
            calls.append((m, eps, screen))
            return original(self, m, eps, screen=screen)

        monkeypatch.setattr(_optimize._Evaluator, "__call__", counting)
        return calls

    return start
