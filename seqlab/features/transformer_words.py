"""Lexicon words read alone by a frozen transformer: one vector each, for a lattice's words (``lattice`` option
``transformer``).

What a pre-trained model knows of a word out of context, for every lexicon word, met in training or not: the
lattice's counterpart of the pre-trained word vectors FLAT reads (Zhang and Yang's 704k-word lexicon, not available
offline here). Each word is read as a text of its own (``[CLS] pieces [SEP]``, cut into pieces by the model's own
tokenizer); its vector is the mean over its pieces of the mean of the model's hidden layers (the embeddings left
out). Words are read when first met, in batches of words of the same number of pieces (no padding), and kept in
a float16 table (:class:`~seqlab.features.word_table.WordTable`: for multilingual-e5-small's 384 values, 768 bytes
a word). Nothing of the model is saved but its name and hidden size; loading reads it again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch

from seqlab.errors import SeqlabError
from seqlab.features.contextual import load_transformer, word_pieces
from seqlab.features.word_table import WordTable

BATCH = 256  # words of one length read together


class TransformerWords(WordTable):
    """Words -> the frozen transformer's reading of each alone, (hidden,)."""

    def __init__(self, spec: str, key: str):
        super().__init__(1)  # resized to the model's hidden size when it is read
        self.spec, self.key = spec, key
        self._tokenizer = self._model = None

    def __getstate__(self) -> dict:  # copies (Ray's workers) read the model again when they meet a new word
        return {**super().__getstate__(), "_tokenizer": None, "_model": None}

    @property
    def dim(self) -> int:
        return self._table.shape[1]

    def read(self) -> None:
        """Load the model (at fit; :meth:`load_state` loads it at load)."""
        if self._model is None:
            self._tokenizer, self._model = load_transformer(self.spec, self.key, spaces=True)
            if self.dim != self._model.config.hidden_size:  # the table, sized before the model was known
                self._resize(self._model.config.hidden_size)

    def state(self) -> dict:
        return {"model": self.spec, "hidden": self.dim}

    def load_state(self, state: Any, where: str) -> None:
        self.read()
        if state != self.state():
            raise SeqlabError(f"{where}: expected {self.state()}")

    def _read(self, words: list[str]) -> np.ndarray:
        self.read()
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        by_length: dict[int, list[int]] = defaultdict(list)  # pieces (with [CLS], [SEP]) -> the words' places
        tok = self._tokenizer
        room = self._model.config.max_position_embeddings - 2  # a word longer than that keeps its first pieces
        own = [word_pieces(tok, w)[:room] for w in words]
        ids = [[tok.cls_token_id, *pieces, tok.sep_token_id] for pieces in own]
        for k, pieces in enumerate(ids):
            by_length[len(pieces)].append(k)
        with torch.no_grad():
            for places in by_length.values():
                for at in range(0, len(places), BATCH):
                    part = places[at : at + BATCH]
                    batch = torch.tensor([ids[k] for k in part])  # (n, pieces)
                    hidden = self._model(input_ids=batch, output_hidden_states=True).hidden_states[1:]
                    layers = torch.stack(hidden).float().mean(0)  # (n, pieces, hidden): the mean of the layers
                    out[part] = layers[:, 1:-1].mean(1).numpy()  # (n, hidden): the word's own pieces
        return out
