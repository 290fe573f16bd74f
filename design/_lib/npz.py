"""Reading ``.npz`` archives whose sizes are checked before anything is decompressed.

``numpy.load`` trusts an archive: a member whose ``.npy`` header claims 10^11 entries makes
it allocate 800 GB (MemoryError), and a small zip bomb is inflated in full before any
checksum can refuse it. :func:`read_npz` first reads the zip directory and each member's
``.npy`` header (a few hundred bytes), and refuses the file, naming it, if

* the declared uncompressed size of the members exceeds ``max_bytes`` in total,
* a member's header declares more data than the member holds (or a different amount),
* a member holds objects (pickles) or is not an ``.npy`` array;

only then are the arrays read, each stream limited to its declared size.
"""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

__all__ = ["read_npz", "DEFAULT_MAX_BYTES"]

#: Largest total uncompressed size accepted by default (the toolkit's tables and trial
#: chains are a few MB at most).
DEFAULT_MAX_BYTES = 256 << 20


def _header(fh):
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    raise ValueError(f"unsupported .npy format version {version}")


def read_npz(path, *, what: str, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """The arrays of the ``.npz`` archive ``path``, after checking its declared sizes.

    ``what`` names the file in messages (e.g. ``"correction table file 'x.npz'"``).
    Raises ``FileNotFoundError`` if it does not exist and ``ValueError`` naming the file for
    anything else (not an archive, truncated, oversized, inconsistent headers, objects).

    Examples
    --------
    >>> import io, os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "a.npz")
    ...     np.savez(path, x=np.arange(3.0))
    ...     read_npz(path, what="test file")["x"]
    array([0., 1., 2.])
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} does not exist")
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i for i in zf.infolist() if not i.is_dir()]
            total = sum(i.file_size for i in members)
            if total > max_bytes:
                raise ValueError(f"{what} declares {total:,} bytes of arrays uncompressed, more "
                                 f"than the {max_bytes:,} accepted (a corrupt or hostile file)")
            out = {}
            for info in members:
                name = info.filename
                if not name.endswith(".npy"):
                    raise ValueError(f"{what} holds {name!r}, which is not an .npy array")
                with zf.open(info) as fh:
                    shape, fortran, dtype = _header(fh)
                    if dtype.hasobject:
                        raise ValueError(f"{what}: array {name[:-4]!r} holds Python objects, "
                                         "which are never loaded")
                    count = int(np.prod(shape, dtype=object))
                    declared = count * dtype.itemsize
                    room = info.file_size - fh.tell()
                    if declared != room:
                        raise ValueError(
                            f"{what}: array {name[:-4]!r} declares shape {shape} of {dtype} "
                            f"({declared:,} bytes) but its entry holds {room:,} bytes")
                    data = fh.read(room)
                if len(data) != room:
                    raise ValueError(f"{what}: array {name[:-4]!r} is truncated")
                arr = np.frombuffer(data, dtype=dtype, count=count)
                out[name[:-4]] = arr.reshape(shape, order="F" if fortran else "C").copy()
            return out
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:
        raise ValueError(f"{what} is unreadable (truncated, or not an .npz archive): {exc}"
                         ) from exc
