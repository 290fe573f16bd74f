"""Reliability cases 3-7 of issue 16: forged and hostile files, terminal escapes in table
metadata, a bad TrialChain version, and the demo's argument errors; all from the public API
(files are forged the way an attacker would: recomputing the checksum)."""

import io
import tracemalloc
import zipfile

import numpy as np
import pytest

from design import TrialChain, correction
from validation.workflow.cli import main

FORMAT = "austerity-correction"


def forge_table(path, table, **meta_changes):
    """Write ``table``'s arrays with changed metadata and a recomputed checksum."""
    from design import _fileformat   # the writer a forger would reuse

    meta = {"kind": "CorrectionTable", "sigma": table.sigma, "linf_error": table.linf_error,
            "method": table.method, "settings": dict(table.settings),
            "diagnostics": dict(table.diagnostics)}
    meta.update(meta_changes)
    _fileformat.write(path, meta, {"x": table.x, "density": table.density})


# --- case 3: a forged table is refused ---------------------------------------------------------


def test_a_table_relabelled_for_another_sigma_is_refused(tmp_path):
    honest = tmp_path / "honest.npz"
    correction.default().save(honest)
    assert correction.CorrectionTable.load(honest).linf_error < 1e-7
    forged = tmp_path / "forged.npz"
    forge_table(forged, correction.default(), sigma=0.5)   # sigma = 1 density, labelled 0.5
    with pytest.raises(ValueError, match=r"claims linf_error = 5.3e-08, but its table measures "
                                         r"0.0\d+"):
        correction.CorrectionTable.load(forged)


def test_an_understated_error_is_refused(tmp_path):
    table = correction.build(1.0, spacing=0.2)
    forged = tmp_path / "forged.npz"
    forge_table(forged, table, linf_error=table.linf_error / 100)
    with pytest.raises(ValueError, match="claims linf_error"):
        correction.CorrectionTable.load(forged)


# --- case 4: declared sizes are checked before reading -----------------------------------------


def _rewrite_member(src, dst, name, payload: bytes, *, compress=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", compress) as zout:
        for info in zin.infolist():
            data = payload if info.filename == name else zin.read(info)
            zout.writestr(info.filename, data)


def _npy_bytes(arr, shape=None):
    buf = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(arr)
    if shape is not None:
        header["shape"] = shape
    np.lib.format.write_array_header_1_0(buf, header)
    buf.write(arr.tobytes())
    return buf.getvalue()


def test_an_array_header_claiming_1e11_entries_is_refused(tmp_path):
    good = tmp_path / "good.npz"
    correction.default().save(good)
    bad = tmp_path / "huge.npz"
    density = correction.default().density
    _rewrite_member(good, bad, "density.npy", _npy_bytes(density, shape=(10**11,)))
    with pytest.raises(ValueError, match=r"'density' declares shape \(100000000000,\)"):
        correction.CorrectionTable.load(bad)


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path):
    good = tmp_path / "good.npz"
    correction.default().save(good)
    bomb = tmp_path / "bomb.npz"
    zeros = np.zeros(300 << 17)                 # 300 MiB of float64 zeros, ~0.3 MB deflated
    _rewrite_member(good, bomb, "density.npy", _npy_bytes(zeros))
    assert bomb.stat().st_size < 2 << 20
    del zeros
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="declares .* bytes of arrays uncompressed"):
            correction.CorrectionTable.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20   # nothing close to the 300 MiB was allocated


def test_trial_chain_files_get_the_same_checks(tmp_path):
    good = tmp_path / "trial.npz"
    TrialChain(mu=[1e-5, 2e-5], sigma=[0.01, 0.02], c0=[0.0, 0.0], N=1000).save(good)
    bad = tmp_path / "bad.npz"
    _rewrite_member(good, bad, "mu.npy", _npy_bytes(np.zeros(2), shape=(10**11,)))
    with pytest.raises(ValueError, match=r"bad.npz'?: array 'mu' declares shape"):
        TrialChain.load(bad)


# --- case 5: `austerity correction info` prints only printable characters ----------------------


def test_correction_info_escapes_terminal_sequences(tmp_path, capsys):
    table = correction.build(1.0, spacing=0.2)
    path = tmp_path / "t.npz"
    forge_table(path, table, settings={"note\x1b[2J": "\x1b[31mred"},
                diagnostics={"title": "\x1b]0;owned\x07"})
    assert main(["correction", "info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x07" not in text
    assert "settings.note\\x1b[2J = \\x1b[31mred" in text
    assert "diagnostics.title = \\x1b]0;owned\\x07" in text


# --- case 6: TrialChain.load with a bad version names the file ----------------------------------


def test_trial_chain_with_a_non_integer_version_names_the_file(tmp_path):
    path = tmp_path / "odd-version.npz"
    np.savez(path, format=np.array("austerity.TrialChain"), version=np.array("one"),
             mu=np.zeros(1), sigma=np.ones(1), c0=np.zeros(1), N=np.array(10))
    with pytest.raises(ValueError, match=r"odd-version.npz has an unreadable TrialChain file "
                                         r"version"):
        TrialChain.load(path)


# --- case 7: the demo's bad arguments are one-line errors ---------------------------------------


def test_demo_with_too_few_rows_is_a_one_line_error():
    with pytest.raises(SystemExit) as info:
        main(["demo", "--rows", "3"])
    message = str(info.value.code)
    assert message.startswith("austerity demo: --rows must be >= 1000, got 3")
    assert "\n" not in message


def test_demo_out_on_an_existing_file_is_a_one_line_error(tmp_path):
    existing = tmp_path / "report.txt"
    existing.write_text("keep me")
    with pytest.raises(SystemExit) as info:
        main(["demo", "--rows", "2000", "--out", str(existing)])
    message = str(info.value.code)
    assert "exists and is not a folder" in message and "\n" not in message
    assert existing.read_text() == "keep me"


def test_the_shipped_tables_meet_their_claims():
    """default() and default_skew() skip the check (the files ship with the code): run it here."""
    from importlib import resources

    data = resources.files("design") / "data"
    for name in ("correction_sigma1.npz",):
        assert correction.CorrectionTable.load(data / name, verify=True).linf_error < 1e-7
    skew = correction.SkewCorrectionTable.load(data / "skew_correction_sigma1.npz", verify=True)
    assert skew.linf_error.max() < 1e-3
