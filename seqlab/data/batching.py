"""Sentences -> index arrays -> padded batches.

Encoding to indices happens once per corpus (it depends only on the vocabularies, never on model
weights, so it cannot go stale); every evaluation runs the full model on these indices.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.data.sentence import Sentence
from seqlab.data.vocab import Vocab, casing_class, normalize_word


@dataclass
class Encoded:
    """One sentence as index arrays."""

    words: np.ndarray  # (seq_len,) int64
    chars: list[np.ndarray]  # seq_len arrays of char ids
    casing: np.ndarray  # (seq_len,) int64
    tags: np.ndarray | None  # (seq_len,) int64


@dataclass
class Batch:
    """A padded batch; ``index`` maps rows back to positions in the encoded list."""

    words: torch.Tensor  # (batch, seq_len) long
    chars: torch.Tensor  # (distinct_tokens, max_word_len) long, 0 = padding: each distinct token once
    token_chars: torch.Tensor  # (batch, seq_len) long, row of ``chars`` holding each token's characters
    casing: torch.Tensor  # (batch, seq_len) long, 0 = padding
    mask: torch.Tensor  # (batch, seq_len) bool, True on real tokens
    tags: torch.Tensor | None  # (batch, seq_len) long, 0 on padding
    index: list[int]

    @property
    def num_tokens(self) -> int:
        return int(self.mask.sum())

    def to(self, device: torch.device | str) -> "Batch":
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.words), move(self.chars), move(self.token_chars), move(self.casing),
                     move(self.mask), move(self.tags), self.index)


class Encoder:
    """Turns sentences into :class:`Encoded` with fixed vocabularies."""

    def __init__(self, words: Vocab, chars: Vocab, tags: Vocab, lowercase: bool, replace_digits: bool,
                 max_word_len: int = 30):
        self.words, self.chars, self.tags = words, chars, tags
        self.lowercase, self.replace_digits = lowercase, replace_digits
        self.max_word_len = max_word_len  # longer tokens (URLs, numbers) are cut for the char encoder
        self._cache: dict[str, tuple[int, np.ndarray, int]] = {}  # depends on the vocabularies only

    def _token(self, token: str) -> tuple[int, np.ndarray, int]:
        """(word id, char ids, casing class) of one token; memoised, since tokens repeat a lot."""
        hit = self._cache.get(token)
        if hit is None:
            chars = token[: self.max_word_len]
            hit = (self.words.index(normalize_word(token, self.lowercase, self.replace_digits)),
                   np.fromiter((self.chars.index(c) for c in chars), dtype=np.int64, count=len(chars))
                   if chars else np.ones(1, dtype=np.int64),
                   casing_class(token))
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def encode(self, sentence: Sentence, tags: list[str] | None = None) -> Encoded:
        feats = [self._token(t) for t in sentence.tokens]
        n = len(feats)
        w = np.fromiter((f[0] for f in feats), dtype=np.int64, count=n)
        cs = np.fromiter((f[2] for f in feats), dtype=np.int64, count=n)
        tg = None
        if tags is not None:
            tg = np.fromiter((self.tags.stoi[t] for t in tags), dtype=np.int64, count=len(tags))
        return Encoded(w, [f[1] for f in feats], cs, tg)


def collate(items: list[Encoded], index: list[int]) -> Batch:
    """Pad a list of encoded sentences into a :class:`Batch`.

    Character arrays are shared by equal tokens (the encoder memoises them), so each distinct token's
    characters are stored and encoded once per batch."""
    b = len(items)
    t = max(len(e.words) for e in items)
    words = np.zeros((b, t), dtype=np.int64)
    casing = np.zeros((b, t), dtype=np.int64)
    token_chars = np.zeros((b, t), dtype=np.int64)
    mask = np.zeros((b, t), dtype=bool)
    has_tags = items[0].tags is not None
    tags = np.zeros((b, t), dtype=np.int64) if has_tags else None
    rows: dict[int, int] = {}  # id(char array) -> row
    distinct: list[np.ndarray] = []
    for i, e in enumerate(items):
        n = len(e.words)
        words[i, :n] = e.words
        casing[i, :n] = e.casing
        mask[i, :n] = True
        for j, cj in enumerate(e.chars):
            row = rows.get(id(cj))
            if row is None:
                row = rows[id(cj)] = len(distinct)
                distinct.append(cj)
            token_chars[i, j] = row
        if has_tags:
            tags[i, :n] = e.tags
    chars = np.zeros((len(distinct), max(len(c) for c in distinct)), dtype=np.int64)
    for r, cj in enumerate(distinct):
        chars[r, : len(cj)] = cj
    return Batch(torch.from_numpy(words), torch.from_numpy(chars), torch.from_numpy(token_chars),
                 torch.from_numpy(casing), torch.from_numpy(mask),
                 None if tags is None else torch.from_numpy(tags), index)


def make_batches(items: list[Encoded], batch_size: int | None = None, batch_tokens: int | None = None,
                 shuffle: bool = False, rng: random.Random | None = None) -> list[Batch]:
    """Length-bucketed batches: sort by length so padding is small, cut by sentence count or by a token
    budget, then shuffle the order of batches (and, for training, jitter ties) when ``shuffle``."""
    order = list(range(len(items)))
    if shuffle:
        assert rng is not None
        rng.shuffle(order)  # random order among equal lengths
    order.sort(key=lambda i: len(items[i].words))
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        n = len(items[i].words)
        if cur and ((batch_tokens is not None and (len(cur) + 1) * n > batch_tokens)
                    or (batch_tokens is None and len(cur) >= (batch_size or 1))):
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    if shuffle:
        rng.shuffle(groups)
    return [collate([items[i] for i in g], g) for g in groups]
