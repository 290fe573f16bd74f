"""The table file format: round trips, and truncated / tampered / wrong-version files."""

import json
import pickle
import zipfile

import numpy as np
import pytest

from design import _fileformat, correction


@pytest.fixture
def small_table():
    x = np.linspace(-3, 3, 7)
    d = np.array([0.0, 0.1, 0.2, 0.3, 0.2, 0.2, 0.0])
    d /= np.trapezoid(d, x)
    # a crude hand-made table: its honest error (0.054, measured again on loading) is stored
    return correction.CorrectionTable(x, d, sigma=0.9, linf_error=0.06, method="custom",
                                      settings={"note": "hand made"}, diagnostics={"k": 1})


def rewrite(path, out, **changes):
    """Copy the npz at ``path`` to ``out`` replacing some entries (keeping the others)."""
    with np.load(path, allow_pickle=False) as npz:
        data = {k: npz[k] for k in npz.files}
    data.update(changes)
    with open(out, "wb") as fh:
        np.savez(fh, **data)
    return out


def test_round_trip_is_exact(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    back = correction.CorrectionTable.load(path)
    assert np.array_equal(back.x, small_table.x)
    assert np.array_equal(back.density, small_table.density)
    assert (back.sigma, back.linf_error, back.method) == (0.9, 0.06, "custom")
    assert dict(back.settings) == {"note": "hand made"} and dict(back.diagnostics) == {"k": 1}


def test_tables_pickle_for_worker_processes(small_table):
    for table in (small_table, correction.default_skew()):
        back = pickle.loads(pickle.dumps(table))
        assert type(back) is type(table) and repr(back) == repr(table)
        assert np.array_equal(back.density, table.density)
        assert dict(back.settings) == dict(table.settings)


def test_path_without_suffix_is_kept(tmp_path, small_table):
    path = tmp_path / "table"
    small_table.save(path)
    assert path.exists() and correction.CorrectionTable.load(path).sigma == 0.9


def test_default_tables_round_trip(tmp_path):
    for table, cls in ((correction.default(), correction.CorrectionTable),
                       (correction.default_skew(), correction.SkewCorrectionTable)):
        path = tmp_path / f"{cls.__name__}.npz"
        table.save(path)
        back = cls.load(path)
        assert np.array_equal(back.density, table.density)
        assert np.array_equal(back.linf_error, table.linf_error)


def test_truncated_file_is_refused(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    blob = path.read_bytes()
    for cut in (len(blob) // 2, 40, 0):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(blob[:cut])
        with pytest.raises(ValueError, match=rf"cut{cut}\.npz.*unreadable"):
            correction.CorrectionTable.load(bad)


def test_tampered_array_fails_the_checksum(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    with np.load(path) as npz:
        density = npz["density"].copy()
    density[[2, 3]] = density[[3, 2]]                 # still a valid density
    bad = rewrite(path, tmp_path / "bad.npz", density=density)
    with pytest.raises(ValueError, match=r"bad\.npz.*SHA-256 checksum"):
        correction.CorrectionTable.load(bad)


def test_tampered_metadata_fails_the_checksum(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    with np.load(path) as npz:
        meta = json.loads(str(npz["meta"]))
    meta["linf_error"] = 1e-9                          # a flattering lie
    bad = rewrite(path, tmp_path / "bad.npz", meta=np.array(json.dumps(meta)))
    with pytest.raises(ValueError, match="checksum"):
        correction.CorrectionTable.load(bad)


def test_wrong_version_is_refused(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    bad = rewrite(path, tmp_path / "v2.npz", version=np.array(_fileformat.FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match=r"v2\.npz.*format version 2.*reads version 1"):
        correction.CorrectionTable.load(bad)


def test_foreign_files_are_refused(tmp_path, small_table):
    text = tmp_path / "notes.npz"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match="unreadable"):
        correction.CorrectionTable.load(text)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(ValueError, match="not an austerity correction table"):
        correction.CorrectionTable.load(other)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        correction.CorrectionTable.load(tmp_path / "missing.npz")


def test_kind_mismatch_is_refused(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    with pytest.raises(ValueError, match="holds a 'CorrectionTable', not a 'SkewCorrectionTable'"):
        correction.SkewCorrectionTable.load(path)


def test_archive_members_are_plain_arrays(tmp_path, small_table):
    path = tmp_path / "t.npz"
    small_table.save(path)
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist())
    assert names == sorted(f"{k}.npy" for k in
                           ("x", "density", "format", "version", "meta", "sha256"))
