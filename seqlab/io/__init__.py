"""Files: atomic writes and the recovery of a folder swap cut short (:mod:`seqlab.io.files`), and the safe
readers of what users hand over, JSON (:mod:`~seqlab.io.jsonload`) and YAML (:mod:`~seqlab.io.yamlload`), with
nesting limits. The bottom layer: it imports nothing of seqlab's but :mod:`seqlab.errors`.

The names of the former module ``seqlab.io`` are re-exported here (``from seqlab.io import atomic_write_json``).
Its setting ``SWAP_WAIT_S`` is read where it lives: set ``seqlab.io.files.SWAP_WAIT_S``.
"""

from seqlab.io.files import (
    COMPLETE,
    SWAP_WAIT_S,
    append_line,
    atomic_write_bytes,
    atomic_write_dir,
    atomic_write_json,
    atomic_write_text,
    check_folder_kind,
    check_writable,
    recover_dir,
)

__all__ = [
    "COMPLETE",
    "SWAP_WAIT_S",
    "append_line",
    "atomic_write_bytes",
    "atomic_write_dir",
    "atomic_write_json",
    "atomic_write_text",
    "check_folder_kind",
    "check_writable",
    "recover_dir",
]
