"""``freeze_loaded``: what a long-lived tagging process does with its garbage collector after loading."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

from seqlab.runtime.heap import freeze_loaded

ROOT = Path(__file__).resolve().parents[1]


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the collector frees it


def test_garbage_before_is_freed_not_frozen_and_garbage_after_is_still_collected():
    before = Node()
    gone_before = weakref.ref(before)
    del before
    try:
        freeze_loaded()
        assert gone_before() is None  # collected first, not kept forever in the permanent generation
        assert gc.get_freeze_count() > 0
        after = Node()
        gone_after = weakref.ref(after)
        del after
        gc.collect()
        assert gone_after() is None  # the collector still sees what is allocated later
    finally:
        gc.unfreeze()


def test_predict_freezes_its_heap_after_loading(shared_tiny_model, tmp_path):
    data, model = shared_tiny_model
    script = (
        "import gc, sys\nfrom seqlab.cli import main\ncode = main(sys.argv[1:])\n"
        "print('frozen', gc.get_freeze_count(), file=sys.stderr)\nsys.exit(code)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", script, "-q", "predict", str(model), str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    frozen = int(done.stderr.split("frozen")[-1])
    assert frozen > 10_000  # PyTorch and the model: tens of thousands of objects out of the collector's walks
    assert done.stdout.strip()  # and it tagged
