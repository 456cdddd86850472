"""The featurizer contract: one input feature from sentence to tensors to vectors.

A featurizer owns its vocabulary or resource. It is fitted on the training sentences, encodes one
:class:`~seqlab.data.sentence.Sentence` into arrays, collates a batch of those into named tensors, and
saves its state as JSON under its own name in the model folder's ``vocab.json``. Its embedding module
maps the collated tensors to (batch, seq_len, output_dim); the embedder concatenates the modules of all
featurizers. A featurizer may also report a length of its own (a lattice, sub-words) that batching can
budget by, and a module may return None and only publish tensors into the context (output_dim 0).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.data.token_types import PerType, TypedTokens
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.nn.context import Context
from seqlab.registry import LayerConfig, Registry

FEATURES: Registry = Registry("feature")


def unk_dropout_field(items: str, unseen: str) -> Any:
    """The ``unk_dropout`` option of a feature whose table is trained on its training items: in training each
    item (``items``: 'each bigram') is read as <unk> with this probability, so that the <unk> row, which the
    ``unseen`` ones read at prediction time, is trained (seqlab.nn.dropout.unk_dropout)."""
    return Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description=f"in training, {items} is read as <unk> with this probability, so that the <unk> row that "
        f"{unseen} read at prediction time is trained; 0: <unk> keeps its random initial row",
    )


class FeatureConfig(LayerConfig):
    """Base of featurizer configs: ``output_dim`` (known without data) and ``build``."""

    def output_dim(self) -> int:
        raise NotImplementedError

    def published_dim(self) -> int | None:
        """Last dimension of a tensor the module publishes under the feature's name (a lattice's word
        embeddings), for encoders built on it; None when it publishes nothing."""
        return None

    def build(self, name: str) -> Featurizer:
        raise NotImplementedError


class FeatureModule(nn.Module):
    """The trainable half of a featurizer: collated tensors -> (batch, seq_len, output_dim)."""

    output_dim: int
    traceable = True  # False: its forward loops over time steps in Python, which a trace fixes at one length

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor | None:  # pragma: no cover
        raise NotImplementedError

    def remember_for_scoring(self, on: bool) -> bool:
        """While ``on``, a feature whose outputs are a fixed function of its inputs (a frozen model's states)
        may keep them across evaluation passes: the trainer turns this on for its dev scoring after each
        epoch, which sees the same sentences every time, and off when training ends. Returns whether it keeps
        them (so the first scoring costs more than the next); features with nothing worth keeping ignore it."""
        return False


class Featurizer(ABC):
    def __init__(self, name: str, config: FeatureConfig):
        self.name, self.config = name, config

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:  # noqa: B027 - optional
        """Build the vocabulary from training sentences; ``other`` (dev/test) may only add words that
        have pre-trained vectors. Stateless featurizers do nothing."""

    def state(self) -> dict:
        """JSON-able state saved under this featurizer's name in vocab.json."""
        return {}

    def load_state(self, state: Any, where: str) -> None:
        """Restore :meth:`state`; ``where`` names the file and key for errors. Must validate."""
        if state not in ({}, None):
            raise SeqlabError(f"{where}: expected no state for a '{self.config.type}' feature")

    @abstractmethod
    def encode(self, sentence: Sentence) -> Any:
        """One sentence -> this feature's arrays (kept per sentence for the whole corpus)."""

    @abstractmethod
    def collate(self, items: list[Any], seq_len: int) -> dict[str, Tensor]:
        """Per-sentence arrays of one batch -> named tensors, padded to ``seq_len`` tokens."""

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, Tensor]:
        """:meth:`collate` of the sentences' :meth:`encode`, in one go (inference encodes each batch as it runs
        it). The same tensors; a featurizer that encodes token by token from a memo overrides it to look the
        whole batch's tokens up at once, without arrays per sentence."""
        return self.collate([self.encode(s) for s in sentences], seq_len)

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, Tensor]:
        """:meth:`collate_sentences` of ``typed.sentences``, given their tokens' type ids: a featurizer whose value
        of a token depends on its string alone overrides it to keep one value per type (:mod:`seqlab.data.token_types`)
        and gather the batch's with one array index. The same tensors."""
        return self.collate_sentences(typed.sentences, seq_len)

    def neighbours(self) -> int:
        """How many sentences on each side of a sentence its :meth:`encode` reads (``Sentence.neighbours``, linked
        by whoever holds the sentences in order: the trainer, :func:`seqlab.tagging.inference.run`); 0: none."""
        return 0

    def columns(self) -> int:
        """How many columns besides token and label each token must bring (``Sentence.extra["columns"]``) for
        :meth:`encode`: a column file's, never raw text's; 0: none."""
        return 0

    def size(self, encoded: Any) -> int | None:
        """A length of this feature's own for batch budgets (lattice length), or None."""
        return None

    @abstractmethod
    def module(self) -> FeatureModule:
        """A fresh embedding module (initialised from pre-trained vectors after ``fit``)."""


class VocabFeaturizer(Featurizer):
    """A featurizer whose state is one vocabulary (``itos``), with a memo of encoded tokens that any
    change of the vocabulary clears."""

    def __init__(self, name: str, config: FeatureConfig):
        super().__init__(name, config)
        self.set_vocab(Vocab([]))

    def set_vocab(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._cache: dict[str, Any] = {}  # token -> its encoding; depends on the vocabulary only
        self._by_type = self._per_type()  # likewise its values by token type, if it keeps them

    def _per_type(self) -> PerType | None:
        """The store of this featurizer's value of each token type for :meth:`collate_types` (made anew with each
        vocabulary), or None for a featurizer that keeps none."""
        return None

    def state(self) -> dict:
        return {"itos": self.vocab.itos}

    def load_state(self, state: Any, where: str) -> None:
        self.set_vocab(Vocab.from_list(string_list(state, "itos", where, min_len=2)))


def string_list(state: Any, key: str, where: str, min_len: int = 0) -> list[str]:
    """``state[key]`` checked to be a list of distinct strings."""
    value = state.get(key) if isinstance(state, dict) else None
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise SeqlabError(f"{where}.{key}: expected a list of strings")
    if len(value) < min_len or len(set(value)) != len(value):
        raise SeqlabError(f"{where}.{key}: expected at least {min_len} distinct strings")
    return value


#: Tokens a featurizer's memo holds at most (a long-running service sees an open vocabulary).
MEMO_TOKENS = 1_000_000


def memo_lookup(memo: dict[str, Any], tokens: Sequence[str], compute: Callable[[str], Any]) -> list:
    """Each token's value from ``memo``, computed (and kept, up to ``MEMO_TOKENS``) where missing."""
    try:
        return [memo[t] for t in tokens]  # tokens repeat a lot: the usual case is every one found
    except KeyError:
        pass
    out = []
    for token in tokens:
        value = memo.get(token)
        if value is None:
            value = compute(token)
            if len(memo) < MEMO_TOKENS:
                memo[token] = value
        out.append(value)
    return out


def memo_values(memo: dict[str, Any], tokens: Sequence[str], compute: Callable[[str], Any]) -> list:
    """Each token's value from ``memo``, computed where missing, and not stored: for values a caller keeps
    elsewhere (one per token type, :mod:`seqlab.data.token_types`)."""
    get = memo.get
    return [value if (value := get(t)) is not None else compute(t) for t in tokens]


def flat_tokens(sentences: Sequence[Sentence]) -> tuple[list[str], np.ndarray]:
    """Every token of the batch, sentence after sentence, and each sentence's length (batch,)."""
    lengths = np.fromiter((len(s.tokens) for s in sentences), dtype=np.int64, count=len(sentences))
    return [t for s in sentences for t in s.tokens], lengths


def pad_flat(values: Sequence[int], lengths: np.ndarray, seq_len: int) -> Tensor:
    """Sentence after sentence ``values`` (sum(lengths),) -> (batch, seq_len) long tensor, right-padded with 0."""
    out = np.zeros((len(lengths), seq_len), dtype=np.int64)
    out[np.arange(seq_len)[None, :] < lengths[:, None]] = values  # row-major = sentence order
    return torch.from_numpy(out)


def pad_ids(arrays: list[np.ndarray], seq_len: int) -> Tensor:
    """Right-pad 1-d int arrays with 0 into a (batch, seq_len) long tensor."""
    if len(arrays) == 1:
        out = np.zeros((1, seq_len), dtype=np.int64)
        out[0, : len(arrays[0])] = arrays[0]
        return torch.from_numpy(out)
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    return pad_flat(np.concatenate(arrays), lengths, seq_len)
