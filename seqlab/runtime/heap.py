"""The garbage collector in a process that loads a model once and then tags for a long time.

CPython's full collection walks every container object the process holds. After ``import torch`` and a model
load that is about 240,000 objects, none of which will ever be garbage, and a full collection then took 0.1 s
(about one per 2,000 sentences tagged): 15% of a bulk-tagging pass (BENCHMARKS.md, ninth session).
:func:`freeze_loaded` collects once and moves everything alive into the permanent generation, which later
collections skip; what is allocated afterwards is collected as before. For processes that serve or tag until
they exit (``seqlab serve``, its workers, ``seqlab predict`` and its workers), never for a library caller's
process, whose heap is not ours to freeze."""

from __future__ import annotations

import gc


def freeze_loaded() -> None:
    """Collect the garbage there is now, then exempt every surviving object from later collections."""
    gc.collect()
    gc.freeze()
