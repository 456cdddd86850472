"""Files: atomic writes and folder swaps (:mod:`seqlab.io.files`), safe JSON and YAML readers.

The names of the former module ``seqlab.io`` are re-exported here (``from seqlab.io import atomic_write_json``).
"""

from seqlab.io.files import (COMPLETE, SWAP_WAIT_S, append_line, atomic_write_bytes, atomic_write_dir,
                             atomic_write_json, atomic_write_text, check_folder_kind, check_writable, recover_dir)

__all__ = ["COMPLETE", "SWAP_WAIT_S", "append_line", "atomic_write_bytes", "atomic_write_dir", "atomic_write_json",
           "atomic_write_text", "check_folder_kind", "check_writable", "recover_dir"]
