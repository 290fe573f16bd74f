"""The README's Python examples run as written (its two code blocks, in order)."""

import re
import warnings
from pathlib import Path

import pytest

from samplers import BiasWarning

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.smoke
def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    with warnings.catch_warnings():
        # the designed chain meets its design: its bias monitor must not warn
        warnings.simplefilter("error", BiasWarning)
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert 0 < namespace["austere"].mean_data_fraction < 1
    plan, test = namespace["plan"], namespace["test"]
    assert plan.error <= 0.05 and test == namespace["AustereTest"](m=plan.m, epsilon=plan.epsilon)
    # the design's predicted data use is what the chain read (500 steps: 0.1 absolute)
    assert abs(namespace["austere"].mean_data_fraction - plan.data_fraction) < 0.1
    # the monitor's estimate within the 25% of the design's predicted error
    assert namespace["austere"].running_error[-1] == pytest.approx(plan.error, rel=0.25)
    post = namespace["idata"]["posterior"]["theta"]
    assert post.dims == ("chain", "draw", "theta_dim") and post.shape == (1, 500, 6)
    assert list(namespace["az"].summary(namespace["idata"]).index)[0] == "theta[intercept]"
    assert namespace["chain"].samples.shape == (500, 1)


def test_readme_test_command_is_what_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "# run the tests" in ci
    assert any(line.rstrip().endswith("# run the tests") for line in README.read_text().splitlines())
