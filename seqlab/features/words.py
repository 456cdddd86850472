"""Word ids: a lookup table over (lower-cased) training words, initialised from pre-trained vectors.

Words the vectors know are never UNK. A loaded model built on pre-trained vectors (``pretrained``) looks a word
outside its vocabulary up in those vectors (the package, or the file whose absolute path the model recorded in
its ``vocab.json`` state, ``vectors``) when it first meets it, and gives it the next id past the trained table:
its vector becomes an extra row of the embedding (:class:`WordEmbedding`'s ``extra``), for frozen and fine-tuned
tables alike. In a fine-tuned table such a word gets its pre-trained vector as it is, un-tuned (the trained rows
moved during training; the new one never did), which is still nearer its meaning than the UNK row. Words in the
vocabulary keep their rows and their predictions exactly. Only the rows of the words met are read
(:class:`seqlab.features.vectors.VectorIndex`), and the extra rows stop at
:data:`seqlab.features.vectors.MAX_EXTRA_BYTES` (then UNK, with a warning). A vector file that is gone is a warning at
load, and the words are UNK as before. The extra rows are not saved with the model, nor used by training (a model being
trained never adds any), nor by an exported network (``seqlab export``): the ONNX engine runs batches with such words
eagerly.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn
from torch.nn import functional as F

from seqlab.data.sentence import Sentence
from seqlab.data.token_types import TypedTokens, TypeValues
from seqlab.data.vocab import normalize_word
from seqlab.features.base import (
    FEATURES,
    MEMO_TOKENS,
    FeatureConfig,
    FeatureModule,
    VocabFeaturizer,
    flat_tokens,
    memo_lookup,
    memo_values,
    pad_flat,
    pad_ids,
    unk_dropout_field,
)
from seqlab.features.vectors import MAX_EXTRA_BYTES, fit_vocab_and_table, source_of, vector_index, vector_source_present
from seqlab.nn import rows
from seqlab.nn.context import Context
from seqlab.nn.dropout import unk_dropout

log = logging.getLogger("seqlab")


@FEATURES.register
class WordsConfig(FeatureConfig):
    type: Literal["words"] = "words"
    dim: int = Field(50, gt=0, le=4096, description="GloVe 6B 50d is the vector set available offline")
    pretrained: str | None = Field(
        "glove-6b-50d", description="'glove-6b-50d' (PyPI package), a GloVe/word2vec text file (.gz ok), or None"
    )
    freeze: bool = Field(False, description="the papers fine-tune the word embeddings")
    lowercase: bool = Field(True, description="GloVe 6B is uncased; casing is kept by the casing feature")
    min_count: int = Field(1, ge=1, le=1_000_000, description="keep every training word; rare ones still get trained")
    unk_dropout: float = unk_dropout_field("each word", "words unseen in training (and without a vector)")
    replace_digits: bool = Field(False, description="map digits to 0 before lookup (NCRF++ option)")
    add_dev_test_words: bool = Field(
        True,
        description="add the dev/test words that have a pre-trained vector to the vocabulary when the model is "
        "built (as NCRF++ does); false keeps the vocabulary to the training words, and other words get their "
        "vectors at prediction time",
    )

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> WordsFeaturizer:
        return WordsFeaturizer(name, self)


class WordEmbedding(FeatureModule):
    def __init__(
        self, num_words: int, dim: int, init: Tensor | None, freeze: bool, unk_dropout: float = 0.0, unk: int = 1
    ):
        super().__init__()
        self.unk_dropout, self.unk = unk_dropout, unk  # in training, ids read as <unk> (seqlab.nn.dropout)
        self.embed = nn.Embedding(num_words, dim, padding_idx=0)
        if init is not None:
            self.embed.weight.data.copy_(init)
        self.embed.weight.requires_grad_(not freeze)
        self.output_dim = dim
        rows.mark(self.embed.weight)  # read only through rows.lookup: SGD may update it by rows (seqlab.nn.rows)
        self.register_state_dict_pre_hook(_flush_rows)
        # rows of words met after training (their pre-trained vectors), ids len(table) onwards: a plain attribute,
        # neither a parameter nor saved; filled by WordsFeaturizer (capacity, dim), the first extra_count in use
        self.extra: np.ndarray | None = None
        self.extra_count = 0

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        ids = unk_dropout(inputs["ids"], self.unk_dropout, self.unk, self.training)  # (batch, seq_len)
        weight = self.embed.weight
        if self.extra_count and not torch.jit.is_tracing():  # an exported graph has the trained table only
            base = weight.shape[0]
            beyond = ids >= base
            if bool(beyond.any()):
                extra = torch.from_numpy(self.extra[: self.extra_count]).to(weight.device, weight.dtype)
                known = rows.lookup(ids.masked_fill(beyond, 1), weight, 0)  # (batch, seq, dim)
                found = F.embedding((ids - base).clamp_min(0), extra)  # (batch, seq, dim)
                return torch.where(beyond.unsqueeze(-1), found, known)
        # a function, not the module's call (hooks, dispatch): it counts at batch 1
        return rows.lookup(ids, weight, 0)  # (batch, seq, dim); padding: 0

    def train(self, mode: bool = True):
        if not mode:
            rows.flush(self.embed.weight)  # evaluation reads it whole
        return super().train(mode)


def _flush_rows(module: WordEmbedding, prefix: str, keep_vars: bool) -> None:
    """Before a state_dict: the table's pending row updates applied (seqlab.nn.rows)."""
    rows.flush(module.embed.weight)


class WordsFeaturizer(VocabFeaturizer):
    config: WordsConfig

    def __init__(self, name: str, config: WordsConfig):
        super().__init__(name, config)
        self._init: np.ndarray | None = None  # pre-trained table after fit, until the module is made
        self.vectors: str | None = None  # the vectors the table was built from (package, or absolute file path)
        self.open_vocabulary = False  # look unknown words up in the vectors (a loaded model)
        self._module: WordEmbedding | None = None
        self._extra_ids: dict[str, int] = {}  # words added past the trained vocabulary -> id
        self._absent: set[str] = set()  # words looked up that the vectors do not know
        self._index = None  # the vectors' VectorIndex, once needed
        self._lock = threading.Lock()
        self._full = False

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle: neither a lock nor the vectors' index
        return {**self.__dict__, "_lock": None, "_index": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _per_type(self) -> TypeValues:
        return TypeValues(self._ids)

    def _norm(self, token: str) -> str:
        return normalize_word(token, self.config.lowercase, self.config.replace_digits)

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        c = self.config
        counts = Counter(self._norm(t) for s in train for t in s.tokens)
        others = {self._norm(t) for s in other for t in s.tokens} if c.pretrained and c.add_dev_test_words else set()
        vocab, self._init = fit_vocab_and_table(
            counts, others, c.pretrained, c.dim, c.min_count, seed, key=f"model.embedder.features.{self.name}.dim"
        )
        self.set_vocab(vocab)
        self.vectors = source_of(c.pretrained)

    def state(self) -> dict:
        state = super().state()
        if self.vectors:
            state["vectors"] = self.vectors
        return state

    def load_state(self, state, where: str) -> None:
        super().load_state(state, where)
        recorded = state.get("vectors")
        self.vectors = recorded if isinstance(recorded, str) and recorded else source_of(self.config.pretrained)
        self.open_vocabulary = bool(self.vectors) and vector_source_present(self.vectors)
        self._extra_ids, self._absent, self._index, self._full = {}, set(), None, False

    def _id(self, token: str) -> int:
        word = self._norm(token)
        i = self.vocab.stoi.get(word)
        if i is not None:
            return i
        if self.open_vocabulary and self._module is not None:
            return self._extra_id(word)
        return self.vocab.unk_index

    def _extra_id(self, word: str) -> int:
        """The id of a word outside the vocabulary: past the table's, with its pre-trained vector as an extra row
        of the module, where the vectors know it; else UNK."""
        got = self._extra_ids.get(word)
        if got is None and word not in self._absent:
            self._add_words([word])
            got = self._extra_ids.get(word)
        return self.vocab.unk_index if got is None else got

    def _prefetch(self, tokens: Sequence[str]) -> None:
        """Look the batch's words outside the vocabulary up in the vectors at once (one read of their rows)."""
        if not (self.open_vocabulary and self._module is not None):
            return
        stoi, extra, absent = self.vocab.stoi, self._extra_ids, self._absent
        new = [
            w
            for w in dict.fromkeys(map(self._norm, tokens))  # in order of appearance
            if w not in stoi and w not in extra and w not in absent
        ]
        if new:
            self._add_words(new)

    def _add_words(self, words: list[str]) -> None:
        """Give each of ``words`` the vectors know an id past the table's and its vector as an extra row."""
        with self._lock:
            words = [w for w in words if w not in self._extra_ids and w not in self._absent]
            if not words or self._full:
                return
            if self._index is None:
                self._index = vector_index(self.vectors)
                if self._index is not None and self._index.dim != self.config.dim:
                    log.warning(
                        "word vectors %s have %d dimensions, the model's feature %d: words outside its "
                        "vocabulary are UNK",
                        self.vectors,
                        self._index.dim,
                        self.config.dim,
                    )
                    self._index = None
                if self._index is None:
                    self.open_vocabulary = False
                    return
            found = self._index.lookup(words)
            if len(self._absent) < MEMO_TOKENS:
                self._absent.update(w for w in words if w not in found)
            m = self._module
            limit = max(1, MAX_EXTRA_BYTES // (4 * self.config.dim))
            for word in words:
                vector = found.get(word)
                if vector is None:
                    continue
                if m.extra_count >= limit:
                    self._full = True
                    log.warning(
                        "feature %s: %d words added from the vectors, the most kept: further unknown words are UNK",
                        self.name,
                        m.extra_count,
                    )
                    return
                if m.extra is None or m.extra_count == len(m.extra):
                    grown = np.zeros((min(limit, max(256, 2 * m.extra_count)), self.config.dim), dtype=np.float32)
                    if m.extra is not None:
                        grown[: m.extra_count] = m.extra[: m.extra_count]
                    m.extra = grown  # a batch running now keeps the array it took: its rows are in both
                m.extra[m.extra_count] = vector
                m.extra_count += 1  # after the row is written: a batch that sees the id finds the row
                self._extra_ids[word] = len(self.vocab) + m.extra_count - 1

    def _ids(self, tokens: list[str]) -> list[int]:
        if self.open_vocabulary:
            self._prefetch(tokens)  # new token types: their words outside the vocabulary looked up together
        return memo_values(self._cache, tokens, self._id)

    def _lookup(self, tokens: Sequence[str]) -> list[int]:
        if self.open_vocabulary:
            cache = self._cache
            try:
                return [cache[t] for t in tokens]  # the usual case: every token met before
            except KeyError:
                self._prefetch([t for t in tokens if t not in cache])
        return memo_lookup(self._cache, tokens, self._id)

    def encode(self, sentence: Sentence) -> np.ndarray:
        return np.array(self._lookup(sentence.tokens), dtype=np.int64)  # (seq_len,)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len)

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, Tensor]:
        tokens, lengths = flat_tokens(sentences)
        return {"ids": pad_flat(self._lookup(tokens), lengths, seq_len)}  # (batch, seq_len)

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_flat(self._by_type.of(typed), typed.lengths, seq_len)}  # (batch, seq_len)

    def module(self) -> WordEmbedding:
        init = None if self._init is None else torch.from_numpy(self._init)
        self._init = None  # the table lives on in the module's weights
        c = self.config
        self._module = WordEmbedding(len(self.vocab), c.dim, init, c.freeze, c.unk_dropout, self.vocab.unk_index)
        self._extra_ids, self._absent, self._full = {}, set(), False
        self.set_vocab(self.vocab)  # the memo may hold ids of another module's extra rows
        return self._module
