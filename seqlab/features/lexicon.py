"""A word lexicon and the matching of its words in a sentence (the lattice of FLAT and lattice LSTM).

Where the words come from:

* ``jieba``: the ``dict.txt`` shipped in the PyPI package ``jieba`` (349,046 lines of
  ``word frequency part-of-speech``; 337,466 words of two or more characters). It is a segmentation
  dictionary, not the "YJ" lexicon of the FLAT paper (Zhang and Yang's 704k words with vectors, not
  available offline here); matched words per sentence differ accordingly (see BENCHMARKS.md).
* a word list: one word per line, optionally followed by an integer frequency and anything else
  (jieba's format);
* a word-vectors file (GloVe or word2vec text, ``.gz`` allowed): its first column.

Matching walks a trie from every token start, so the cost per sentence is O(tokens x longest match),
independent of the lexicon's size. The trie is kept as a hash map from every prefix of every word to
"is a word" (one node per prefix string): the same walk as a pointer trie, at a fraction of the memory
of nested dicts (about 40 MB for jieba's dictionary instead of 300 MB).

A word list may say more of each word: jieba's third column is the word's part of speech, whose name classes
(``nr`` person, ``ns`` place, ``nt`` organisation, ``nz`` other proper noun) tell a tagger what kind of name a
word is even when the training data never showed it; :class:`Lexicon` keeps each word's frequency and tag where
the file gives them (:meth:`Lexicon.tag`, :meth:`Lexicon.frequency`).

A match covers whole tokens: for Chinese corpora every token is one character; with multi-character
tokens a word must start and end on token boundaries. A match of a single token is not a lattice word
(it would repeat the token).
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError

JIEBA = "jieba"


def package_folder(package: str, needed_for: str, install: str, key: str | None = None) -> Path:
    """The folder of an installed package whose files are read (found, not imported: its code is not needed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SeqlabError(f"{needed_for}: install the package {package} ({install})", key=key)
    return Path(next(iter(spec.submodule_search_locations)))


def jieba_folder(needed_for: str) -> Path:
    """The folder of the installed ``jieba`` package."""
    return package_folder("jieba", needed_for, "pip install jieba")


def jieba_dict_path() -> Path:
    """The ``dict.txt`` inside the installed ``jieba`` package."""
    path = (
        jieba_folder("the default lexicon is jieba's dict.txt (or name a word list in the lattice feature's 'lexicon')")
        / "dict.txt"
    )
    if not path.is_file():
        raise SeqlabError("the installed jieba package has no dict.txt", path=path)
    return path


@dataclass(frozen=True)
class Match:
    """A lexicon word over tokens ``head`` .. ``tail`` (both inclusive, 0-based)."""

    head: int
    tail: int
    word: str


@dataclass(frozen=True)
class WordEntry:
    """One line of a word list: the word, its frequency and its tag (None where the line gives none)."""

    word: str
    frequency: int | None = None
    tag: str | None = None


def read_word_entries(path: str | Path, fmt: str = "words", min_freq: int = 1) -> list[WordEntry]:
    """The entries of a word list (``word [frequency [tag ...]]`` per line) or of a vectors file (first column).

    Words whose stated frequency is below ``min_freq`` are left out (a word without a frequency is
    kept). Errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise SeqlabError("no such lexicon file", path=path)
    opener = gzip.open if path.suffix == ".gz" else open
    entries: list[WordEntry] = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if fmt == "vectors":
                    if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                        continue  # word2vec header: "count dim"
                    entries.append(WordEntry(parts[0]))
                    continue
                freq = None
                if len(parts) >= 2:
                    try:
                        freq = int(parts[1])
                    except ValueError:
                        if min_freq > 1:
                            raise SeqlabError(
                                f"expected an integer frequency after the word, got {parts[1]!r}",
                                path=path,
                                line=lineno,
                            ) from None
                    if freq is not None and freq < min_freq:
                        continue
                tag = sys.intern(parts[2]) if len(parts) >= 3 and freq is not None else None  # a few dozen tags
                entries.append(WordEntry(parts[0], freq, tag))
    except UnicodeDecodeError:
        raise SeqlabError("lexicon file is not UTF-8", path=path) from None
    except (OSError, EOFError) as err:
        raise SeqlabError(f"cannot read the lexicon: {err}", path=path) from None
    return entries


def read_word_file(path: str | Path, fmt: str = "words", min_freq: int = 1) -> list[str]:
    """The words of a word list or vectors file (:func:`read_word_entries`)."""
    return [e.word for e in read_word_entries(path, fmt, min_freq)]


class Lexicon:
    """A set of words with trie matching over token sequences."""

    def __init__(self, words: Iterable[str | WordEntry]):
        entries = [w if isinstance(w, WordEntry) else WordEntry(w) for w in words]
        self.words: list[str] = sorted({e.word for e in entries})
        # a word listed twice keeps its last frequency and tag, as the trie keeps it once
        self._frequency = {e.word: e.frequency for e in entries if e.frequency is not None}
        self._tag = {e.word: e.tag for e in entries if e.tag is not None}
        nodes: dict[str, bool] = {}  # every prefix of every word -> whether it is itself a word
        for word in self.words:
            for k in range(1, len(word)):
                nodes.setdefault(word[:k], False)
            nodes[word] = True
        self._nodes = nodes
        self.longest = max((len(w) for w in self.words), default=0)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return self._nodes.get(word, False)

    def frequency(self, word: str) -> int | None:
        """The word's frequency as its file gave it, or None."""
        return self._frequency.get(word)

    def tag(self, word: str) -> str | None:
        """The word's tag (jieba: its part of speech) as its file gave it, or None."""
        return self._tag.get(word)

    @classmethod
    def load(
        cls,
        source: str,
        fmt: str = "words",
        min_length: int = 2,
        max_length: int | None = None,
        min_freq: int = 1,
        extra: str | None = None,
        details: bool = True,
    ) -> Lexicon:
        """``source`` 'jieba' or a file; words shorter than ``min_length`` or longer than ``max_length``
        characters are left out; ``extra`` names a user's word list added on top (same length limits).
        ``details``: keep each word's frequency and tag (15 MB for jieba's dictionary), or the words alone."""
        path = jieba_dict_path() if source == JIEBA else Path(source)
        words = read_word_entries(path, "words" if source == JIEBA else fmt, min_freq)
        if extra:
            words += read_word_entries(extra, "words")
        keep = [w for w in words if len(w.word) >= min_length and (max_length is None or len(w.word) <= max_length)]
        return cls(keep if details else (w.word for w in keep))

    def match(self, tokens: Sequence[str]) -> list[Match]:
        """Every lexicon word spanning two or more whole tokens, ordered by (head, tail)."""
        if not tokens or not self.words:
            return []
        nodes = self._nodes
        out = []
        n = len(tokens)
        for head in range(n - 1):
            prefix = tokens[head]
            if prefix not in nodes:
                continue
            for tail in range(head + 1, n):
                prefix += tokens[tail]
                is_word = nodes.get(prefix)
                if is_word is None:  # no word goes on with this prefix
                    break
                if is_word:
                    out.append(Match(head, tail, prefix))
        return out
