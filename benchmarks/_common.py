"""Shared by the benchmark scripts (and ``notebooks/_notebook.py``): where results go and
what machine produced them."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
#: The source checkout (this file is ``<root>/benchmarks/_common.py``).
ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """CPU, cores, load, Python and commit: enough to tell two runs apart."""
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=ROOT, check=False).stdout.strip()
    except OSError:
        commit = ""
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
            "python": platform.python_version(), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def write(name: str, payload: dict) -> Path:
    """Write ``payload`` (plus machine info) to ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=float) + "\n")
    print(f"\nwrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return path


def cv_logistic_dataset(N, rng, d=10):
    """The control-variate benchmarks' logistic regression: d standard-normal covariates and
    an intercept column, coefficients N(0, 1/d), labels drawn from the model."""
    import numpy as np

    theta = rng.normal(0.0, 1.0 / np.sqrt(d), d + 1)
    X = rng.normal(size=(N, d + 1))
    X[:, -1] = 1.0
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ theta)))).astype(float)
    return X, y


def chain_with_pairs(model, test, proposal, theta0, n, seed):
    """A chain run step by step on the Python loop, keeping what ``sample`` does not: each
    step's pair ``(theta, theta_new)`` (the proposal is peeked with a copy of the generator,
    so the chain is the one ``mh_step`` makes). Returns ``(view, pairs, stats)``, ``stats``
    holding ``log_const`` and every field of the test's info, per step."""
    import numpy as np

    from samplers import IndexSampler, State, check_model, mh_step

    view, theta = check_model(model, theta0)
    rng = np.random.default_rng(seed)
    batches = IndexSampler(view.N, rng)
    state = State(theta, float(view.logprior(theta)), proposal.init(view, theta))
    pairs, infos = [], []
    for _ in range(n):
        before = state.theta
        peek = np.random.Generator(type(rng.bit_generator)())
        peek.bit_generator.state = rng.bit_generator.state
        theta_new = proposal.propose(peek, view, batches, before, state.pstate)[0]
        state, info = mh_step(rng, state, view, test, proposal, batches)
        pairs.append((before, theta_new))
        infos.append(info)
    stats = {"log_const": np.array([i.log_const for i in infos])}
    for name in infos[0].test._fields:
        stats[name] = np.array([getattr(i.test, name) for i in infos])
    return view, pairs, stats
