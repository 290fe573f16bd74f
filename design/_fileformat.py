"""The on-disk format of correction tables: a versioned ``.npz`` archive with a checksum.

An archive holds the table's arrays plus four entries:

``format``   the string ``"austerity-correction"``;
``version``  the integer :data:`FORMAT_VERSION`;
``meta``     a JSON object (the kind of table, sigma, method, build settings, ...);
``sha256``   the SHA-256 of everything above: kind, version, the canonical JSON of ``meta``
             and, for each array in name order, its name, dtype, shape and bytes.

The checksum detects truncation and accidental modification; it is not a signature (whoever
can write the file can recompute it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ._lib.npz import read_npz

FORMAT = "austerity-correction"
FORMAT_VERSION = 1
_RESERVED = ("format", "version", "meta", "sha256")


def _digest(version: int, meta: dict, arrays: dict) -> str:
    sha = hashlib.sha256()
    sha.update(f"{FORMAT}\n{version}\n".encode())
    sha.update(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        sha.update(f"\n{name}:{arr.dtype.str}:{arr.shape}\n".encode())
        sha.update(arr.tobytes())
    return sha.hexdigest()


def write(path, meta: dict, arrays: dict) -> Path:
    """Write ``arrays`` and ``meta`` to ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    if any(k in _RESERVED for k in arrays):
        raise ValueError(f"array names {_RESERVED} are reserved")
    payload = dict(arrays)
    payload["format"] = np.array(FORMAT)
    payload["version"] = np.array(FORMAT_VERSION)
    payload["meta"] = np.array(json.dumps(meta, sort_keys=True))
    payload["sha256"] = np.array(_digest(FORMAT_VERSION, meta, arrays))
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp",
                               dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # mkstemp creates 0600; use the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read(path, kind: str) -> tuple[dict, dict]:
    """Read and verify an archive written by :func:`write` holding a table of ``kind``.

    Raises ``ValueError`` naming the file and the problem when it cannot be read (missing
    entries, truncated or not an npz archive), has another format version, fails the
    checksum or holds another kind of table; ``FileNotFoundError`` when it does not exist.
    """
    path = Path(path)
    where = f"correction table file {str(path)!r}"
    data = read_npz(path, what=where)   # sizes checked before anything is inflated
    missing = [k for k in _RESERVED if k not in data]
    if missing:
        raise ValueError(f"{where} is not an austerity correction table (no {', '.join(missing)})")
    if data["format"].ndim != 0 or str(data["format"]) != FORMAT:
        raise ValueError(f"{where} has format {data['format']!r}, expected {FORMAT!r}")
    try:
        version = int(data["version"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} has an unreadable format version {data['version']!r}") from exc
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{where} has format version {version}; this version of austerity reads "
            f"version {FORMAT_VERSION} (rebuild the table with `austerity correction build`)"
        )
    try:
        meta = json.loads(str(data["meta"]))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} has corrupt metadata: {exc}") from exc
    arrays = {k: v for k, v in data.items() if k not in _RESERVED}
    if str(data["sha256"]) != _digest(version, meta, arrays):
        raise ValueError(f"{where} fails its SHA-256 checksum: the file was modified or corrupted")
    if meta.get("kind") != kind:
        raise ValueError(f"{where} holds a {meta.get('kind')!r}, not a {kind!r}")
    return meta, arrays
