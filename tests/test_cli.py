"""The console script: demo end to end at a small size, and argument errors."""

import json

import pytest

from validation.workflow.cli import main


@pytest.mark.smoke
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
    verdict = summary["clt_check"]           # the verdict is the design's: mean |Delta| of the
    assert verdict["design_tolerance"] == 0.05   # real test against the tolerance, KS beside it
    assert verdict["passed"] == (verdict["mean_abs_error_simulated"] <= 0.05 + 2 * verdict[
        "mean_abs_error_simulated_se"])
    assert "supporting detail: KS distance" in (out / "report.txt").read_text()
    # with control variates the designed test reads about one minibatch, as its design says
    with_cv = next(r for name, r in summary["runs"].items() if name.startswith("AustereMH designed + CV"))
    assert with_cv["control_variates"] and with_cv["mean_rows_per_step"] < 0.01 * 20_000
    assert abs(with_cv["mean_rows_per_step"] / with_cv["predicted_rows_per_step"] - 1) < 0.2
    assert summary["clt_check_cv"]["batch_size"] == summary["design_cv"]["m"]
    printed = capsys.readouterr().out
    assert "design" in printed
    # the demo leads with validation.fit: its route table and timings, printed and reported
    report = (out / "report.txt").read_text()
    assert printed.index("validation.fit") < printed.index("control variates: ControlVariates")
    assert "4. route: candidates" in printed and "timings (s): " in printed
    assert "mode_and_proxy" in printed.split("timings (s): ", 1)[1].split("\n", 1)[0]
    assert report.index("validation.fit chose") < report.index("the parts by hand")
    fitted = summary["fit"]
    assert fitted["route"] in report and "rows per effective sample" in report
    assert fitted["timings"]["total"] >= fitted["timings"]["chains"] > 0
    assert fitted["chains"] == 2 and fitted["draws"] == 150 and fitted["ess_bulk"] > 0


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


def test_help_imports_neither_numba_nor_scipy():
    """``austerity --help`` is fast: the parser is built without the heavy imports."""
    import subprocess
    import sys

    code = ("import sys\nfrom validation.workflow.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('numba', 'scipy', 'samplers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"

