"""Atomic writes: a failure mid-write leaves the previous version untouched."""

from __future__ import annotations

import pytest

from seqlab.io import atomic_write_dir, atomic_write_text


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


def test_atomic_text_replaces(tmp_path):
    f = tmp_path / "x.json"
    atomic_write_text(f, "1")
    atomic_write_text(f, "2")
    assert f.read_text() == "2" and [p.name for p in tmp_path.iterdir()] == ["x.json"]
