"""Token types: each distinct token string a tagger has seen at inference, numbered once, so that a batch's
featurizers look its tokens up once between them instead of once each.

Inference collates a batch straight from its tokens (:func:`seqlab.data.batching.collate_sentences`). Each
featurizer used to find every token in a memo of its own (a dict lookup per token per featurizer, then a list of
Python values turned into an array): on the CoNLL-2000 test set at batch 64, the words, casing and chars
featurizers took 33 ms a pass on one thread, all of it holding Python's lock, so that the two batches tagged side
by side (:func:`seqlab.runtime.devices.run_concurrently`) queued behind each other for it. Now :class:`TokenTypes` maps
each token of the batch to a type id with one dict lookup (:class:`TypedTokens`), and each featurizer keeps its
value of every type in an array (:class:`TypeValues`, one int per type; the chars featurizer keeps each type's
character ids), computed once per type the first time a batch holds it, and gathers the batch's values with one
array index. The values are the ones the featurizer's own memo gives, so the tensors are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from seqlab.data.sentence import Sentence


class TokenTypes:
    """Distinct token strings, numbered 0, 1, 2, ... in the order first seen; at most ``capacity`` of them (a
    long-running service sees an open vocabulary: past it, batches with new tokens are collated without
    types). Numbers never change, so featurizers may keep arrays indexed by them. Safe to use from several
    threads: new strings are numbered under a lock."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._ids: dict[str, int] = {}
        self.strings: list[str] = []  # type id -> its string
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.strings)

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle: a lock is neither; the copy starts empty
        return {"capacity": self.capacity}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["capacity"])

    def ids(self, tokens: list[str]) -> np.ndarray | None:
        """(tokens,) int64 type id of each token, new strings numbered first; None when they do not fit."""
        known = self._ids
        try:
            return _looked_up(known, tokens)  # the usual case: every token known
        except KeyError:
            pass
        new = [t for t in dict.fromkeys(tokens) if t not in known]  # distinct, in order of appearance
        with self._lock:
            new = [t for t in new if t not in known]  # another thread may have numbered some meanwhile
            if len(self.strings) + len(new) > self.capacity:
                return None
            for t in new:  # the string before its id: a reader that finds the id finds the string
                self.strings.append(t)
                known[t] = len(self.strings) - 1
        return _looked_up(known, tokens)


def _looked_up(known: dict[str, int], tokens: list[str]) -> np.ndarray:
    """(tokens,) int64 ``known[t]`` of each token (KeyError if one is missing). ``itemgetter`` looks them all up in
    one C loop: 4.8 ms for the 47,377 tokens of CoNLL-2000 test, against 6.3 ms for ``map`` and 9 ms for a list
    comprehension (most of it the dict's memory traffic)."""
    if len(tokens) < 2:  # itemgetter of one key returns the value itself, not a tuple
        return np.array([known[t] for t in tokens], dtype=np.int64)
    return np.array(itemgetter(*tokens)(known), dtype=np.int64)


@dataclass
class TypedTokens:
    """A batch's tokens, sentence after sentence, with their type ids: what a featurizer's
    :meth:`~seqlab.features.base.Featurizer.collate_types` gets."""

    sentences: Sequence[Sentence]
    tokens: list[str]  # (tokens,) every token of the batch, sentence after sentence
    lengths: np.ndarray  # (batch,) each sentence's tokens
    ids: np.ndarray  # (tokens,) int64 type id of each token in ``types``
    types: TokenTypes
    needed: int  # types 0..needed-1 hold every id of the batch: what featurizers must have values for

    @classmethod
    def of(
        cls, sentences: Sequence[Sentence], types: TokenTypes, lengths: np.ndarray | None = None
    ) -> TypedTokens | None:
        """The sentences' tokens typed by ``types`` (``lengths``: each sentence's tokens, if the caller has them);
        None when their new strings do not fit in it."""
        tokens = list(chain.from_iterable(s.tokens for s in sentences))
        ids = types.ids(tokens)
        if ids is None:
            return None
        if lengths is None:
            lengths = np.fromiter((len(s.tokens) for s in sentences), dtype=np.int64, count=len(sentences))
        return cls(sentences, tokens, lengths, ids, types, int(ids.max()) + 1 if len(ids) else 0)

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """The batch's distinct type ids in order of first appearance (distinct,), and each token's position
        among them (tokens,)."""
        first, rows = first_appearances(self.ids)
        return self.ids[first], rows


def first_appearances(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """keys (n,) -> the position of each distinct key's first appearance, in order of appearance (distinct,), and
    each key's position among the distinct ones (n,)."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)  # (distinct,) sorted position -> order of first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.reshape(-1)]


class PerType:
    """A featurizer's values of the types of one :class:`TokenTypes`, filled in as batches bring new types.
    Subclasses store the values (:meth:`_append`, :meth:`_clear`). Values depend only on the type's string and
    the featurizer's state: the featurizer makes a new one when its state changes (a new vocabulary).
    ``compute(strings)`` gives the values of new types, in the form the subclass stores."""

    def __init__(self, compute: Callable):
        self.compute = compute
        self._types: TokenTypes | None = None  # whose types the values are of
        self.filled = 0  # types 0..filled-1 have their values
        self._lock = threading.Lock()
        self._clear()

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle: without the values and the lock
        return {"compute": self.compute}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["compute"])

    def ensure(self, typed: TypedTokens) -> None:
        """Values for every type of ``typed`` (numbered before it was made, so all below ``len(types)``)."""
        need = typed.needed
        if self._types is typed.types and self.filled >= need:
            return
        with self._lock:
            if self._types is not typed.types:
                self._clear()
                self._types, self.filled = typed.types, 0
            if self.filled < need:
                self._append(typed.types.strings[self.filled : need])
                self.filled = need

    def _append(self, strings: list[str]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _clear(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` itself when it holds ``size`` elements, else a copy with room for at least that (doubling)."""
    if size <= len(array):
        return array
    out = np.empty(max(size, 2 * len(array), 1024), dtype=array.dtype)
    out[: len(array)] = array
    return out


class TypeValues(PerType):
    """One int per type, ``compute(strings)`` giving the values of new ones; :meth:`of` gathers a batch's."""

    def _clear(self) -> None:
        self._values = np.empty(0, dtype=np.int64)  # (capacity,) the first ``filled`` are set

    def _append(self, strings: list[str]) -> None:
        values = _grown(self._values, self.filled + len(strings))
        values[self.filled : self.filled + len(strings)] = self.compute(strings)
        self._values = values  # filled in before it is published: readers index only below ``filled``

    def of(self, typed: TypedTokens) -> np.ndarray:
        """(tokens,) int64 value of each token of the batch."""
        self.ensure(typed)
        return self._values[typed.ids]


class TypeArrays(PerType):
    """A 1-d int array per type (a token's character ids), stored end to end; ``compute(strings)`` gives those of
    new ones, end to end, and each one's length. :meth:`padded` gathers types' arrays into a 0-padded matrix."""

    def _clear(self) -> None:
        self._flat = np.empty(0, dtype=np.int64)  # every type's array, end to end
        self._used = 0  # elements of ``_flat`` in use
        self._starts = np.empty(0, dtype=np.int64)  # (capacity,) where each type's array starts in ``_flat``
        self._lengths = np.empty(0, dtype=np.int64)  # (capacity,) its length

    def _append(self, strings: list[str]) -> None:
        values, lengths = self.compute(strings)  # (sum(lengths),), (strings,)
        n, end = self.filled, self.filled + len(strings)
        flat = _grown(self._flat, self._used + int(lengths.sum()))
        flat[self._used : self._used + int(lengths.sum())] = values
        starts, lens = _grown(self._starts, end), _grown(self._lengths, end)
        starts[n:end] = self._used + np.cumsum(lengths) - lengths
        lens[n:end] = lengths
        self._used += int(lengths.sum())
        self._flat, self._starts, self._lengths = flat, starts, lens

    def padded(self, types: np.ndarray) -> np.ndarray:
        """(n,) type ids, their values known (:meth:`ensure`) -> (n, longest) int64, each row a type's array
        followed by zeros."""
        lengths = self._lengths[types]  # (n,)
        starts = self._starts[types]
        total = int(lengths.sum())
        # the position in _flat of each element of the rows, row after row
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        values = self._flat[np.repeat(starts, lengths) + within]
        out = np.zeros((len(types), int(lengths.max())), dtype=np.int64)
        out[np.arange(out.shape[1]) < lengths[:, None]] = values  # row-major = row after row
        return out
