"""Sentences -> per-feature arrays -> padded batches.

Encoding happens once per corpus (it depends only on the featurizers' vocabularies, never on model
weights, so it cannot go stale); every evaluation runs the full model on these arrays. A batch is a
core (mask, lengths, gold tags, original order) plus each featurizer's named tensors.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from seqlab.data.sentence import Sentence
from seqlab.data.token_types import TokenTypes, TypedTokens

TOKENS = "tokens"  # the default length batches are budgeted by


@dataclass
class Encoded:
    """One sentence encoded by every featurizer."""

    length: int  # tokens, i.e. tagged positions
    features: dict[str, Any]  # featurizer name -> its per-sentence arrays
    tags: np.ndarray | None = None  # (length,) int64 tag ids, None for unlabeled text
    sizes: dict[str, int] = field(default_factory=dict)  # lengths featurizers report (lattice, sub-words)


@dataclass
class Batch:
    """A padded batch; ``index`` maps rows back to positions in the encoded list."""

    mask: torch.Tensor  # (batch, seq_len) bool, True on real tokens
    lengths: torch.Tensor  # (batch,) long
    tags: torch.Tensor | None  # (batch, seq_len) long, 0 on padding
    index: list[int]
    features: dict[str, dict[str, torch.Tensor]]  # featurizer name -> named tensors

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    def to(self, device: torch.device | str) -> Batch:
        if self.mask.device == torch.device(device):
            return self
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        feats = {name: {k: move(v) for k, v in tensors.items()} for name, tensors in self.features.items()}
        return Batch(move(self.mask), move(self.lengths), move(self.tags), self.index, feats)


class Collator(Protocol):
    """What collation needs of a featurizer (see :class:`seqlab.features.base.Featurizer`)."""

    def collate(self, items: list[Any], seq_len: int) -> dict[str, torch.Tensor]: ...


class SentenceCollator(Protocol):
    """What :func:`collate_sentences` needs of a featurizer."""

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, torch.Tensor]: ...

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, torch.Tensor]: ...


def collate(items: list[Encoded], index: list[int], featurizers: Mapping[str, Collator]) -> Batch:
    """Pad a list of encoded sentences into a :class:`Batch`."""
    lengths = np.fromiter((e.length for e in items), dtype=np.int64, count=len(items))
    t = int(lengths.max())
    mask = np.arange(t)[None, :] < lengths[:, None]  # (batch, seq_len)
    tags = None
    if items[0].tags is not None:
        tags = np.zeros((len(items), t), dtype=np.int64)
        for i, e in enumerate(items):
            tags[i, : e.length] = e.tags
        tags = torch.from_numpy(tags)
    feats = {name: f.collate([e.features[name] for e in items], t) for name, f in featurizers.items()}
    return Batch(torch.from_numpy(mask), torch.from_numpy(lengths), tags, index, feats)


def collate_sentences(
    sentences: Sequence[Sentence], featurizers: Mapping[str, SentenceCollator], types: TokenTypes | None = None
) -> Batch:
    """:func:`collate` of the sentences (none empty) straight from their tokens, each featurizer encoding the
    whole batch at once (:meth:`~seqlab.features.base.Featurizer.collate_sentences`): inference's path, without
    per-sentence arrays. With ``types``, the tokens are looked up there once and each featurizer collates from
    their type ids (:meth:`~seqlab.features.base.Featurizer.collate_types`; the same tensors). No tags;
    ``index`` is 0..n-1."""
    lengths = np.fromiter((len(s.tokens) for s in sentences), dtype=np.int64, count=len(sentences))
    t = int(lengths.max())
    mask = np.arange(t)[None, :] < lengths[:, None]  # (batch, seq_len)
    typed = None if types is None else TypedTokens.of(sentences, types, lengths)
    if typed is not None:
        feats = {name: f.collate_types(typed, t) for name, f in featurizers.items()}
    else:
        feats = {name: f.collate_sentences(sentences, t) for name, f in featurizers.items()}
    return Batch(torch.from_numpy(mask), torch.from_numpy(lengths), None, list(range(len(sentences))), feats)


def make_batches(
    items: list[Encoded],
    featurizers: Mapping[str, Collator],
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    shuffle: bool = False,
    rng: random.Random | None = None,
    length: str = TOKENS,
    pad_overhead: int | None = None,
) -> list[Batch]:
    """Length-bucketed batches: sort by ``length`` (tokens, or a length a featurizer reports) so padding
    is small, cut by sentence count or by a budget of padded ``length`` units, then shuffle the order
    of batches (and, for training, jitter ties) when ``shuffle``. With ``pad_overhead`` (inference), a
    batch of sentences of very unequal lengths is cut further where that saves padding (:func:`split_padding`)."""
    return [
        collate([items[i] for i in g], g, featurizers)
        for g in batch_groups(items, batch_size, batch_tokens, shuffle, rng, length, pad_overhead)
    ]


def split_padding(sizes: list[int], overhead: int) -> list[int]:
    """Where to cut a run of ascending lengths into consecutive parts so that the sum over parts of
    ``overhead + rows x longest`` is least: padded positions plus a fixed cost per part, in the same units.
    Returns the start of each part after the first. A cut inside a run of equal lengths only adds a part, so
    a dynamic programme over the ends of such runs finds the best cuts: O(d^2) for d distinct lengths, however
    many rows there are."""
    ends = [k for k in range(1, len(sizes) + 1) if k == len(sizes) or sizes[k] != sizes[k - 1]]
    best = [0.0] + [float("inf")] * len(ends)  # best[j]: least cost of the rows before ends[j - 1]
    start = [0] * (len(ends) + 1)
    for j in range(1, len(ends) + 1):
        rows_to, longest = ends[j - 1], sizes[ends[j - 1] - 1]
        for i in range(j):
            cost = best[i] + overhead + (rows_to - (ends[i - 1] if i else 0)) * longest
            if cost < best[j]:
                best[j], start[j] = cost, i
    cuts, j = [], len(ends)
    while j > 0:
        j = start[j]
        if j:
            cuts.append(ends[j - 1])
    return cuts[::-1]


def batch_groups(
    items: list[Encoded],
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    shuffle: bool = False,
    rng: random.Random | None = None,
    length: str = TOKENS,
    pad_overhead: int | None = None,
) -> list[list[int]]:
    """The positions in ``items`` of each batch :func:`make_batches` makes, before collation (data-parallel
    training collates each process's share of a batch only)."""
    sizes = [e.length for e in items] if length == TOKENS else [e.sizes[length] for e in items]
    return size_groups(sizes, batch_size, batch_tokens, shuffle, rng, pad_overhead)


def size_groups(
    sizes: list[int],
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    shuffle: bool = False,
    rng: random.Random | None = None,
    pad_overhead: int | None = None,
) -> list[list[int]]:
    """:func:`batch_groups` from the items' lengths alone (inference encodes each batch when it runs it)."""
    order = list(range(len(sizes)))
    if shuffle:
        assert rng is not None
        rng.shuffle(order)  # random order among equal lengths
    order.sort(key=sizes.__getitem__)
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        n = sizes[i]
        if cur and (
            (batch_tokens is not None and (len(cur) + 1) * n > batch_tokens)
            or (batch_tokens is None and len(cur) >= (batch_size or 1))
        ):
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    if pad_overhead is not None:
        groups = [part for g in groups for part in _split_group(g, [sizes[i] for i in g], pad_overhead)]
    if shuffle:
        rng.shuffle(groups)
    return groups


def _split_group(group: list[int], sizes: list[int], overhead: int) -> list[list[int]]:
    if len(group) * sizes[-1] - sum(sizes) <= overhead:  # little padding (the usual case in a sorted corpus)
        return [group]
    bounds = [0, *split_padding(sizes, overhead), len(group)]
    return [group[a:b] for a, b in zip(bounds, bounds[1:])]
