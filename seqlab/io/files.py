"""Atomic file writes: a temp file (or folder) next to the target, then a rename.

A run killed mid-write leaves the previous version intact, never a half-written file; a folder swap cut between
its two renames is put back by :func:`recover_dir` (``train`` and every command that loads a model folder call
it). A target that cannot be written is a one-line :class:`~seqlab.errors.SeqlabError` naming it, and a file is
never replaced by a folder or a folder by a file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

from seqlab.errors import SeqlabError

log = logging.getLogger("seqlab")

_UMASK = os.umask(0)
os.umask(_UMASK)  # read the process umask once: temp files are created 0600, finished ones get the usual mode


def _cannot_write(err: OSError, path: Path) -> SeqlabError:
    """An OSError met while writing ``path``, as the one line the user sees."""
    return SeqlabError(f"cannot write: {err.strerror or err}", path=path)


def check_writable(path: str | os.PathLike, folder: bool = False) -> None:
    """Refuse, before any work, a target that the atomic writers would fail on or must not replace: a folder
    where a file is written (``folder`` False) or a file where a folder is, and a location whose nearest existing
    folder takes no new file (tried: a temp file is created there and removed, which permission bits alone do not
    tell for root or on read-only and virtual file systems). One-line :class:`SeqlabError`s naming ``path``."""
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        what = "a file" if folder else "a folder"
        raise SeqlabError(
            f"is {what}, not the {'folder' if folder else 'file'} to write: refusing to replace it", path=path
        )
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise SeqlabError(f"cannot write: {parent} is not a folder", path=path)
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise _cannot_write(err, path) from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename. A folder at ``path`` is never replaced; a
    place that cannot be written is a one-line SeqlabError."""
    path = Path(path)
    if path.is_dir():
        raise SeqlabError("is a folder, not a file to write: refusing to replace it", path=path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise _cannot_write(err, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise _cannot_write(err, path) from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


COMPLETE = ".complete"  # marker written into a temp folder once it is filled


def check_folder_kind(path: str | os.PathLike, names: Collection[str]) -> None:
    """Refuse to replace what is at ``path`` unless it is a folder of the kind about to be written: one that
    holds every file in ``names`` (or an empty folder, or nothing). A file, or a folder of something else, is a
    one-line SeqlabError: :func:`atomic_write_dir` would put the old one aside and delete it."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise SeqlabError("is a file, not a folder: refusing to replace it with one", path=path)
    missing = [n for n in names if not (path / n).is_file()]
    if missing and any(path.iterdir()):
        raise SeqlabError(
            f"is a folder of something else (it has no {', '.join(missing)}): refusing to replace "
            f"it; name a new folder or remove this one",
            path=path,
        )


def atomic_write_dir(path: str | os.PathLike, fill: Callable[[Path], None], names: Collection[str] = ()) -> None:
    """Create a folder by calling ``fill(tmp_folder)``, then swap it in place of ``path``.

    The swap is two renames (old folder aside, new one in); a crash between them leaves no ``path`` but
    both complete copies beside it, which :func:`recover_dir` puts back. ``names``: the files that make a folder
    of this kind; a folder at ``path`` without them, or a file, is refused (:func:`check_folder_kind`). A place
    that cannot be written is a one-line SeqlabError."""
    path = Path(path)
    check_folder_kind(path, names)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_interrupted(path)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"))
    except OSError as err:
        raise _cannot_write(err, path) from None
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
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise _cannot_write(err, path) from None
        raise


#: How long :func:`recover_dir` waits for a live writer to finish its swap before putting a copy back itself.
SWAP_WAIT_S = 2.0


def _writer_alive(aside: Path) -> bool:
    """Whether the process that put ``aside`` (``.NAME.PID.old``) there is still running, other than this one:
    it may be between its two renames right now."""
    pid = aside.name.rsplit(".", 2)[-2]
    return pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid))


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this one included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _temp_name(path: Path) -> re.Pattern:
    """The names of :func:`atomic_write_dir`'s temp folders for ``path``: ``.NAME.PID.RANDOM.tmp`` (group 1 the
    writer's PID; without it in folders of older versions), no other folder's."""
    return re.compile(rf"\.{re.escape(path.name)}\.(?:([0-9]+)\.)?[A-Za-z0-9_]+\.tmp")


def _remove_interrupted(path: Path) -> None:
    """Temp folders of ``path`` that a killed writer left half filled (no completion marker, the writer's
    process gone): removed, so that a package or save stopped by a signal leaves nothing behind for long."""
    temp = _temp_name(path)
    for folder in path.parent.iterdir():
        match = temp.fullmatch(folder.name)
        if not match or not match.group(1) or (folder / COMPLETE).exists():
            continue
        if not _pid_alive(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)


def _swap_leftovers(path: Path) -> tuple[list[Path], list[Path]]:
    """The filled temp folders (they hold the completion marker) and the set-aside old folders beside ``path``."""
    temp = _temp_name(path)
    old = re.compile(rf"\.{re.escape(path.name)}\.[0-9]+\.old")
    siblings = [p for p in path.parent.iterdir() if p.is_dir()]
    filled = [p for p in siblings if temp.fullmatch(p.name) and (p / COMPLETE).exists()]
    aside = [p for p in siblings if old.fullmatch(p.name)]
    return filled, aside


def recover_dir(path: str | os.PathLike) -> str | None:
    """After a crash inside :func:`atomic_write_dir`'s swap, put the newest complete copy back at ``path``.

    Returns what was done (for a log line), or None when ``path`` exists or no copy is left. A filled temp
    folder (it holds the completion marker) is newer than a set-aside old one; a temp folder without the
    marker was interrupted while being filled and is never used. Called by ``train`` and by every command that
    loads a model folder (:meth:`seqlab.tagger.Tagger.load`), so whichever comes next after a kill repairs the
    folder. If the writer that set the old copy aside still runs, it is given :data:`SWAP_WAIT_S` to finish its
    own swap first; of two processes recovering at once, one puts the copy back and the other finds it there.
    A copy that cannot be put back (no permission) is a one-line SeqlabError naming it."""
    path = Path(path)
    if path.exists() or not path.parent.is_dir():
        return None
    filled, aside = _swap_leftovers(path)
    if any(_writer_alive(p) for p in aside):
        deadline = time.monotonic() + SWAP_WAIT_S
        while time.monotonic() < deadline and not path.exists():
            time.sleep(0.05)
        if path.exists():
            return None
        filled, aside = _swap_leftovers(path)
    for candidate in (filled, aside):
        if candidate:
            newest = max(candidate, key=lambda p: p.stat().st_mtime)
            try:
                os.replace(newest, path)
            except OSError as err:
                if path.exists():  # another process put a copy back first
                    return None
                raise SeqlabError(
                    f"an interrupted folder swap left a complete copy in {newest.name}, but it cannot "
                    f"be put back: {err.strerror or err}",
                    path=path,
                ) from None
            (path / COMPLETE).unlink(missing_ok=True)
            if candidate is filled:  # the swap would have deleted the old copy next
                for old in aside:
                    if not _writer_alive(old):
                        shutil.rmtree(old, ignore_errors=True)
            return f"restored {path} from {newest.name}, left by an interrupted folder swap"
    return None


def _drop_partial_line(path: Path) -> None:
    """Cut a file that does not end in a newline back to its last complete line (with a warning): the rest is
    a record a kill cut short, and the next record would be glued onto it."""
    with open(path, "rb+") as f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return
        keep, block = 0, 1 << 16
        pos = end
        while pos > 0:  # the last newline, read from the end backwards
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    log.warning(
        "%s: dropped an incomplete last line (%d bytes, cut short by an interrupted write) before appending",
        path,
        end - keep,
    )


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line and flush it to disk (JSON-lines logs). A file whose last line has no newline (a write
    killed part-way) first loses that partial line, with a warning: in a JSON-lines log it is a record that
    cannot be parsed, and the new line would be glued onto it. Dropping, not terminating it, keeps every line of
    the file a whole record."""
    path = Path(path)
    try:
        if path.exists():
            _drop_partial_line(path)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise _cannot_write(err, path) from None
