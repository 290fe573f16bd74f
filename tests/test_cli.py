"""The console script: demo end to end at a small size, and argument errors."""

import json

import pytest

from validation.workflow.cli import main


def test_demo_runs_end_to_end_and_writes_its_report(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--rows", "20000", "--features", "3", "--samples", "150",
                 "--exact-samples", "60", "--trial", "40", "--tolerance", "0.05",
                 "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert 0 < summary["design"]["predicted_data_fraction"] <= 1
    designed = next(r for name, r in summary["runs"].items() if name.startswith("AustereMH"))
    assert 0 < designed["data_fraction"] <= 1
    assert (out / "report.txt").read_text().startswith("austerity demo")
    assert (out / "demo.png").stat().st_size > 10_000
    assert (out / "trial.npz").exists()
    assert summary["clt_check"]["batch_size"] == summary["design"]["m"]
    assert "CLT check" in (out / "report.txt").read_text()
    assert "design" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["demo", "--rows", "0"], "--rows must be >= 1"),
    (["demo", "--tolerance", "0.7"], "--tolerance must be in"),
])
def test_demo_refuses_bad_arguments(argv, message):
    with pytest.raises(SystemExit, match=message):
        main(argv)


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(cmd in text for cmd in ("demo", "design", "correction"))
