"""The lexicon words of a sentence as lattice spans: FLAT's flat lattice (Section 3.1).

A sentence's lattice is its tokens (characters) followed by the lexicon words found in it, each with
the head and tail position of its first and last token. This featurizer owns the lexicon and the
vocabulary of word embeddings; the tokens themselves are embedded by the other features. Per batch it
collates, padded to the batch's most words:

* ``ids``   (batch, words) long: word-embedding rows (0 padding, 1 a lexicon word without a row)
* ``heads`` (batch, words) long: first token of each word
* ``tails`` (batch, words) long: last token of each word
* ``mask``  (batch, words) bool: True on real words

Its module adds nothing to the token vectors (``output_dim`` 0): it publishes the word embeddings,
(batch, words, dim), under the feature's name for a lattice encoder (``flat``) to read. The lattice
length (tokens + words) is reported for batch budgets: ``train.batch_length: <feature name>``.

The lexicon is saved in the model folder (``vocab.json``), so a loaded model builds the same lattices
with nothing else on disk. Words found in the training data get their own embedding row (and, with
``pretrained`` vectors, dev/test words that have a vector); other lexicon words still enter the lattice,
with the shared ``<unk>`` row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features.base import FEATURES, FeatureConfig, FeatureModule, VocabFeaturizer, pad_ids, string_list
from seqlab.features.lexicon import JIEBA, Lexicon
from seqlab.features.vectors import fit_vocab_and_table
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout


@FEATURES.register
class LatticeConfig(FeatureConfig):
    type: Literal["lattice"] = "lattice"
    lexicon: str = Field(
        JIEBA,
        description="'jieba' (dict.txt of the jieba package), a word list (one word per "
        "line, optional frequency after it) or a word-vectors file",
    )
    lexicon_format: Literal["words", "vectors"] = Field(
        "words",
        description="how to read a lexicon file: 'words' (word [frequency ...]) or 'vectors' "
        "(GloVe/word2vec text: the first column)",
    )
    extra_words: str | None = Field(None, description="a word list of your own, added to the lexicon")
    min_length: int = Field(2, ge=2, le=100, description="FLAT's lexicon words have 2+ characters")
    max_length: int | None = Field(None, ge=2, le=1000, description="longer words are left out; None keeps all")
    min_freq: int = Field(1, ge=1, le=10**12, description="words whose stated frequency is lower are left out")
    dim: int = Field(50, gt=0, le=4096, description="Zhang and Yang's word vectors are 50d")
    pretrained: str | None = Field(
        None,
        description="word vectors (GloVe/word2vec text) for the word embeddings, or None: trained from "
        "scratch (no pre-trained Chinese vectors are available offline here)",
    )
    freeze: bool = Field(False, description="FLAT fine-tunes the word embeddings")
    min_count: int = Field(1, ge=1, le=1_000_000, description="words matched fewer times in training share <unk>")
    dropout: float = Field(0.5, ge=0.0, lt=1.0, description="on the word embeddings: FLAT's embedding dropout")

    def output_dim(self) -> int:
        return 0

    def published_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> LatticeFeaturizer:
        return LatticeFeaturizer(name, self)


class LatticeEmbedding(FeatureModule):
    """Word ids -> embeddings, published under the feature's name; nothing for the token vectors."""

    def __init__(self, name: str, num_words: int, dim: int, init: Tensor | None, freeze: bool, dropout: float):
        super().__init__()
        self.name = name
        self.embed = nn.Embedding(num_words, dim, padding_idx=0)
        if init is not None:
            self.embed.weight.data.copy_(init)
        self.embed.weight.requires_grad_(not freeze)
        self.dropout = Dropout(dropout)
        self.output_dim = 0

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> None:
        ctx.publish(self.name, self.dropout(self.embed(inputs["ids"])))  # (batch, words, dim)
        return None


class LatticeFeaturizer(VocabFeaturizer):
    config: LatticeConfig

    def __init__(self, name: str, config: LatticeConfig):
        super().__init__(name, config)
        self.lexicon: Lexicon | None = None
        self._init: np.ndarray | None = None

    def _lexicon(self) -> Lexicon:
        if self.lexicon is None:
            c = self.config
            try:
                self.lexicon = Lexicon.load(
                    c.lexicon, c.lexicon_format, c.min_length, c.max_length, c.min_freq, c.extra_words
                )
            except SeqlabError as err:
                if err.path is not None:
                    raise
                raise SeqlabError(str(err), key=f"model.embedder.features.{self.name}.lexicon") from None
            if not len(self.lexicon):
                raise SeqlabError(
                    "the lexicon has no word within the length limits",
                    key=f"model.embedder.features.{self.name}.lexicon",
                )
        return self.lexicon

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        c = self.config
        lexicon = self._lexicon()
        counts = Counter(m.word for s in train for m in lexicon.match(s.tokens))
        others = {m.word for s in other for m in lexicon.match(s.tokens)} if c.pretrained else set()
        vocab, self._init = fit_vocab_and_table(
            counts, others, c.pretrained, c.dim, c.min_count, seed, key=f"model.embedder.features.{self.name}.dim"
        )
        self.set_vocab(vocab)

    def state(self) -> dict:
        return {"itos": self.vocab.itos, "lexicon": self._lexicon().words}

    def load_state(self, state: Any, where: str) -> None:
        super().load_state(state, where)
        words = string_list(state, "lexicon", where)
        bad = next((w for w in words if len(w) < 2 or any(ch.isspace() for ch in w)), None)
        if bad is not None:
            raise SeqlabError(f"{where}.lexicon: {bad!r} is not a lexicon word (2+ characters, no spaces)")
        self.lexicon = Lexicon(words)

    def encode(self, sentence: Sentence) -> tuple[int, np.ndarray]:
        """(tokens, (3, words) array of word id, head, tail per matched word)."""
        matches = self._lexicon().match(sentence.tokens)
        index = self.vocab.index
        out = np.empty((3, len(matches)), dtype=np.int64)
        for k, m in enumerate(matches):
            out[0, k], out[1, k], out[2, k] = index(m.word), m.head, m.tail
        return len(sentence.tokens), out

    def size(self, encoded: tuple[int, np.ndarray]) -> int:
        return encoded[0] + encoded[1].shape[1]  # the lattice length: tokens + words

    def collate(self, items: list[tuple[int, np.ndarray]], seq_len: int) -> dict[str, Tensor]:
        items = [a for _, a in items]
        width = max(a.shape[1] for a in items)
        counts = torch.tensor([a.shape[1] for a in items])
        return {
            "ids": pad_ids([a[0] for a in items], width),  # (batch, words)
            "heads": pad_ids([a[1] for a in items], width),  # (batch, words)
            "tails": pad_ids([a[2] for a in items], width),  # (batch, words)
            "mask": torch.arange(width)[None, :] < counts[:, None],
        }  # (batch, words)

    def module(self) -> LatticeEmbedding:
        init = None if self._init is None else torch.from_numpy(self._init)
        self._init = None
        c = self.config
        return LatticeEmbedding(self.name, len(self.vocab), c.dim, init, c.freeze, c.dropout)
