"""Atomic writes: a failure mid-write leaves the previous version untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seqlab.io.files import COMPLETE, atomic_write_dir, atomic_write_text


def test_failed_dir_write_keeps_old_version(tmp_path):
    target = tmp_path / "model"
    atomic_write_dir(target, lambda d: (d / "a.txt").write_text("v1"))

    def broken(d):
        (d / "a.txt").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write_dir(target, broken)
    assert (target / "a.txt").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp folders left behind
    atomic_write_dir(target, lambda d: (d / "a.txt").write_text("v2"))
    assert (target / "a.txt").read_text() == "v2"


def test_a_writer_killed_while_filling_leaves_nothing_for_the_next_write(tmp_path):
    """A writer killed by a signal runs no clean-up: its half-filled temp folder is removed by the next write to the
    same place once its process is gone; a live writer's, a filled one (a recovery copy) and an unrelated folder
    stay."""
    import subprocess
    import sys

    target = tmp_path / "model"
    atomic_write_dir(target, lambda d: (d / "a.txt").write_text("v1"))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)  # a process that has ended
    (tmp_path / f".model.{dead}.abc123.tmp").mkdir()  # killed mid-fill
    (tmp_path / f".model.{os.getpid()}.live12.tmp").mkdir()  # a writer still running (this process)
    filled = tmp_path / f".model.{dead}.full12.tmp"
    filled.mkdir()
    (filled / COMPLETE).write_bytes(b"")
    (tmp_path / ".other.999999.x.tmp").mkdir()  # another folder's
    atomic_write_dir(target, lambda d: (d / "a.txt").write_text("v2"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model", f".model.{os.getpid()}.live12.tmp", filled.name, ".other.999999.x.tmp"]
    )


def test_atomic_text_replaces(tmp_path):
    f = tmp_path / "x.json"
    atomic_write_text(f, "1")
    atomic_write_text(f, "2")
    assert f.read_text() == "2" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


@pytest.mark.parametrize(
    "before,after",
    [
        ('{"epoch": 1}\n{"epo', '{"epoch": 1}\n'),  # a record cut mid-line by a kill: dropped
        ('{"epo', ""),  # the only line cut short
        ('{"epoch": 1}\n', '{"epoch": 1}\n'),  # whole lines: untouched
        ("", ""),
    ],
)
def test_append_line_drops_a_partial_last_line_first(tmp_path, caplog, before, after):
    from seqlab.io.files import append_line

    log = tmp_path / "log.jsonl"
    log.write_text(before, encoding="utf-8")
    append_line(log, '{"epoch": 2}')
    assert log.read_text(encoding="utf-8") == after + '{"epoch": 2}\n'
    assert ("incomplete last line" in caplog.text) == (not before.endswith("\n") and bool(before))


def test_append_line_finds_the_last_newline_far_back(tmp_path):
    from seqlab.io.files import append_line

    log = tmp_path / "log.jsonl"
    log.write_bytes(b"a\n" + b"x" * 200_000)  # a partial line longer than one read block
    append_line(log, "b")
    assert log.read_bytes() == b"a\nb\n"


def test_writers_never_put_a_folder_for_a_file_or_a_file_for_a_folder(tmp_path):
    from seqlab.errors import SeqlabError
    from seqlab.io.files import atomic_write_bytes, atomic_write_dir

    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    with pytest.raises(SeqlabError, match="is a file, not a folder"):
        atomic_write_dir(mine, lambda d: (d / "a.txt").write_text("v1"))
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    with pytest.raises(SeqlabError, match="is a folder"):
        atomic_write_bytes(folder, b"x")
    with pytest.raises(SeqlabError, match=r"folder of something else \(it has no a.txt\)"):
        atomic_write_dir(folder, lambda d: (d / "a.txt").write_text("v1"), names=["a.txt"])
    assert mine.read_text() == "mine" and (folder / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "notes.txt"]
    atomic_write_dir(tmp_path / "empty", lambda d: None)
    atomic_write_dir(tmp_path / "empty", lambda d: (d / "a.txt").write_text("v1"), names=["a.txt"])  # empty: fine


def test_an_unwritable_place_is_one_line(tmp_path):
    from seqlab.errors import SeqlabError
    from seqlab.io.files import atomic_write_bytes, atomic_write_dir, check_writable

    for write in (lambda p: atomic_write_bytes(p, b"x"), lambda p: atomic_write_dir(p, lambda d: None), check_writable):
        with pytest.raises(SeqlabError, match="cannot write"):
            write(Path("/proc/seqlab-test"))


def test_recover_dir_waits_for_a_live_writer_and_two_readers_do_not_collide(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    from seqlab.io import files as io

    target = tmp_path / "model"
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        aside = tmp_path / f".model.{writer.pid}.old"
        aside.mkdir()
        monkeypatch.setattr(io, "SWAP_WAIT_S", 0.3)
        assert io.recover_dir(target) is not None  # the writer never finished: the copy is put back after the wait
        assert target.is_dir() and not aside.exists()
    finally:
        writer.kill()
        writer.wait()
    os.rename(target, tmp_path / ".model.123_abc.tmp")
    (tmp_path / ".model.123_abc.tmp" / io.COMPLETE).write_bytes(b"")
    real = os.replace

    def racing(src, dst):  # another process puts the copy back first
        real(src, dst)
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(io.os, "replace", racing)
    assert io.recover_dir(target) is None and target.is_dir()
