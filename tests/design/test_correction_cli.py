"""The ``austerity correction`` subcommands, run through their parser."""

import argparse
import io

import pytest

from design import correction
from validation.workflow.correction_cli import add_correction_parser, run_correction


def parse(argv):
    parser = argparse.ArgumentParser(prog="austerity")
    add_correction_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_build_writes_a_loadable_table(tmp_path):
    out = tmp_path / "t09.npz"
    args = parse(["correction", "build", "--sigma", "0.9", "--spacing", "0.1",
                  "--out", str(out)])
    assert args.run is run_correction
    stdout = io.StringIO()
    assert run_correction(args, stdout=stdout) == 0
    table = correction.CorrectionTable.load(out)
    assert table.sigma == 0.9 and table.method == "lp" and table.linf_error < 1e-8
    assert str(out) in stdout.getvalue()


def test_build_ridge_with_paper_settings(tmp_path):
    out = tmp_path / "ridge.npz"
    args = parse(["correction", "build", "--method", "ridge", "--spacing", "0.01",
                  "--lam", "10", "--out", str(out)])
    assert run_correction(args, stdout=io.StringIO()) == 0
    table = correction.CorrectionTable.load(out)
    assert table.method == "ridge" and table.settings["lam"] == 10.0
    assert table.diagnostics["paper_linf"] == pytest.approx(1.3e-3, abs=5e-5)  # Table 3


def test_info_describes_a_file(tmp_path):
    out = tmp_path / "t.npz"
    correction.default().save(out)
    stdout = io.StringIO()
    assert run_correction(parse(["correction", "info", str(out)]), stdout=stdout) == 0
    text = stdout.getvalue()
    assert "CorrectionTable(sigma=1" in text and "settings.spacing = 0.05" in text


@pytest.mark.parametrize("argv, message", [
    (["correction", "build", "--sigma", "2.5", "--out", "x.npz"], "sigma must be in"),
    (["correction", "build", "--lam", "3", "--out", "x.npz"], "lam applies only"),
    (["correction", "info", "missing.npz"], "does not exist"),
])
def test_errors_are_reported_with_status_1(tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    stderr = io.StringIO()
    assert run_correction(parse(argv), stdout=io.StringIO(), stderr=stderr) == 1
    assert message in stderr.getvalue()
    assert not (tmp_path / "x.npz").exists()
