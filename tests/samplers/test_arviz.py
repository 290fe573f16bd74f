"""``to_arviz()`` on ArviZ 0.x and 1.x: layout, and the ArviZ functions users call on it.

The suite runs on ArviZ 0.23 (Python 3.11, CI's main job) and ArviZ 1.x (Python 3.13, CI's
newest-dependency smoke job); this module runs on both. ``az.mcse(method="sd")`` is called
with ArviZ's numba acceleration as the user has it (``tests/conftest.py`` no longer switches
it off): the fix lives in ``samplers._arviz``.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from samplers import AustereTest, Chains, ExactTest, GaussianMean, RandomWalk, sample
from samplers._arviz import arviz_major, import_arviz

MODEL = GaussianMean(np.random.default_rng(3).normal(0.5, 0.1, 5_000))

pytestmark = pytest.mark.smoke


@pytest.fixture(scope="module")
def chains():
    a = sample(MODEL, AustereTest(m=500, epsilon=0.05), RandomWalk(0.004), [0.5], 400, rng=0)
    b = sample(MODEL, AustereTest(m=500, epsilon=0.05), RandomWalk(0.004), [0.5], 400, rng=1)
    return Chains((a, b))


def test_layout_dims_coordinates_and_sample_stats(chains):
    data = chains.to_arviz(names=["mu"])
    post = data["posterior"]["theta"]
    assert post.dims == ("chain", "draw", "theta_dim")
    assert post.shape == (2, 400, 1)
    assert list(post.coords["theta_dim"].values) == ["mu"]
    np.testing.assert_array_equal(post.values, chains.samples)
    stats = data["sample_stats"]
    for name in ("accepted", "log_const", "n_grad", "n_used", "n_stages"):
        assert stats[name].dims == ("chain", "draw")
        np.testing.assert_array_equal(stats[name].values, chains.stats[name])
    assert data.attrs["N"] == MODEL.N
    assert "AustereTest" in data.attrs["test"]


def test_one_chain_and_default_coordinates(chains):
    data = chains[0].to_arviz()
    assert data["posterior"]["theta"].shape == (1, 400, 1)
    assert list(data["posterior"]["theta"].coords["theta_dim"].values) == [0]


def test_names_are_checked(chains):
    with pytest.raises(ValueError, match="one entry per parameter"):
        chains.to_arviz(names=["a", "b"])


def test_summary_ess_mcse_sd_and_plot_trace(chains, tmp_path):
    az = import_arviz()
    data = chains.to_arviz(names=["mu"])
    summary = az.summary(data)
    assert summary.shape[0] == 1 and "ess_bulk" in summary.columns
    ess = float(np.asarray(az.ess(data)["theta"]).ravel()[0])
    assert 1 < ess < 800 + 1
    mcse_sd = float(np.asarray(az.mcse(data, method="sd")["theta"]).ravel()[0])
    assert 0 < mcse_sd < chains.samples.std()
    # the MCSE of the sd agrees with a batch-means estimate within a factor of a few
    sd_batches = chains.samples.reshape(2, 8, 50).std(axis=2).std() / np.sqrt(16)
    assert 0.2 < mcse_sd / sd_batches < 5

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if arviz_major(az) == 0:
        az.plot_trace(data)
    else:
        az.plot_trace(data, backend="matplotlib")
    plt.savefig(tmp_path / "trace.png")
    plt.close("all")
    assert (tmp_path / "trace.png").stat().st_size > 1000


def test_exact_chain_converts_with_its_infos():
    chain = sample(MODEL, ExactTest(), RandomWalk(0.004), [0.5], 50, rng=2)
    stats = chain.to_arviz()["sample_stats"]
    assert {"l_mean", "l_std", "n_used"} <= set(stats.data_vars)


def _closed_form_lp(theta):
    """log N(theta; prior) + sum_i log N(x_i; theta, sigma), written out with SciPy."""
    from scipy import stats

    x, sigma = MODEL.x, MODEL.sigma
    loglik = np.array([stats.norm.logpdf(x, t, sigma).sum() for t in np.ravel(theta)])
    return np.array([MODEL.logprior(np.array([t])) for t in np.ravel(theta)]) + loglik


def test_lp_is_the_exact_log_posterior_at_every_draw(chains):
    data = chains.to_arviz(model=MODEL, progress=False)
    lp = data["sample_stats"]["lp"]
    assert lp.dims == ("chain", "draw")
    np.testing.assert_allclose(lp.values[:, :50].ravel(),
                               _closed_form_lp(chains.samples[:, :50]), rtol=1e-11)
    assert "lp" not in chains.to_arviz()["sample_stats"]
    # a rejection repeats the draw, and its lp
    rejected = ~chains.stats["accepted"][0]
    rejected[0] = False
    values = lp.values[0]
    np.testing.assert_array_equal(values[rejected], values[np.flatnonzero(rejected) - 1])


def test_lp_of_a_user_model_and_of_control_variates_equals_the_built_in_one():
    from samplers import ControlVariates, log_posterior

    class UserGaussian:
        N = MODEL.N

        def loglik(self, theta, idx):
            return MODEL.loglik(np.asarray(theta), np.asarray(idx))

        def logprior(self, theta):
            return MODEL.logprior(np.asarray(theta))

    draws = np.array([[[0.49], [0.5], [0.5]], [[0.51], [0.52], [0.52]]])
    want = log_posterior(MODEL, draws, progress=False)
    assert want.shape == (2, 3)
    np.testing.assert_allclose(want.ravel(), _closed_form_lp(draws), rtol=1e-11)
    np.testing.assert_allclose(log_posterior(UserGaussian(), draws, progress=False), want,
                               rtol=1e-12)
    cv = ControlVariates(MODEL, center=[0.5])
    np.testing.assert_allclose(log_posterior(cv, draws, progress=False), want, rtol=1e-12)
    before = draws.copy()
    log_posterior(MODEL, draws, progress=False)
    np.testing.assert_array_equal(draws, before)


def test_lp_refuses_a_different_model_and_bad_draws(chains):
    from samplers import log_posterior

    other = GaussianMean(np.zeros(10))
    with pytest.raises(ValueError, match="model must be the model the chains sampled"):
        chains.to_arviz(model=other)
    with pytest.raises(ValueError, match="samples must have shape"):
        log_posterior(MODEL, np.array([0.5, 0.6]))
    with pytest.raises(ValueError, match="samples must be finite"):
        log_posterior(MODEL, np.array([[np.nan]]))
    with pytest.raises(ValueError, match="samples must have d = 1 columns"):
        log_posterior(MODEL, np.zeros((3, 2)))


def test_numba_probe_answers_as_arviz_own_sqrt():
    """import_arviz's probe does not compile ArviZ's numba _sqrt (0.08 s of a first fit);
    it must give the answer calling that function gives."""
    import warnings

    from samplers._arviz import _numba_mcse_broken

    az = import_arviz()
    stats_utils = pytest.importorskip("arviz.stats.stats_utils")
    if not hasattr(stats_utils, "_sqrt") or arviz_major(az) != 0:
        pytest.skip("ArviZ without the 0.x _sqrt helper")
    flag = az.Numba.numba_flag
    az.Numba.enable_numba()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            try:
                float(stats_utils._sqrt(np.ones(1), np.zeros(1)))
                broken = False
            except (TypeError, DeprecationWarning):
                broken = True
        assert _numba_mcse_broken(az) == broken
    finally:
        az.Numba.enable_numba() if flag else az.Numba.disable_numba()


LIGHT_CHILD = r'''
import sys
import numpy as np
from samplers._arviz import to_inference_data
x = np.random.default_rng(0).normal(size=(2, 20, 2))
stats = {"accepted": np.arange(40).reshape(2, 20) % 3 == 0}
light = to_inference_data(x, stats, names=["a", "b"], attrs={"route": "r"})
print("HEAVY", [m for m in ("arviz", "arviz_stats", "arviz_plots") if m in sys.modules])
import arviz
full = to_inference_data(x, stats, names=["a", "b"], attrs={"route": "r"})
for tree in (light, full):
    for node in tree.subtree:
        node.attrs.pop("created_at", None)
print("SAME", type(light) is type(full), light.identical(full))
'''


def test_arviz_1_conversion_imports_arviz_base_alone():
    """On ArviZ 1.x the conversion (fit's ``result`` step) imports arviz_base, not arviz with
    arviz_stats and arviz_plots (about 1.5 s more of a first fit), and gives the same
    DataTree as ``arviz.from_dict`` once arviz is imported."""
    if arviz_major(import_arviz()) != 1:
        pytest.skip("ArviZ 0.x converts through arviz itself")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", LIGHT_CHILD], cwd=root, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines.get("HEAVY") == "[]", out.stdout + out.stderr[-2000:]
    assert lines.get("SAME") == "True True", out.stdout + out.stderr[-2000:]
