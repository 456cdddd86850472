"""Pre-trained Chinese character features: the states of LAC, Baidu's lexical analyser, frozen.

The PyPI package jieba ships a small LAC model (``jieba/lac_small``, Apache-2.0, trained by Baidu on a large
corpus of its own): a character embedding (20,941 x 128), two bidirectional GRU layers (128 per direction) and a
linear layer to 57 tags, B/I of 24 parts of speech and of the entity types PER, LOC, ORG and TIME, plus O. Chinese
NER here has no pre-trained character vectors otherwise; this feature gives each character, in its sentence,
any of: ``embeddings`` (its 128-d input vector), ``states`` (the top layer's 256-d states) and ``emissions`` (the
57 tag scores). The weights are read from the installed jieba (a dependency of seqlab) without Paddle
(:mod:`seqlab.io.paddle`), never trained, and not saved with the model (13.6 MB in float32, more than most models
here): the model folder records their SHA-256, and loading reads them again and refuses files that differ.
Characters outside LAC's vocabulary get its ``OOV`` row, as LAC's own reader does.

The GRU is Paddle's ``dynamic_gru`` (gates update, reset, candidate; the reset gate applied to the state before its
product; h = (1 - u) * h_prev + u * candidate), which ``torch.nn.GRU`` does not compute, so it runs as a loop over
time steps; in training each sentence runs once per run (:mod:`seqlab.features.memo`), and such a model does not
export to ONNX / TorchScript.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, field_validator
from torch import Tensor

from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features.base import FEATURES, FeatureConfig, Featurizer, pad_ids
from seqlab.features.lexicon import jieba_folder
from seqlab.features.memo import MemoizedModule, memoized
from seqlab.features.word_table import WordTable
from seqlab.io.paddle import read_paddle_tensor
from seqlab.nn.context import Context

DIMS = {"embeddings": 128, "states": 256, "emissions": 57}
EMBED, HIDDEN, TAGS = 128, 128, 57
WORD_DIM = 2 * HIDDEN + TAGS  # a word read alone (:class:`LacWords`): its two final states and mean tag scores
OOV = "OOV"
UNUSED = "<unused {}>"  # the ids word.dic leaves out (one: 20939)
MAX_VOCAB = 1_000_000  # word.dic lines read at most
# the GRUs in Paddle's order of creation: layer 1 forward, layer 1 backward, layer 2 forward, layer 2 backward
GRUS = 4


@FEATURES.register
class LacConfig(FeatureConfig):
    type: Literal["lac"] = "lac"
    outputs: list[Literal["embeddings", "states", "emissions"]] = Field(
        ["states", "emissions"],
        min_length=1,
        max_length=3,
        description="what each character gets: its LAC input vector (128), the top BiGRU states (256), the 57 tag "
        "scores",
    )
    cache_mb: int = Field(
        1024,
        ge=0,
        le=1_048_576,
        description="memory (MiB) for the training-time memo of each sentence's states, and as much for the dev "
        "scoring's; 0 turns both off",
    )

    @field_validator("outputs")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each output at most once")
        return value

    def output_dim(self) -> int:
        return sum(DIMS[o] for o in self.outputs)

    def build(self, name: str) -> LacFeaturizer:
        return LacFeaturizer(name, self)


def lac_folder() -> Path:
    """``jieba/lac_small`` of the installed jieba package (not imported: only its files are read)."""
    folder = jieba_folder("the lac feature reads the LAC model of the jieba package") / "lac_small"
    if not (folder / "word.dic").is_file():
        raise SeqlabError("the installed jieba package has no LAC model (lac_small/word.dic)", path=folder)
    return folder


def read_vocabulary(path: Path) -> list[str]:
    """word.dic (``id<TAB>character`` per line) -> the character of each id, unused ids named apart."""
    by_id: dict[int, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines: some entries are control characters
    except (OSError, UnicodeDecodeError) as err:
        raise SeqlabError(f"cannot read: {err}", path=path) from None
    for number, line in enumerate(lines, 1):
        if not line and number == len(lines):
            break  # the final newline
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].isdigit() or not fields[1] or int(fields[0]) >= MAX_VOCAB:
            raise SeqlabError("expected 'id<TAB>character'", path=path, line=number)
        by_id[int(fields[0])] = fields[1]
    itos = [by_id.get(i, UNUSED.format(i)) for i in range(max(by_id, default=-1) + 1)]
    if OOV not in by_id.values() or len(set(itos)) != len(itos):
        raise SeqlabError(f"expected distinct characters and an '{OOV}' entry", path=path)
    return itos


def read_weights(folder: Path, vocab_size: int) -> dict[str, np.ndarray]:
    """The LAC network's tensors, under :class:`LacEncoder`'s buffer names, shapes checked."""
    weights = folder / "model_baseline"
    out = {"embedding": read_paddle_tensor(weights / "word_emb")}
    for k in range(GRUS):
        gru = read_paddle_tensor(weights / f"gru_{k}.w_0").reshape(-1)  # Paddle keeps [H, 2H] then [H, H]
        out[f"input_w{k}"] = read_paddle_tensor(weights / f"fc_{k}.w_0")  # (in, 3H): update, reset, candidate
        out[f"input_b{k}"] = read_paddle_tensor(weights / f"fc_{k}.b_0") + read_paddle_tensor(
            weights / f"gru_{k}.b_0"
        ).reshape(-1)
        if gru.size != 3 * HIDDEN * HIDDEN:
            raise SeqlabError(f"expected {3 * HIDDEN * HIDDEN} weights", path=weights / f"gru_{k}.w_0")
        out[f"gates_w{k}"] = gru[: 2 * HIDDEN * HIDDEN].reshape(HIDDEN, 2 * HIDDEN)
        out[f"candidate_w{k}"] = gru[2 * HIDDEN * HIDDEN :].reshape(HIDDEN, HIDDEN)
    out["output_w"] = read_paddle_tensor(weights / "fc_4.w_0")
    out["output_b"] = read_paddle_tensor(weights / "fc_4.b_0")
    expected = buffer_shapes(vocab_size)
    for name, array in out.items():
        if array.shape != expected[name]:
            raise SeqlabError(f"LAC tensor '{name}' is {array.shape}, expected {expected[name]}", path=weights)
    return out


def lac_digest(folder: Path) -> str:
    """SHA-256 of LAC's vocabulary and tensor files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in [folder / "word.dic", *sorted((folder / "model_baseline").iterdir())]:
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def buffer_shapes(vocab_size: int) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {"embedding": (vocab_size, EMBED)}
    for k in range(GRUS):
        shapes[f"input_w{k}"] = (EMBED if k < 2 else 2 * HIDDEN, 3 * HIDDEN)
        shapes[f"input_b{k}"] = (3 * HIDDEN,)
        shapes[f"gates_w{k}"] = (HIDDEN, 2 * HIDDEN)
        shapes[f"candidate_w{k}"] = (HIDDEN, HIDDEN)
    shapes["output_w"] = (2 * HIDDEN, TAGS)
    shapes["output_b"] = (TAGS,)
    return shapes


def reversal(lengths: Tensor, width: int) -> Tensor:
    """(batch, width) positions that reverse each row's first ``length`` steps and keep the padding in place."""
    t = torch.arange(width, device=lengths.device)[None, :]  # (1, width)
    n = lengths[:, None]  # (batch, 1)
    return torch.where(t < n, n - 1 - t, t)  # (batch, width); its own inverse


class LacEncoder(MemoizedModule):
    """Character ids (batch, seq_len) -> the chosen LAC outputs, concatenated, (batch, seq_len, output_dim); zero on
    padding. The weights are buffers, never trained and not saved (:class:`LacFeaturizer` reads them)."""

    traceable = False  # a Python loop over time steps: a trace would fix it at the sample's length

    def __init__(self, vocab_size: int, outputs: list[str], init: dict[str, np.ndarray] | None, cache_mb: int):
        super().__init__(cache_mb)
        for name, shape in buffer_shapes(vocab_size).items():
            value = torch.zeros(shape) if init is None else torch.from_numpy(np.array(init[name], dtype=np.float32))
            self.register_buffer(name, value, persistent=False)  # from jieba at load, not from the model file
        self.outputs = list(outputs)
        self.output_dim = sum(DIMS[o] for o in outputs)

    def _gru(self, inputs: Tensor, k: int) -> Tensor:
        """Paddle's GRU over (batch, steps, 3H) projected inputs, from a zero state -> (batch, steps, H)."""
        gates_w, candidate_w = getattr(self, f"gates_w{k}"), getattr(self, f"candidate_w{k}")
        h = inputs.new_zeros(inputs.shape[0], HIDDEN)  # (batch, H)
        out = []
        for step in inputs.unbind(1):  # (batch, 3H)
            update, reset = torch.sigmoid(step[:, : 2 * HIDDEN] + h @ gates_w).chunk(2, dim=-1)  # (batch, H) each
            candidate = torch.tanh(step[:, 2 * HIDDEN :] + (reset * h) @ candidate_w)  # (batch, H)
            h = h + update * (candidate - h)  # (1 - u) h + u c
            out.append(h)
        return torch.stack(out, dim=1)

    def run(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """(batch, width) ids of sentences of ``lengths`` -> (batch, width, output_dim), without gradients."""
        with torch.no_grad():
            embedded = x = self.embedding[ids]  # (batch, width, 128)
            back = reversal(lengths, ids.shape[1])[:, :, None]  # (batch, width, 1)
            for layer in range(2):
                forward, backward = 2 * layer, 2 * layer + 1
                ahead = self._gru(x @ getattr(self, f"input_w{forward}") + getattr(self, f"input_b{forward}"), forward)
                mirrored = x.gather(1, back.expand(-1, -1, x.shape[-1]))  # each sentence back to front
                behind = self._gru(
                    mirrored @ getattr(self, f"input_w{backward}") + getattr(self, f"input_b{backward}"), backward
                ).gather(1, back.expand(-1, -1, HIDDEN))  # (batch, width, H), in reading order again
                x = torch.cat([ahead, behind], dim=-1)  # (batch, width, 2H)
            parts = {"embeddings": embedded, "states": x, "emissions": x @ self.output_w + self.output_b}
            return torch.cat([parts[o] for o in self.outputs], dim=-1)  # (batch, width, output_dim)

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        ids = inputs["ids"]  # (batch, seq_len)
        memo = self.active_memo()
        if memo is None:
            out = self.run(ids, ctx.lengths)
        else:
            lengths = ctx.lengths

            def run(pick: Tensor, width: int) -> Tensor:
                return self.run(ids[pick, :width], lengths[pick])

            out = memoized(ids, lengths.tolist(), memo, run)
        return out * ctx.mask.unsqueeze(-1)  # (batch, seq_len, output_dim)


class LacFeaturizer(Featurizer):
    """LAC's vocabulary and weights, read from the installed jieba when the model is built and when it is loaded; the
    model folder records their SHA-256, and a jieba whose LAC files differ is an error at load, not other tags."""

    config: LacConfig

    def __init__(self, name: str, config: LacConfig):
        super().__init__(name, config)
        self.itos: list[str] = []
        self.index: dict[str, int] = {}
        self.digest = ""
        self._weights: dict[str, np.ndarray] | None = None

    def _read(self) -> None:
        folder = lac_folder()
        self.itos = read_vocabulary(folder / "word.dic")
        self.index = {c: i for i, c in enumerate(self.itos)}
        self._weights = read_weights(folder, len(self.itos))
        self.digest = lac_digest(folder)

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        self._read()

    def state(self) -> dict:
        return {"model": "jieba/lac_small", "sha256": self.digest}

    def load_state(self, state: Any, where: str) -> None:
        if (
            not isinstance(state, dict)
            or state.get("model") != "jieba/lac_small"
            or not isinstance(state.get("sha256"), str)
        ):
            raise SeqlabError(f"{where}: expected {{'model': 'jieba/lac_small', 'sha256': ...}}")
        self._read()
        if self.digest != state["sha256"]:
            raise SeqlabError(
                f"{where}: the installed jieba's LAC model (sha256 {self.digest[:12]}...) is not the one this model "
                f"was trained with ({state['sha256'][:12]}...): install the jieba it was trained with"
            )

    def encode(self, sentence: Sentence) -> np.ndarray:
        index, oov = self.index, self.index[OOV]
        return np.fromiter((index.get(t, oov) for t in sentence.tokens), dtype=np.int64, count=len(sentence.tokens))

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len)

    def module(self) -> LacEncoder:
        return LacEncoder(len(self.itos), self.config.outputs, self._weights, self.config.cache_mb)


class LacWords(WordTable):
    """Words read alone by LAC -> one vector each, (WORD_DIM,): the forward GRU's state after the last character,
    the backward GRU's after the first, and the tag scores averaged over the characters. What LAC knows of a word
    out of context (北京 alone reads as a place), for a lattice's words (``lattice`` option ``lac``); for jieba's
    337k words at most 211 MB of vectors in a table of 328 MB (:class:`~seqlab.features.word_table.WordTable`)."""

    def __init__(self, name: str):
        super().__init__(WORD_DIM)
        self.featurizer = LacConfig(outputs=["states", "emissions"], cache_mb=0).build(name)
        self._encoder: LacEncoder | None = None

    def read(self) -> None:
        """Read LAC from the installed jieba (at fit; :meth:`load_state` reads it at load)."""
        self.featurizer.fit([], [], 0)

    def state(self) -> dict:
        return self.featurizer.state()

    def load_state(self, state: Any, where: str) -> None:
        self.featurizer.load_state(state, where)

    def _read(self, words: list[str]) -> np.ndarray:
        if self._encoder is None:
            self._encoder = self.featurizer.module()
        index, oov = self.featurizer.index, self.featurizer.index[OOV]
        lengths = torch.tensor([len(w) for w in words])  # (n,)
        ids = pad_ids([np.array([index.get(c, oov) for c in w], dtype=np.int64) for w in words], int(lengths.max()))
        out = self._encoder.run(ids, lengths)  # (n, width, 256 + 57)
        last = out[torch.arange(len(words)), lengths - 1, :HIDDEN]  # (n, H): forward, after the last character
        first = out[:, 0, HIDDEN : 2 * HIDDEN]  # (n, H): backward, after the first
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1)  # (n, width, 1)
        scores = (out[:, :, 2 * HIDDEN :] * mask).sum(1) / lengths[:, None]  # (n, TAGS)
        return torch.cat([last, first, scores], dim=-1).numpy()  # (n, WORD_DIM)
