"""A table of vectors for words read alone, filled as the words are met: the base of a lattice's word readers
(:class:`~seqlab.features.lac.LacWords`, :class:`~seqlab.features.transformer_words.TransformerWords`).

Each distinct word is read once and kept, in float16, in a table that doubles as it fills (at most the lexicon's
words); rows are handed out in the order words are first met, row 0 (padding) zero. A server may encode from
several threads: the table is guarded by a lock, which copies (``copy.deepcopy``, Ray's pickles) make anew.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


class WordTable(ABC):
    """Words -> table rows, reading the new ones with :meth:`_read`; rows -> float32 vectors."""

    def __init__(self, dim: int):
        self._rows: dict[str, int] = {}
        self._table = np.zeros((1024, dim), dtype=np.float16)  # grows by doubling
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle (Ray's workers): a lock is neither
        return {**self.__dict__, "_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @abstractmethod
    def _read(self, words: list[str]) -> np.ndarray:
        """The vectors of ``words`` (distinct, not yet in the table), (n, dim)."""

    def _resize(self, dim: int) -> None:
        """An empty table of ``dim`` columns, where the reader's size is known only once it is loaded."""
        if self._rows:
            raise RuntimeError("the word table is already filled")
        self._table = np.zeros((1024, dim), dtype=np.float16)

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """The table rows of ``words`` (int64, one each), reading the ones not seen before."""
        with self._lock:
            new = list(dict.fromkeys(w for w in words if w not in self._rows))
            if new:
                vectors = self._read(new)  # (n, dim)
                start = len(self._rows) + 1
                while start + len(new) > len(self._table):
                    self._table = np.concatenate([self._table, np.zeros_like(self._table)])
                self._table[start : start + len(new)] = vectors
                self._rows.update((w, start + k) for k, w in enumerate(new))
            return np.fromiter((self._rows[w] for w in words), dtype=np.int64, count=len(words))

    def vectors(self, rows: Tensor) -> Tensor:
        """(...) long rows -> (..., dim) float32."""
        with self._lock:
            return torch.from_numpy(self._table[rows.numpy()].astype(np.float32))
