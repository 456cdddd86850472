"""String <-> index tables and the token features the embedder consumes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

PAD, UNK = "<pad>", "<unk>"
_DIGITS = re.compile(r"\d")


class Vocab:
    """An indexed list of strings. Index 0 is padding; ``unk`` (when present) catches unseen items."""

    def __init__(self, items: Iterable[str], specials: tuple[str, ...] = (PAD, UNK)):
        self.itos: list[str] = list(specials)
        seen = set(self.itos)
        for item in items:
            if item not in seen:
                seen.add(item)
                self.itos.append(item)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.unk_index = self.stoi.get(UNK)

    @classmethod
    def from_counts(cls, counts: Counter, min_count: int = 1, specials=(PAD, UNK), extra: Iterable[str] = ()):
        """Items seen ``min_count`` times (most frequent first), then ``extra`` items not yet in."""
        kept = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]
        return cls([*kept, *extra], specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, item: str) -> bool:
        return item in self.stoi

    def index(self, item: str) -> int:
        i = self.stoi.get(item, self.unk_index)
        if i is None:
            raise KeyError(item)
        return i

    def to_list(self) -> list[str]:
        return list(self.itos)

    @classmethod
    def from_list(cls, itos: list[str]) -> Vocab:
        v = cls.__new__(cls)
        v.itos = list(itos)
        v.stoi = {s: i for i, s in enumerate(v.itos)}
        v.unk_index = v.stoi.get(UNK)
        return v


def normalize_word(word: str, lowercase: bool, replace_digits: bool) -> str:
    """The key used to look a word up in the word table (casing is kept by :func:`casing_class`)."""
    if lowercase:
        word = word.lower()
    if replace_digits:
        word = _DIGITS.sub("0", word)
    return word


CASING_CLASSES = ("<pad>", "lower", "upper", "title", "mixed", "numeric", "has_digit", "punct", "other")
_CASING_INDEX = {c: i for i, c in enumerate(CASING_CLASSES)}


def casing_class(word: str) -> int:
    """Index of the word's casing class in :data:`CASING_CLASSES` (never 0, which is padding)."""
    if word.isdigit():
        c = "numeric"
    elif any(ch.isdigit() for ch in word):
        c = "has_digit"
    elif word.islower():
        c = "lower"
    elif word.isupper():
        c = "upper"
    elif word[:1].isupper() and (len(word) == 1 or word[1:].islower()):
        c = "title"
    elif any(ch.isalpha() for ch in word):
        c = "mixed"
    elif all(not ch.isalnum() for ch in word):
        c = "punct"
    else:
        c = "other"
    return _CASING_INDEX[c]


CHIU_NICHOLS_CLASSES = ("<pad>", "upper", "upper_initial", "lower", "mixed")


def chiu_nichols_class(word: str) -> int:
    """Index in :data:`CHIU_NICHOLS_CLASSES` of the word's capitalisation pattern (Chiu and Nichols; Li et
    al. 2019, Section 3.1): all upper, upper-initial, lower, or mixed caps. A token with no cased letter
    (a number, punctuation) has no capitals: "lower"."""
    cased = [ch for ch in word if ch.isupper() or ch.islower()]
    if not cased or all(ch.islower() for ch in cased):
        return 3
    if all(ch.isupper() for ch in cased):
        return 1 if len(cased) > 1 else 2  # a single capital letter ("I", "A") is upper-initial
    if cased[0].isupper() and all(ch.islower() for ch in cased[1:]):
        return 2
    return 4
