"""Files written whole or not at all: an error, a full disk, a kill or a power cut leaves
the old file (or none), never half of the new one.

Every writer here puts the data in a temporary file in the target's folder (so the
rename never crosses file systems), flushes and fsyncs it, renames it over the target
and fsyncs the folder, so that the rename is on disk too where the system allows
syncing a folder. :func:`replace_folder` does the same for a folder written under a
temporary name. Temporary names are ``.NAME.*.tmp``: a killed process leaves only
those behind.

:func:`json_text` is the JSON these files (and every ``--json`` output) hold.

Standard library only: every command writes files, the ones that run without
TensorFlow too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import pathlib
import secrets
import stat
from typing import IO, Any, Iterator

from keras_nmt.core import faults


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike, mode: str = "w", **options: Any) -> Iterator[IO]:
    """A new file (``open``'s ``mode`` and ``options``) that replaces ``path`` when the
    block ends: an error or a crash before then leaves the old file or none, never half
    a file. For output written as it is made (one line per sentence of a corpus)."""
    path = pathlib.Path(path)
    fd, tmp = _temporary_file(path)
    try:
        with os.fdopen(fd, mode, **options) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        faults.point(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _sync_folder(path.parent)


def _temporary_file(path: pathlib.Path) -> tuple[int, str]:
    """A new temporary file next to ``path``, open for writing, with the permissions
    ``open(path, "w")`` would leave: an existing file's, else 0o666 less the umask (the
    system applies it to the mode given here; mkstemp's files would be private)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.chmod(tmp, mode)
            except OSError:
                os.close(fd)
                os.unlink(tmp)
                raise
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def write_bytes_atomic(path: str | os.PathLike, content: bytes) -> None:
    """Write a file so that a crash leaves either the old file or the new one, never half."""
    with open_atomic(path, "wb") as f:
        f.write(content)


def write_text_atomic(path: str | os.PathLike, content: str) -> None:
    """Write a text file (UTF-8) so that a crash leaves either the old file or the new one,
    never half."""
    write_bytes_atomic(path, content.encode("utf-8"))


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps`` for the files (and --json output) the package writes: a non-finite
    float, which JSON has no value for, becomes null. Python's json would write ``NaN``,
    which strict parsers (JavaScript's, jq, Go's) refuse; ``allow_nan=False`` makes any
    that slipped past an error here rather than in a reader."""
    return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float):  # numpy's float64 too
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def write_json_atomic(path: str | os.PathLike, value: Any) -> None:
    """Write JSON (:func:`json_text`, indented, keys sorted) so that a crash leaves either
    the old file or the new one, never half."""
    write_text_atomic(path, json_text(value, indent=2, sort_keys=True) + "\n")


def replace_folder(work: pathlib.Path, folder: pathlib.Path, aside: pathlib.Path) -> None:
    """Make ``work``, a finished folder of plain files next to ``folder``, be ``folder``:
    its files are synced first, so the rename never publishes data still in memory. An
    existing ``folder`` is renamed to ``aside`` first (a rename replaces only an empty
    folder), for the caller to remove."""
    for path in work.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    _sync_folder(work)
    if folder.exists():
        os.replace(folder, aside)
    os.replace(work, folder)
    _sync_folder(folder.parent)


def _sync_folder(folder: pathlib.Path) -> None:
    # A rename is durable only once the folder that holds the name is synced. Windows
    # cannot open a folder (nor needs to); some file systems refuse to sync one.
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
