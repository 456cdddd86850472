"""Atomic file writes: a temp file (or folder) next to the target, then a rename.

A run killed mid-write leaves the previous version intact, never a half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_UMASK = os.umask(0)
os.umask(_UMASK)  # read the process umask once: temp files are created 0600, finished ones get the usual mode


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


COMPLETE = ".complete"  # marker written into a temp folder once it is filled


def atomic_write_dir(path: str | os.PathLike, fill: Callable[[Path], None]) -> None:
    """Create a folder by calling ``fill(tmp_folder)``, then swap it in place of ``path``.

    The swap is two renames (old folder aside, new one in); a crash between them leaves no ``path`` but
    both complete copies beside it, which :func:`recover_dir` puts back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        fill(tmp)
        (tmp / COMPLETE).write_bytes(b"")
        os.chmod(tmp, 0o777 & ~_UMASK)
        if path.exists():
            old = path.with_name(f".{path.name}.{os.getpid()}.old")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        (path / COMPLETE).unlink(missing_ok=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def recover_dir(path: str | os.PathLike) -> str | None:
    """After a crash inside :func:`atomic_write_dir`'s swap, put the newest complete copy back at ``path``.

    Returns what was done (for a log line), or None when ``path`` exists or no copy is left. A filled temp
    folder (it holds the completion marker) is newer than a set-aside old one; a temp folder without the
    marker was interrupted while being filled and is never used."""
    path = Path(path)
    if path.exists() or not path.parent.is_dir():
        return None
    siblings = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.") and p.is_dir()]
    filled = [p for p in siblings if p.name.endswith(".tmp") and (p / COMPLETE).exists()]
    aside = [p for p in siblings if p.name.endswith(".old")]
    for candidate in (filled, aside):
        if candidate:
            newest = max(candidate, key=lambda p: p.stat().st_mtime)
            os.replace(newest, path)
            (path / COMPLETE).unlink(missing_ok=True)
            return f"restored {path} from {newest.name}, left by an interrupted folder swap"
    return None


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line and flush it to disk (JSON-lines logs)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
        f.flush()
        os.fsync(f.fileno())
