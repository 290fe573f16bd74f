"""The README's Python examples run as written (its two code blocks, in order)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert 0 < namespace["austere"].mean_data_fraction < 1
    assert namespace["chain"].samples.shape == (500, 1)


def test_readme_test_command_is_what_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "# run the tests" in ci
    assert any(line.rstrip().endswith("# run the tests") for line in README.read_text().splitlines())
