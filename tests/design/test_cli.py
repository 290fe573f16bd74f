"""The ``design`` subcommand: parser and run_design."""

import argparse

import pytest

from design import TrialChain
from validation.workflow.design_cli import add_design_parser, run_design


def _parse(argv):
    parser = argparse.ArgumentParser(prog="austerity")
    add_design_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


@pytest.fixture
def trial_file(tmp_path):
    path = tmp_path / "trial.npz"
    TrialChain(mu=[1e-4, -2e-4, 0.0], sigma=[0.01, 0.02, 0.015], c0=[0.0, 0.0, 0.0],
               N=10_000).save(path)
    return path


def test_average_design_from_a_trial_file(trial_file, capsys):
    args = _parse(["design", "--trial", str(trial_file), "--tolerance", "0.02",
                   "--m-grid", "100", "500", "--epsilon-grid", "0.01", "0.1"])
    assert args.run is run_design
    assert run_design(args) == 0
    out = capsys.readouterr().out
    assert "average design over 3 trial pairs" in out and "N = 10,000" in out


def test_worst_case_from_N_or_from_the_trial(trial_file, capsys):
    assert run_design(_parse(["design", "--N", "10000", "--tolerance", "0.05",
                              "--epsilon-grid", "0.001"])) == 0
    by_n = capsys.readouterr().out
    assert "worst-case design" in by_n
    assert run_design(_parse(["design", "--trial", str(trial_file), "--method", "worst-case",
                              "--tolerance", "0.05", "--epsilon-grid", "0.001"])) == 0
    assert capsys.readouterr().out == by_n


@pytest.mark.parametrize("argv, message", [
    (["design", "--N", "10000", "--tolerance", "0.7"], "tolerance must be in (0, 0.5)"),
    (["design"], "give exactly one of --trial FILE and --N N"),
    (["design", "--N", "10000", "--method", "average"], "the average design needs --trial"),
    (["design", "--trial", "missing.npz"], "No such file"),
])
def test_bad_arguments_exit_with_status_2(argv, message, capsys):
    assert run_design(_parse(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("austerity design: error: ") and message in err


def test_infeasible_exits_with_status_1(capsys):
    argv = ["design", "--N", "10000", "--tolerance", "0.01", "--m-grid", "100",
            "--epsilon-grid", "0.1"]
    assert run_design(_parse(argv)) == 1
    assert "Nearest feasible setting found: m = 100" in capsys.readouterr().err


def test_rejects_a_file_that_is_not_a_trial_chain(tmp_path, capsys):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"junk")
    assert run_design(_parse(["design", "--trial", str(path)])) == 2
    assert "not a readable TrialChain file" in capsys.readouterr().err
