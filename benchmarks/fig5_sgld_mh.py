"""Korattikara et al. (2014), Figure 5: the pitfall of uncorrected SGLD, and its MH correction.

L1-regularised 1-D linear regression, N = 10,000 (``samplers.datasets.l1_regression_toy``),
step 5e-6, minibatches of 500. Panels: (a) posterior density by quadrature, (b) gradient of
the log posterior, (c) plain SGLD, (d) SGLD corrected by AustereTest(m=500, epsilon=0.5).
Writes ``benchmarks/results/fig5_sgld_mh.png`` and ``.json``.

    python benchmarks/fig5_sgld_mh.py [--steps 200000]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path[:0] = [str(Path(__file__).resolve().parents[1]),   # this checkout's packages,
                str(Path(__file__).resolve().parent)]       # not an installed copy; _common
from _common import RESULTS, write  # noqa: E402

from samplers import SGLD, AcceptAll, AustereTest, LaplacePrior, Langevin, LinearRegression, sample  # noqa: E402
from samplers.datasets import L1_TOY_LAPLACE_RATE, L1_TOY_PRECISION, l1_regression_toy  # noqa: E402
from samplers.quadrature import posterior_1d  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def main(steps: int, seed: int) -> dict:
    X, y = l1_regression_toy(rng=seed)
    model = LinearRegression(X, y, noise_sd=(1 / L1_TOY_PRECISION) ** 0.5,
                             prior=LaplacePrior(0.0, 1 / L1_TOY_LAPLACE_RATE))
    post = posterior_1d(model, -0.02, 0.1, kinks=[0.0])
    runs = {
        "sgld": (AcceptAll(), SGLD(5e-6, batch_size=500)),
        "sgld_mh": (AustereTest(m=500, epsilon=0.5), Langevin(5e-6, batch_size=500)),
    }
    chains, summary = {}, {}
    for name, (test, proposal) in runs.items():
        t0 = time.process_time()
        chain = sample(model, test, proposal, [post.mean], steps, rng=seed + 1)
        cpu = time.process_time() - t0
        s = chain.samples[:, 0]
        chains[name] = s
        summary[name] = {
            "test": repr(test), "proposal": repr(proposal), "steps": steps, "cpu_seconds": cpu,
            "mean": float(s.mean()), "sd": float(s.std()), "ess": float(az.ess(s[None, :])),
            "acceptance_rate": chain.acceptance_rate,
            "rows_per_step": float(np.mean(chain.stats["n_used"] + chain.stats["n_grad"])),
            "fraction_left_of_zero": float(np.mean(s < 0)),
        }
        print(f"{name:8s} mean {s.mean():.5f} sd {s.std():.5f} (posterior {post.mean:.5f}, "
              f"{post.sd:.5f}); acceptance {chain.acceptance_rate:.3f}; {cpu:.1f} s CPU")
    print(f"posterior (quadrature) mean {post.mean:.5f} sd {post.sd:.5f}, "
          f"P(theta < 0) = {post.prob(-np.inf, 0.0):.4f}")

    grid = np.linspace(-0.02, 0.07, 600)
    density = post.pdf(grid)
    theta = np.empty(1)
    full = np.arange(model.N)
    grad = []
    for t in grid:
        theta[0] = t
        grad.append(model.grad_loglik(theta, full).sum() + model.grad_logprior(theta)[0])
    fig, ax = plt.subplots(1, 4, figsize=(16, 3.6))
    ax[0].plot(grid, density, "k")
    ax[0].set_title("(a) posterior density (quadrature)")
    ax[1].plot(grid, grad, "k")
    ax[1].axhline(0, color="grey", lw=0.5)
    ax[1].set_title("(b) gradient of log posterior")
    bins = np.linspace(-0.02, 0.07, 91)
    for k, (name, title) in enumerate([("sgld", "(c) SGLD"),
                                       ("sgld_mh", "(d) SGLD + MH, $\\epsilon$ = 0.5")]):
        a = ax[2 + k]
        a.hist(chains[name], bins=bins, density=True, color="C0" if k == 0 else "C2", alpha=0.6)
        a.plot(grid, density, "k", lw=1)
        a.set_title(title)
    for a in ax:
        a.set_xlabel("theta")
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "fig5_sgld_mh.png", dpi=120)
    print(f"wrote {RESULTS / 'fig5_sgld_mh.png'}")
    payload = {
        "settings": {"N": model.N, "step": 5e-6, "batch": 500, "seed": seed},
        "posterior": {"mean": post.mean, "sd": post.sd, "p_left_of_zero": post.prob(-np.inf, 0.0)},
        **summary,
    }
    write("fig5_sgld_mh", payload)
    return payload


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=2014)
    main(**vars(parser.parse_args()))
