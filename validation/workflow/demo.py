"""``austerity demo``: the main job end to end on a built-in synthetic dataset: first the
one call a user makes, :func:`validation.fit`, with its explanation and timings; then the
parts it assembles, by hand, with and without control variates.

1. data: logistic regression on synthetic rows (in memory);
2. ``validation.fit(model, tolerance)``: the route it chose among the candidate tests and
   proposals (the route table, each candidate's predicted rows per effective sample), its
   chains' ESS and R-hat, the predicted and realised cost, and the seconds of each of its
   steps (``attrs["timings"]``);
3. ``samplers.ControlVariates(model)``: the posterior mode (chunked Newton passes) and the
   second-order Taylor proxy's sums over all rows, so that each row's log-likelihood ratio
   becomes a small residual plus a known mean (Bardenet, Doucet & Holmes 2017, section 7);
   its Laplace covariance gives the proposal;
4. the proposal: ``Independence.from_laplace(cv)``, draws from the Laplace approximation
   N(mode, Sigma) itself, for every chain. At this N the posterior is nearly that Gaussian,
   so nearly every move is accepted and successive draws are nearly independent: a few
   hundred steps give every chain an ESS of a few hundred (the random walk needs about
   d / 0.3 times as many);
5. trial pairs (theta, theta'), both drawn from the Laplace approximation (the pairs the
   chain proposes), summarised over the data by :class:`design.TrialChain` twice: the plain
   model's l_i and the wrapper's residuals;
6. designs for the tolerance: ``design.optimize(trial)`` (the sequential test, plain and with
   control variates) and ``design.optimize(trial_cv, test="barker")``; the CLT check
   (``validation.clt_check(design=...)``: the real test's error in the acceptance probability
   against the design's tolerance, the KS distance as supporting detail) for each Austere design;
7. chains: exact MH and the designed Austere test on the plain model, the designed Austere and
   Barker tests on the control variates; rows read per step against each design's
   prediction, wall time, min bulk ESS and ESS per second (ArviZ), posterior means against
   exact MH;
8. a report (``report.txt``, ``summary.json``) and a figure in the output folder.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from design._lib.checks import as_generator
from design._lib.warnstate import caught_warnings
from samplers import (AustereTest, BarkerTest, ControlVariates, ExactTest, GaussianPrior,
                      Independence, LogisticRegression, sample)
from samplers.datasets import logistic_regression


@dataclass(frozen=True)
class DemoSettings:
    """The demo's sizes: ``n_samples`` steps for each control-variate chain (cheap),
    ``n_samples_exact`` for the two chains on the plain model (exact MH and the plain designed
    test, both reading most rows per step)."""

    n_rows: int = 1_000_000
    n_features: int = 10
    n_samples: int = 2000
    n_samples_exact: int = 800
    n_trial: int = 100
    tolerance: float = 0.01
    seed: int = 2014
    out: Path = Path("austerity-demo")
    n_paths: int = 400


def run_demo(settings: DemoSettings, *, progress: bool = True, log=print,
             executor=None) -> dict:
    """Run the demo and write its report; return the summary dictionary.

    ``executor`` (a ``dask.distributed.Client``, its ``get_executor()`` or any
    ``concurrent.futures.Executor``) runs the full-data passes there (the mode and the
    proxy's sums, the trial pairs' statistics, the CLT checks' l_i): the same numbers.
    """
    import design
    import validation

    with caught_warnings("ignore", FutureWarning):
        import arviz as az
    rng = as_generator(settings.seed)
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)

    log(f"[1/8] data: logistic regression, {settings.n_rows:,} rows x "
        f"{settings.n_features} features + intercept")
    X, y, theta_true = logistic_regression(settings.n_rows, settings.n_features, rng=rng)
    model = LogisticRegression(X, y, prior=GaussianPrior(0.0, 10.0))

    where = "" if executor is None else " on the cluster"
    log(f"[2/8] validation.fit(model, tolerance={settings.tolerance}): the cheapest sound "
        f"route, in one call{where}")
    fitted = _fit(model, settings, rng.spawn(1)[0], progress, executor)
    log("      " + fitted["explanation"].replace("\n", "\n      "))
    log("      timings (s): " + _timings(fitted["timings"]))

    log(f"[3/8] control variates: ControlVariates(model) (the mode and the Taylor proxy's "
        f"sums{where})")
    cv = ControlVariates(model, executor=executor)
    start = cv.center.theta
    proposal = Independence.from_laplace(cv)
    log("[4/8] proposal: Independence.from_laplace(cv), N(mode, Sigma), for every chain")

    log(f"[5/8] trial pairs: {settings.n_trial} from the Laplace approximation, summarised "
        "for the plain model and for the control variates")
    thetas = np.array([proposal.propose(rng, None, None, start, None)[0]
                       for _ in range(settings.n_trial)])
    theta_news = np.array([proposal.propose(rng, None, None, t, None)[0] for t in thetas])
    log_q = np.array([proposal.log_density(a) - proposal.log_density(b)
                      for a, b in zip(thetas, theta_news)])
    trial = design.TrialChain.from_model(model, thetas, theta_news, log_q, executor=executor)
    trial_cv = design.TrialChain.from_model(cv, thetas, theta_news, log_q, executor=executor)
    trial.save(out / "trial.npz")

    log(f"[6/8] designs: design.optimize(trial, tolerance={settings.tolerance}), plain and "
        "with control variates (Austere; Barker on the control variates)")
    plans = {"plain": plain_design(trial, settings.tolerance),
             "cv": design.optimize(trial_cv, tolerance=settings.tolerance),
             "cv_barker": design.optimize(trial_cv, tolerance=settings.tolerance,
                                          test="barker")}
    for key, plan in plans.items():
        log(f"      {key}: " + str(plan).replace("\n", "\n      "))
    n_check = min(20, settings.n_trial)
    pairs = (thetas[:n_check], theta_news[:n_check])
    # the data-free part of each pair's log MH ratio: prior ratio and the proposal's log_q
    log_const = log_q[:n_check] + np.array([float(model.logprior(b)) - float(model.logprior(a))
                                            for a, b in zip(*pairs)])
    clts = {}
    for key, source in (("plain", model), ("cv", cv)):
        m = plans[key].m
        log(f"      CLT check ({key}): validation.clt_check(design=...) on {n_check} trial "
            f"pairs, b = {m}: the real test's error in the acceptance probability against "
            f"the tolerance, KS as supporting detail")
        clts[key] = validation.clt_check(source, pairs, design=plans[key], search=False,
                                         log_const=log_const, n_paths=settings.n_paths,
                                         rng=rng.spawn(1)[0], executor=executor)
        log("      " + str(clts[key]).replace("\n", "\n      "))
    plan = plans["plain"]

    runs = {
        "exact MH": (model, ExactTest(), settings.n_samples_exact, None),
        f"AustereMH designed (m={plan.m}, eps={plan.epsilon:g})":
            (model, AustereTest.from_design(plan), settings.n_samples_exact, plans["plain"]),
        f"AustereMH designed + CV (m={plans['cv'].m}, eps={plans['cv'].epsilon:g})":
            (cv, AustereTest.from_design(plans["cv"]), settings.n_samples, plans["cv"]),
        f"Barker designed + CV (m={plans['cv_barker'].m})":
            (cv, BarkerTest.from_design(plans["cv_barker"]), settings.n_samples,
             plans["cv_barker"]),
    }
    log(f"[7/8] sampling: {', '.join(runs)}")
    chains, rows = {}, {}
    for name, (target, test, n, the_plan) in runs.items():
        log(f"  {name}")
        sample(target, test, proposal, start, 2, rng=0)        # compile, outside the timing
        chain = sample(target, test, proposal, start, n, rng=rng.spawn(1)[0],
                       progress=progress)
        chains[name] = chain
        ess = az.ess(chain.to_arviz()).theta.values
        rows[name] = {
            "test": repr(test),
            "control_variates": target is cv,
            "samples": n,
            "posterior_mean": chain.samples.mean(axis=0).tolist(),
            "posterior_sd": chain.samples.std(axis=0).tolist(),
            "acceptance_rate": chain.acceptance_rate,
            "mean_rows_per_step": float(chain.stats["n_used"].mean()),
            "predicted_rows_per_step": (float(the_plan.data_fraction * model.N)
                                        if the_plan is not None else float(model.N)),
            "data_fraction": chain.mean_data_fraction,
            "wall_time_s": chain.wall_time,
            "min_ess": float(ess.min()),
            "min_ess_per_s": float(ess.min() / chain.wall_time),
        }

    log(f"[8/8] report -> {out}/")
    report = _fit_report(fitted) + "\n\n" + _report(settings, model, plans, clts, rows)
    (out / "report.txt").write_text(report + "\n")
    summary = {
        "settings": {k: str(v) for k, v in asdict(settings).items()},
        "design": {"m": plan.m, "epsilon": plan.epsilon, "threshold": plan.threshold,
                   "predicted_data_fraction": plan.data_fraction,
                   "predicted_mean_abs_error": plan.error},
        "design_cv": {"m": plans["cv"].m, "epsilon": plans["cv"].epsilon,
                      "predicted_data_fraction": plans["cv"].data_fraction,
                      "predicted_mean_abs_error": plans["cv"].error},
        "design_cv_barker": {"m": plans["cv_barker"].m, "delta": plans["cv_barker"].delta,
                             "predicted_data_fraction": plans["cv_barker"].data_fraction,
                             "predicted_mean_abs_error": plans["cv_barker"].error},
        "fit": fitted,
        "clt_check": _verdict_summary(clts["plain"]),
        "clt_check_cv": _verdict_summary(clts["cv"]),
        "runs": rows,
        "theta_true": theta_true.tolist(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    _plot(chains, rows, out)
    log("")
    log(report)
    return summary


def _fit(model, settings, rng, progress, executor=None) -> dict:
    """``validation.fit`` on the demo's model: what its attributes say, as plain values."""
    import validation

    idata = validation.fit(model, tolerance=settings.tolerance, draws=settings.n_samples,
                           n_trial=settings.n_trial, rng=rng, progress=progress,
                           executor=executor)
    a = idata.posterior.attrs
    x = idata.posterior.theta.values
    keys = ("route", "proposal", "pareto_k", "proposals_tried", "candidates",
            "cost_predicted", "cost_realised", "acceptance_predicted", "acceptance_rate",
            "ess_per_step_predicted", "ess_per_step_realised", "rows_predicted",
            "rows_realised", "ess_bulk", "rhat", "seconds_per_ess", "explanation")
    out = {k: a[k] for k in keys}
    out.update(timings=dict(a["timings"]), chains=int(x.shape[0]), draws=int(x.shape[1]),
               posterior_mean=x.reshape(-1, x.shape[2]).mean(axis=0).tolist(),
               ess_per_second_all_in=float(a["ess_bulk"] / a["timings"]["total"]))
    return out


def _timings(timings) -> str:
    return ", ".join(f"{k} {t:.3g}" for k, t in timings.items())


def _fit_report(f) -> str:
    """The report's first section: fit's route table, cost and timings."""
    t = f["timings"]
    return "\n".join([
        "austerity demo: validation.fit first, then its parts by hand",
        f"validation.fit chose {f['route']}: {f['chains']} chains x {f['draws']} draws, min "
        f"bulk ESS {f['ess_bulk']:.0f}, max R-hat {f['rhat']:.3f}; "
        f"{t['total']:.2f} s all-in ({t.get('chains', float('nan')):.2f} s of chains): "
        f"{f['ess_per_second_all_in']:.1f} ESS per second all-in",
        f"  cost, rows read per effective sample: predicted {f['cost_predicted']:,.0f}, "
        f"realised {f['cost_realised']:,.0f}; ESS per step predicted "
        f"{f['ess_per_step_predicted']:.3f}, realised {f['ess_per_step_realised']:.3f}",
        "  its explanation:",
        "    " + f["explanation"].replace("\n", "\n    "),
        "  timings (s): " + _timings(t),
    ])


def _verdict_summary(clt):
    """The verdict in the design's currency, with the KS distance as supporting detail."""
    acc = clt.acceptance
    return {"passed": bool(clt.passed), "batch_size": clt.batch_size,
            "design_tolerance": acc.tolerance,
            "mean_abs_error_simulated": acc.mean_abs_simulated,
            "mean_abs_error_simulated_se": acc.mean_abs_simulated_se,
            "mean_abs_error_gaussian": acc.mean_abs_gaussian,
            "mean_abs_error_edgeworth": acc.mean_abs_edgeworth,
            "ks_passed": bool(clt.ks_passed),
            "max_ks_distance": float(np.max(clt.ks_distance)), "ks_tolerance": clt.tolerance}


def plain_design(trial, tolerance):
    """The Austere design of the plain model; the independence proposal's long moves can put
    every default grid point above the tolerance, and then smaller per-stage errors
    (down to 10^-4) are searched too."""
    import design

    try:
        return design.optimize(trial, tolerance=tolerance)
    except design.InfeasibleDesignError:
        return design.optimize(trial, tolerance=tolerance,
                               epsilon_grid=(1e-4, 2.5e-4, 5e-4, 0.001, 0.002, 0.005, 0.01,
                                             0.02, 0.05, 0.1, 0.2))


def _report(settings, model, plans, clts, rows) -> str:
    names = list(rows)
    exact_mean = np.array(rows[names[0]]["posterior_mean"])
    exact_sd = np.array(rows[names[0]]["posterior_sd"])
    plan, pcv, pb = plans["plain"], plans["cv"], plans["cv_barker"]
    lines = [
        "the parts by hand: logistic regression, with and without control variates",
        f"  N = {model.N:,} rows, d = {model.dim} parameters, seed {settings.seed}; proposal: "
        "Independence.from_laplace (draws from N(mode, Sigma))",
        f"  designs (tolerance {settings.tolerance} on mean |error in acceptance probability|):",
        f"    plain:               m = {plan.m}, eps = {plan.epsilon:g}, predicted "
        f"{plan.data_fraction * model.N:,.0f} rows per step ({plan.data_fraction:.3f} of N)",
        f"    control variates:    m = {pcv.m}, eps = {pcv.epsilon:g}, predicted "
        f"{pcv.data_fraction * model.N:,.1f} rows per step",
        f"    Barker + CV:         m = {pb.m}, delta = {pb.delta}, predicted "
        f"{pb.data_fraction * model.N:,.1f} rows per step",
    ]
    for key, clt in clts.items():
        acc = clt.acceptance
        lines.append(
            f"  CLT check ({key}, m = {acc.m}, eps = {acc.epsilon:g}), in the design's currency: "
            f"{'PASSES' if clt.passed else 'FAILS'} -- the real test's mean |error in "
            f"acceptance probability| on {acc.n_pairs} trial pairs is "
            f"{acc.mean_abs_simulated:.4f} +- {acc.mean_abs_simulated_se:.4f} against the "
            f"tolerance {acc.tolerance:g} (predicted: Gaussian {acc.mean_abs_gaussian:.4f}, "
            f"Edgeworth {acc.mean_abs_edgeworth:.4f})")
        lines.append(
            f"    supporting detail: KS distance of the minibatch t statistic at b = "
            f"{clt.batch_size} {'within' if clt.ks_passed else 'ABOVE'} {clt.tolerance:g} "
            f"(largest {np.max(clt.ks_distance):.3f})")
    if clts["cv"].passed and not clts["cv"].ks_passed:
        lines.append("    (the residuals are skewed, so the KS distance of their t statistic is "
                     "large; the error in the acceptance probability stays within the tolerance "
                     "because the pairs' means sit many sds from the threshold)")
    lines += [
        "",
        f"{'sampler':44s} {'rows/step':>11s} {'predicted':>11s} {'accept':>7s} {'ms/step':>8s} "
        f"{'min ESS':>8s} {'ESS/s':>9s} {'max |mean-exact|/sd':>20s}",
    ]
    for name, r in rows.items():
        shift = float(np.max(np.abs(np.array(r["posterior_mean"]) - exact_mean) / exact_sd))
        r["max_mean_shift_in_exact_sd"] = shift
        lines.append(
            f"{name:44s} {r['mean_rows_per_step']:11,.1f} {r['predicted_rows_per_step']:11,.1f} "
            f"{r['acceptance_rate']:7.3f} {1e3 * r['wall_time_s'] / r['samples']:8.2f} "
            f"{r['min_ess']:8.0f} {r['min_ess_per_s']:9.1f} {shift:20.3f}"
        )
    lines += [
        "",
        "ESS/s: the smallest bulk effective sample size over the parameters, per second of",
        "sampling (kernels compiled beforehand). The mean shift mixes the Monte Carlo error of",
        "both chains with the approximate test's bias; the exact chain's is 0 by definition.",
        "Without control variates the designed test reads most rows: with steps of posterior",
        "scale its standardized drift stays O(1) at every N. With them it tests residuals and",
        "reads one minibatch per step (Bardenet, Doucet & Holmes 2017, sections 6-7).",
    ]
    return "\n".join(lines)


def _plot(chains, rows, out: Path) -> None:
    """Three panels, each with labels and a legend: trace of theta[0]; rows read per step
    (every chain, with each chain's mean and its design's prediction marked); min bulk ESS
    per second of every chain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    N = next(iter(chains.values())).N
    low = max(min(int(c.stats["n_used"].min()) for c in chains.values()), 1)
    bins = np.logspace(np.log10(low) - 0.05, np.log10(N) + 0.05, 41)   # N inside a bin
    for k, (name, chain) in enumerate(chains.items()):
        color = f"C{k}"
        axes[0].plot(chain.samples[:, 0], lw=0.6, color=color, label=name)
        used = chain.stats["n_used"]
        axes[1].hist(used, bins=bins, histtype="stepfilled", alpha=0.35, color=color,
                     edgecolor=color, label=f"{name}: mean {used.mean():,.0f}")
        axes[1].axvline(rows[name]["predicted_rows_per_step"], color=color, ls="--", lw=1.2)
    axes[0].set(title="trace of theta[0]", xlabel="iteration", ylabel="theta[0]")
    axes[0].legend(fontsize=7)
    axes[1].set(title=f"rows read per step (N = {N:,}; dashed: each design's prediction)",
                xscale="log", xlabel="rows read by the test", ylabel="steps")
    axes[1].legend(fontsize=7)
    names = list(rows)
    axes[2].barh(range(len(names)), [rows[n]["min_ess_per_s"] for n in names],
                 color=[f"C{k}" for k in range(len(names))])
    axes[2].set_yticks(range(len(names)), [n.split(" (")[0] for n in names], fontsize=7)
    axes[2].set(xscale="log", xlabel="min bulk ESS per second", title="efficiency")
    fig.tight_layout()
    fig.savefig(out / "demo.png", dpi=110)
    plt.close(fig)
