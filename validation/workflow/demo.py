"""``austerity demo``: the main job end to end on a built-in synthetic dataset.

1. data: logistic regression on synthetic rows (in memory);
2. the Laplace approximation (Newton steps on a row subset, then on all rows): the chains'
   starting point and the random-walk proposal's covariance;
3. trial pairs (theta, theta'): theta drawn independently from the Laplace approximation of
   the posterior and theta' from the random-walk proposal, summarised by one pass over the
   data each as a :class:`design.TrialChain` (independent pairs cover pi(theta) q(theta'|theta)
   far better than the same number of consecutive, correlated states of a short MH chain;
   ``TrialChain.from_chain`` records an exact-MH chain instead);
4. ``design.optimize(trial, tolerance)``: the minibatch size m and per-stage error
   epsilon of the sequential test that read the least data within the tolerance;
5. ``validation.clt_check`` on the trial pairs at the designed batch size: does the
   minibatch t statistic follow the Student-t the test assumes on these data?
6. chains: exact MH and the designed AustereMH side by side:
   posterior summaries, rows read per step (against the design's prediction), wall time
   and effective samples per second (ArviZ);
7. a report (``report.txt``, ``summary.json``) and figures in the output folder.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from design._lib.checks import as_generator
from samplers import (AustereTest, ExactTest, GaussianPrior, LogisticRegression, RandomWalk,
                      laplace_approximation, sample)
from samplers.datasets import logistic_regression


@dataclass(frozen=True)
class DemoSettings:
    n_rows: int = 1_000_000
    n_features: int = 10
    n_samples: int = 1000
    n_samples_exact: int = 300
    n_trial: int = 100
    tolerance: float = 0.01
    seed: int = 2014
    out: Path = Path("austerity-demo")


def run_demo(settings: DemoSettings, *, progress: bool = True, log=print) -> dict:
    """Run the demo and write its report; return the summary dictionary."""
    import design
    import validation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    rng = as_generator(settings.seed)
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)

    log(f"[1/6] data: logistic regression, {settings.n_rows:,} rows x "
        f"{settings.n_features} features + intercept")
    X, y, theta_true = logistic_regression(settings.n_rows, settings.n_features, rng=rng)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))
    laplace = laplace_approximation(model, 20_000, rng)
    start, cov = laplace.mode, laplace.covariance
    proposal = RandomWalk(cov * 2.38**2 / model.dim)

    log(f"[2/6] trial pairs: {settings.n_trial} from the Laplace approximation")
    thetas = rng.multivariate_normal(start, cov, size=settings.n_trial)
    theta_news = np.array([proposal.propose(rng, None, None, t, None)[0] for t in thetas])
    trial = design.TrialChain.from_model(model, thetas, theta_news)
    trial.save(out / "trial.npz")

    log(f"[3/6] design: design.optimize(trial, tolerance={settings.tolerance})")
    plan = design.optimize(trial, tolerance=settings.tolerance)
    log("      " + str(plan).replace("\n", "\n      "))

    n_check = min(20, settings.n_trial)
    log(f"[4/6] CLT check: validation.clt_check on {n_check} trial pairs, batch size {plan.m}")
    clt = validation.clt_check(model, (thetas[:n_check], theta_news[:n_check]),
                               batch_size=plan.m, search=False, rng=rng.spawn(1)[0])
    log("      " + str(clt).replace("\n", "\n      "))
    if not clt.passed:
        log("      WARNING: the CLT check fails at this batch size; the design's error "
            "prediction is not to be trusted here")

    designed = AustereTest.from_design(plan, threshold="t")
    runs = {
        "exact MH": (ExactTest(), settings.n_samples_exact),
        f"AustereMH designed (m={designed.m}, eps={designed.epsilon:g})":
            (designed, settings.n_samples),
    }
    log(f"[5/6] sampling: {', '.join(runs)}")
    chains, rows = {}, {}
    for name, (test, n) in runs.items():
        log(f"  {name}")
        chain = sample(model, test, proposal, start, n, rng=rng.spawn(1)[0], progress=progress)
        chains[name] = chain
        ess = az.ess(chain.to_arviz()).theta.values
        rows[name] = {
            "test": repr(test),
            "samples": n,
            "posterior_mean": chain.samples.mean(axis=0).tolist(),
            "posterior_sd": chain.samples.std(axis=0).tolist(),
            "acceptance_rate": chain.acceptance_rate,
            "mean_rows_per_step": float(chain.stats["n_used"].mean()),
            "data_fraction": chain.mean_data_fraction,
            "wall_time_s": chain.wall_time,
            "min_ess": float(ess.min()),
            "min_ess_per_s": float(ess.min() / chain.wall_time),
        }

    log(f"[6/6] report -> {out}/")
    report = _report(settings, model, plan, clt, rows)
    (out / "report.txt").write_text(report + "\n")
    summary = {
        "settings": {k: str(v) for k, v in asdict(settings).items()},
        "design": {"m": plan.m, "epsilon": plan.epsilon, "threshold": plan.threshold,
                   "predicted_data_fraction": plan.data_fraction,
                   "predicted_mean_abs_error": plan.error},
        "clt_check": {"passed": bool(clt.passed), "batch_size": plan.m,
                      "max_ks_distance": float(np.max(clt.ks_distance)),
                      "tolerance": clt.tolerance},
        "runs": rows,
        "theta_true": theta_true.tolist(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    _plot(chains, plan, out)
    log("")
    log(report)
    return summary


def _report(settings, model, plan, clt, rows) -> str:
    names = list(rows)
    exact_mean = np.array(rows[names[0]]["posterior_mean"])
    exact_sd = np.array(rows[names[0]]["posterior_sd"])
    lines = [
        "austerity demo: logistic regression",
        f"  N = {model.N:,} rows, d = {model.dim} parameters, seed {settings.seed}",
        f"  design (tolerance {settings.tolerance} on mean |error in acceptance probability|): "
        f"m = {plan.m}, eps = {plan.epsilon:g}, predicted data use {plan.data_fraction:.3f}",
        f"  CLT check at b = {plan.m}: {'passed' if clt.passed else 'FAILED'} (largest KS distance "
        f"{np.max(clt.ks_distance):.3f}, tolerance {clt.tolerance:g})",
        "",
        f"{'sampler':42s} {'rows/step':>11s} {'data %':>7s} {'accept':>7s} {'ms/step':>8s} "
        f"{'ESS/s':>8s} {'max |mean-exact|/sd':>20s}",
    ]
    for name, r in rows.items():
        shift = float(np.max(np.abs(np.array(r["posterior_mean"]) - exact_mean) / exact_sd))
        r["max_mean_shift_in_exact_sd"] = shift
        lines.append(
            f"{name:42s} {r['mean_rows_per_step']:11,.0f} {100 * r['data_fraction']:7.2f} "
            f"{r['acceptance_rate']:7.3f} {1e3 * r['wall_time_s'] / r['samples']:8.2f} "
            f"{r['min_ess_per_s']:8.2f} {shift:20.3f}"
        )
    lines += [
        "",
        "ESS/s: the smallest effective sample size over the parameters, per second of sampling.",
        "The mean shift mixes the Monte Carlo error of both chains with the approximate test's",
        "bias; the exact chain's is 0 by definition.",
    ]
    return "\n".join(lines)


def _plot(chains, plan, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, chain in chains.items():
        axes[0].plot(chain.samples[:, 0], lw=0.6, label=name)
        used = chain.stats["n_used"]
        axes[1].hist(used, bins=np.logspace(np.log10(max(used.min(), 1)), np.log10(chain.N), 40),
                     histtype="step", label=name)
    axes[0].set(title="trace of theta[0]", xlabel="iteration")
    axes[1].set(title="rows read per step", xscale="log", xlabel="rows")
    axes[1].legend(fontsize=7)
    plan.plot(ax=axes[2])
    fig.tight_layout()
    fig.savefig(out / "demo.png", dpi=110)
    plt.close(fig)
