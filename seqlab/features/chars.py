"""Character features: each distinct token of a batch is encoded once by a char CNN or char BiLSTM.

Character encoders see padded characters as zero vectors (``padding_idx``) and mask them before
pooling, so a word's features never depend on the longest word of its batch.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.data.token_types import TypeArrays, TypedTokens, first_appearances
from seqlab.data.vocab import Vocab
from seqlab.features.base import (
    FEATURES,
    FeatureConfig,
    FeatureModule,
    VocabFeaturizer,
    flat_tokens,
    memo_lookup,
    pad_flat,
    pad_ids,
)
from seqlab.nn.context import Context
from seqlab.nn.lstm import BiLSTM
from seqlab.nn.versions import weights_key
from seqlab.registry import ConfigCheckError, check_error


@FEATURES.register
class CharsConfig(FeatureConfig):
    type: Literal["chars"] = "chars"
    encoder: Literal["cnn", "lstm"] = Field("cnn", description="Ma and Hovy's char CNN by default")
    dim: int = Field(30, gt=0, le=1024, description="30d character embeddings (Ma and Hovy; PSA paper)")
    hidden: int = Field(50, gt=0, le=4096, description="CNN filters, or BiLSTM total size (PSA paper: 100)")
    kernel: int | list[int] = Field(
        3,
        description="CNN window of Ma and Hovy; a list (e.g. [1, 2, 3]) gives `hidden` filters per width, "
        "concatenated (Li et al. 2019: 20 per width 1-3)",
    )
    char_type: bool = Field(
        False,
        description="append a 4d one-hot character type (upper, lower, digit, "
        "other) to each char embedding (Chiu and Nichols)",
    )
    max_len: int = Field(30, gt=0, le=1000, description="longer tokens (URLs, numbers) are cut for the char encoder")

    @field_validator("kernel")
    @classmethod
    def _widths(cls, v: int | list[int]) -> int | list[int]:
        widths = [v] if isinstance(v, int) else v
        if not widths or len(widths) > 8 or any(w < 1 or w > 15 for w in widths) or len(set(widths)) != len(widths):
            raise ValueError("expected a width in 1..15 or a list of up to 8 distinct widths")
        return v

    @property
    def kernels(self) -> list[int]:
        return [self.kernel] if isinstance(self.kernel, int) else list(self.kernel)

    @model_validator(mode="after")
    def _even_lstm(self) -> CharsConfig:
        if self.encoder == "lstm" and self.hidden % 2:
            raise check_error(
                ConfigCheckError("hidden", f"a char BiLSTM needs an even size (two directions), got {self.hidden}")
            )
        return self

    def output_dim(self) -> int:
        return self.hidden * len(self.kernels) if self.encoder == "cnn" else self.hidden

    def build(self, name: str) -> CharsFeaturizer:
        return CharsFeaturizer(name, self)


CHAR_TYPES = ("upper", "lower", "digit", "other")


def char_type_table(itos: list[str]) -> Tensor:
    """(num_chars, 4) one-hot character type of each vocabulary entry; zeros for padding."""
    table = torch.zeros(len(itos), len(CHAR_TYPES))
    for i, c in enumerate(itos):
        if i == 0:
            continue  # padding
        kind = 3
        if len(c) == 1:
            kind = 0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3
        table[i, kind] = 1.0
    return table


class CharEmbedding(nn.Module):
    """Trained char vectors, optionally followed by a fixed one-hot character type."""

    def __init__(self, num_chars: int, dim: int, types: Tensor | None = None):
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        # derived from the vocabulary, so not saved: persistent=False
        self.register_buffer("types", types, persistent=False)
        self.output_dim = dim + (0 if types is None else types.shape[1])

    def forward(self, chars: Tensor) -> Tensor:
        x = nn.functional.embedding(chars, self.embed.weight, 0)  # (words, chars, dim); padding: zeros
        if self.types is not None:
            x = torch.cat([x, self.types[chars]], dim=-1)  # (words, chars, dim + 4)
        return x


class CharCNN(nn.Module):
    """Ma and Hovy (2016): char embeddings -> 1-d convolutions (one filter bank per width) -> masked max
    over characters, concatenated over widths.

    Each convolution is written as unfold + one matrix product: for these tiny inputs (a few hundred
    words of ~10 characters) that is several times faster on CPU than a conv1d call, forward and backward.

    On CPU it runs over the batch's words packed end to end instead (:meth:`_packed`): a batch's words are
    padded to its longest, about 2.7 times their mean length in CoNLL-2000, and the padding cost as much as
    the characters. Each window holds the same values in the same order either way, so both forms give the
    same vectors (bit for bit on the 6,419 new words of a CoNLL-2000 test pass: BENCHMARKS.md, sixteenth
    session); export traces the padded form (no data-dependent sizes), and the GPU runs it too.
    """

    def __init__(self, num_chars: int, dim: int, filters: int, kernels: list[int] | int, types: Tensor | None = None):
        super().__init__()
        self.chars = CharEmbedding(num_chars, dim, types)
        self.kernels = [kernels] if isinstance(kernels, int) else list(kernels)
        d = self.chars.output_dim
        self.windows = nn.ModuleList(nn.Linear(d * k, filters) for k in self.kernels)  # (k x d) window -> filters
        self.output_dim = filters * len(self.kernels)

    def forward(self, chars: Tensor) -> Tensor:
        """chars (words, max_word_len) -> (words, filters * widths)"""
        if chars.device.type == "cpu" and not torch.jit.is_tracing():
            return self._packed(chars)
        return self._padded(chars)

    def _padded(self, chars: Tensor) -> Tensor:
        """:meth:`forward` over the padded (words, max_word_len) matrix, the padding masked out of the max."""
        char_mask = chars.ne(0).unsqueeze(2)  # (words, chars, 1)
        x = self.chars(chars)  # (words, chars, d)
        out = []
        for k, window in zip(self.kernels, self.windows):
            left = k // 2
            padded = nn.functional.pad(x, (0, 0, left, k - 1 - left))  # (words, chars + k - 1, d)
            # the k shifted views stacked last = padded.unfold(1, k, 1), in a form ONNX export can trace
            steps = torch.stack([padded[:, i : i + x.shape[1]] for i in range(k)], dim=-1)  # (words, chars, d, k)
            h = window(steps.flatten(2))  # (words, chars, filters)
            out.append(h.masked_fill(~char_mask, float("-inf")).max(dim=1).values)  # (words, filters)
        return out[0] if len(out) == 1 else torch.cat(out, dim=-1)

    def _packed(self, chars: Tensor) -> Tensor:
        """:meth:`forward` over one sequence of every word's characters, each word followed by enough zeros
        (padding's embedding) that no window reaches from one word into the next: the window products run
        on the characters alone, and each word's max is a segment max. 1.3-1.5x the padded form's forward +
        backward on CoNLL-2000 training batches (BENCHMARKS.md, thirteenth session)."""
        _words, width = chars.shape
        real = chars.ne(0)  # (words, width): characters come first, then padding
        lengths = real.sum(1)  # (words,) >= 1: an empty token is encoded as one unknown character
        gap = max(max(k // 2, k - 1 - k // 2) for k in self.kernels)  # zeros between two words
        spans = lengths + gap
        starts = torch.cumsum(spans, 0) - spans + gap  # (words,): where each word's first character goes
        total = int(spans.sum()) + gap
        where = (starts[:, None] + torch.arange(width))[real]  # (characters,) position of each, word by word
        flat = chars.new_zeros(total)
        flat[where] = chars[real]
        x = self.chars(flat)  # (total, d); zeros between words
        out = []
        for k, window in zip(self.kernels, self.windows):
            left = k // 2
            padded = nn.functional.pad(x, (0, 0, left, k - 1 - left))  # (total + k - 1, d)
            h = window(_windows(padded, total, k)).index_select(0, where)  # (characters, filters)
            out.append(torch.segment_reduce(h, "max", lengths=lengths))  # (words, filters)
        return out[0] if len(out) == 1 else torch.cat(out, dim=-1)


def _windows(padded: Tensor, total: int, k: int) -> Tensor:
    """padded (total + k - 1, d) -> (total, d * k): row t holds padded[t: t + k] in (d, k) order, the stacked
    shifted views of :meth:`CharCNN._padded`. Without gradients filled by k strided copies, 2-3x faster than
    ``torch.stack`` (CoNLL-2000 test's new words); with them stacked, whose backward is the faster one
    (1.18x a training batch's char CNN forward + backward). The same values either way."""
    if torch.is_grad_enabled():
        return torch.stack([padded[i : i + total] for i in range(k)], dim=-1).flatten(1)
    steps = padded.new_empty(total, padded.shape[1], k)  # (total, d, k)
    for i in range(k):
        steps[:, :, i] = padded[i : i + total]
    return steps.flatten(1)


class CharLSTM(nn.Module):
    """Lample et al. (2016): char BiLSTM; the word is the concatenation of the two final states
    (the forward state after the last character, the backward state after the first)."""

    def __init__(self, num_chars: int, dim: int, hidden: int, types: Tensor | None = None):
        super().__init__()
        self.chars = CharEmbedding(num_chars, dim, types)
        self.lstm = BiLSTM(self.chars.output_dim, hidden // 2, packed_inference=True)  # pack when not training
        self.output_dim = 2 * (hidden // 2)

    def forward(self, chars: Tensor) -> Tensor:
        """chars (words, max_word_len), right-padded with 0 -> (words, hidden)"""
        lengths = chars.ne(0).sum(1).clamp(min=1)  # (words,)
        out_f, out_b = self.lstm.directions(self.chars(chars), lengths)  # (words, len, hidden/2) each
        last = out_f.gather(1, (lengths - 1)[:, None, None].expand(-1, 1, out_f.shape[2])).squeeze(1)
        return torch.cat([last, out_b[:, 0]], dim=-1)  # (words, hidden)


MEMO_FLOATS = 1 << 22  # an inference memo holds at most this many floats (16 MiB in float32), then starts afresh


class TokenMemo:
    """Inference memo of a char encoder: each token's vector, computed once while the weights stay the same.

    Keyed by the token's character ids without padding, so a word's vector is the one its first batch gave
    (the char encoders mask padding, so any batch gives it, up to the last bit of a matrix product's
    rounding). Valid for one set of weights: ``key`` holds each parameter's storage and version counter,
    which an optimiser step, ``load_state_dict`` or a ``.to()`` changes.

    A batch's tokens are looked up together, in whole-array operations: a 64-bit hash of each token's ids (a
    sum of the ids times fixed odd multipliers, modulo 2^64, padding adding nothing) is found in the sorted
    hashes of the stored tokens, and the stored ids of the row it names confirm the match, so a collision is
    a miss, never another token's vector. The bytes of each token's ids as keys of a dict, looked up one
    token at a time, took twice as long (20 ms a CoNLL-2000 test pass at batch 64, one thread), all of it
    holding Python's lock while the other batch's thread waited for it."""

    def __init__(self, key: tuple, dim: int, dtype: torch.dtype):
        self.key = key
        with torch.inference_mode(False):  # a normal tensor, written from inference mode and from no_grad
            self.table = torch.empty(max(1, MEMO_FLOATS // dim), dim, dtype=dtype)  # (capacity, dim)
        self.used = 0  # rows of ``table`` filled
        self.hashes = np.empty(0, dtype=np.uint64)  # (stored,) ascending: the stored tokens' hashes
        self.rows = np.empty(0, dtype=np.int64)  # (stored,) the row of ``table`` of each hash
        self.chars = np.zeros((0, 1), dtype=np.int64)  # (rows, width) each row's token's ids, 0-padded
        self.lengths = np.zeros(0, dtype=np.int64)  # (rows,) each row's token's characters

    def full(self, extra: int) -> bool:
        return self.used + extra > self.table.shape[0]

    def find(self, ids: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """ids (tokens, width) 0-padded, their :func:`token_hashes` -> (tokens,) row of each, -1 if not stored."""
        if not len(self.hashes):
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        rows = np.where(self.hashes[at] == hashes, self.rows[at], -1)  # (tokens,)
        hit = np.flatnonzero(rows >= 0)
        if len(hit):  # the stored ids confirm each match; a hash collision is a miss
            stored, width = rows[hit], ids.shape[1]
            if width <= self.chars.shape[1]:  # equal on the batch's width, and the stored token no longer
                same = (self.chars[stored, :width] == ids[hit]).all(axis=1) & (self.lengths[stored] <= width)
            else:  # equal on the stored width, and the batch's token no longer
                narrow = self.chars.shape[1]
                same = (self.chars[stored] == ids[hit, :narrow]).all(axis=1) & ~ids[hit, narrow:].any(axis=1)
            rows[hit[~same]] = -1
        return rows

    def add(self, ids: np.ndarray, hashes: np.ndarray, vectors: torch.Tensor) -> None:
        """Store new tokens (ids (new, width), hashes (new,), vectors (new, dim)) in the next rows. One whose hash a
        stored token has (the same token, stored by another batch meanwhile, or a collision) stays out, as does a
        second token with one hash: each is computed again when next seen."""
        _, first = np.unique(hashes, return_index=True)  # ascending distinct hashes, each one's first token
        at = np.searchsorted(self.hashes, hashes[first])
        taken = np.zeros(len(first), dtype=bool)
        inside = at < len(self.hashes)
        taken[inside] = self.hashes[at[inside]] == hashes[first][inside]
        keep, at = first[~taken], at[~taken]  # (kept,) which tokens, and where their hashes go
        start, n = self.used, len(keep)
        self.table[start : start + n] = vectors[torch.from_numpy(keep)]
        self.used += n
        width = max(ids.shape[1], self.chars.shape[1])
        if self.used > len(self.chars) or width > self.chars.shape[1]:  # grow: rows doubling, columns as needed
            grown = np.zeros((max(self.used, 2 * len(self.chars)), width), dtype=np.int64)
            grown[: len(self.chars), : self.chars.shape[1]] = self.chars
            self.chars = grown
            self.lengths = np.concatenate([self.lengths, np.zeros(len(grown) - len(self.lengths), dtype=np.int64)])
        self.chars[start : start + n, : ids.shape[1]] = ids[keep]
        self.chars[start : start + n, ids.shape[1] :] = 0
        self.lengths[start : start + n] = np.count_nonzero(ids[keep], axis=1)
        self.hashes = np.insert(self.hashes, at, hashes[keep])
        self.rows = np.insert(self.rows, at, start + np.arange(n))


#: Fixed odd multipliers of :func:`token_hashes`, one per character position: tokens are cut to at most
#: ``max_len`` <= 1000 characters (wider batches skip the memo).
_MULTIPLIERS = 2 * np.random.default_rng(20261125).integers(0, 2**63, size=1024, dtype=np.uint64) + np.uint64(1)


def token_hashes(ids: np.ndarray) -> np.ndarray:
    """ids (tokens, width <= 1024) int64, 0-padded -> (tokens,) uint64 hashes, whatever the padding's width."""
    return (ids.astype(np.uint64) * _MULTIPLIERS[: ids.shape[1]]).sum(axis=1, dtype=np.uint64)  # modulo 2^64


class CharFeatures(FeatureModule):
    """Encodes each distinct token of the batch once and spreads the vectors over its positions.

    At inference on CPU (no gradients, eval mode, not being traced for export) the vectors of tokens
    seen in earlier batches come from a :class:`TokenMemo`: tagging text, most tokens are frequent words,
    so the char encoder runs on the few new ones (the char CNN was a quarter of batch-64 tagging time)."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.output_dim = encoder.output_dim
        self._memo: TokenMemo | None = None
        self._memo_lock = threading.Lock()  # a server may tag from more than one thread
        self.register_load_state_dict_post_hook(CharFeatures._forget)  # load_state_dict(assign=True) swaps them

    @staticmethod
    def _forget(module: CharFeatures, incompatible_keys=None) -> None:
        """Drop the memo and the cached parameter list (weights loaded, moved or converted)."""
        module.__dict__.pop("_params", None)
        module._memo = None

    def _apply(self, fn, recurse: bool = True):  # .to(), .float(), .cuda() ...
        CharFeatures._forget(self)
        return super()._apply(fn, recurse)

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle: without the memo and its lock
        state = dict(self.__dict__, _memo=None)
        del state["_memo_lock"]
        state.pop("_params", None)  # the copy's own parameters, found again on first use
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._memo_lock = threading.Lock()

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        chars = inputs["chars"]  # (distinct_tokens, max_word_len), 0 = padding
        if self.training or torch.is_grad_enabled() or chars.device.type != "cpu" or torch.jit.is_tracing():
            distinct = self.encoder(chars)  # (distinct_tokens, out)
        else:
            distinct = self._memoised(chars)
        rows = inputs["rows"]  # (batch, seq)
        # index_select, not distinct[rows]: the same values, and its backward (index_add_) adds a token's gradients
        # in a fixed order, where advanced indexing's (index_put_ with accumulate on CPU) varies from run to run
        per_token = distinct.index_select(0, rows.reshape(-1)).view(*rows.shape, -1)  # (batch, seq, out)
        return per_token * ctx.mask.unsqueeze(-1)  # zero on padding

    def _memoised(self, chars: Tensor) -> Tensor:
        """(distinct_tokens, out): memoised rows, the encoder run once on the rest. The lock is held to look
        rows up and to add new ones, not while the encoder runs: batches tagged side by side
        (:func:`seqlab.runtime.devices.run_concurrently`) each encode their new tokens at the same time."""
        if len(chars) > MEMO_FLOATS // self.output_dim or chars.shape[1] > len(_MULTIPLIERS):
            return self.encoder(chars)  # more distinct tokens than a memo holds, or longer ones than it hashes
        ids = chars.numpy()  # (distinct_tokens, width)
        hashes = token_hashes(ids)
        with self._memo_lock:
            memo = self._current_memo(len(chars))
            where = memo.find(ids, hashes)  # (distinct_tokens,)
        new = np.flatnonzero(where < 0)
        # rows once written never change, so they are read without the lock
        out = memo.table.index_select(0, torch.from_numpy(np.maximum(where, 0)))  # (distinct_tokens, out)
        if len(new):  # tokens not seen before
            fresh = self.encoder(chars[torch.from_numpy(new)])  # (new, out)
            out[torch.from_numpy(new)] = fresh
            with self._memo_lock:
                if self._memo is memo and not memo.full(len(new)):  # else: computed again when next seen
                    memo.add(ids[new], hashes[new], fresh)
        return out

    def _current_memo(self, tokens: int) -> TokenMemo:
        """The memo for the current weights with room for ``tokens`` more rows (a new one if not)."""
        params = self.__dict__.get("_params")
        if params is None:  # kept until a load or .to() (_forget); an optimiser step bumps the versions
            params = self.__dict__["_params"] = list(self.encoder.parameters())
        key = weights_key(params)
        memo = self._memo
        if memo is None or memo.key != key or memo.full(tokens):
            memo = self._memo = TokenMemo(key, self.output_dim, params[0].dtype)
        return memo


class _IdChars(dict):
    """``str.translate``'s table: a known character's ordinal -> its id as a character, any other -> the unknown id."""

    def __init__(self, known: dict[int, str], unknown: str):
        super().__init__(known)
        self.unknown = unknown

    def __missing__(self, key: int) -> str:
        return self.unknown


#: From this many tokens in a batch on, collation finds the distinct tokens with whole-array operations.
COLLATE_VECTOR_FROM = 128


class CharsFeaturizer(VocabFeaturizer):
    """The memo maps a token to its char-id array: one array per token type, which collation relies on."""

    config: CharsConfig

    def _per_type(self) -> TypeArrays:
        return TypeArrays(self._char_id_rows)

    def set_vocab(self, vocab: Vocab) -> None:
        super().set_vocab(vocab)
        # ordinal of each known character -> its id as a character, unknown ones -> the unknown id: str.translate
        # then maps a whole text in C (ids must be code points UTF-32 can hold: below the surrogates)
        unk = vocab.unk_index
        self._id_chars = (
            _IdChars({ord(c): chr(i) for c, i in vocab.stoi.items() if len(c) == 1}, chr(unk))
            if unk is not None and len(vocab) < 0xD800
            else None
        )

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        self.set_vocab(Vocab.from_counts(Counter(c for s in train for t in s.tokens for c in t)))

    def _char_ids(self, token: str) -> np.ndarray:
        chars = token[: self.config.max_len]
        return (
            np.fromiter((self.vocab.index(c) for c in chars), dtype=np.int64, count=len(chars))
            if chars
            else np.ones(1, dtype=np.int64)
        )

    def _char_id_rows(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every token's :meth:`_char_ids` end to end (total,) and each one's count (tokens,): the characters of
        all tokens mapped to ids by one ``str.translate`` (0.3 against 3 us a new CoNLL-2000 token)."""
        if self._id_chars is None:
            arrays = [self._char_ids(t) for t in tokens]
            return (
                np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64),
                np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays)),
            )
        cut = [t[: self.config.max_len] for t in tokens]
        lengths = np.fromiter(map(len, cut), dtype=np.int64, count=len(cut))
        text = "".join(cut).translate(self._id_chars).encode("utf-32-le")
        ids = np.frombuffer(text, dtype="<u4").astype(np.int64)  # (sum(lengths),)
        empty = lengths == 0
        if empty.any():  # an empty token is one unknown character, as _char_ids gives it
            ids = np.insert(ids, (np.cumsum(lengths) - lengths)[empty], 1)
            lengths[empty] = 1
        return ids, lengths

    def encode(self, sentence: Sentence) -> list[np.ndarray]:
        return memo_lookup(self._cache, sentence.tokens, self._char_ids)

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, Tensor]:
        tokens, lengths = flat_tokens(sentences)
        if len(tokens) < COLLATE_VECTOR_FROM:
            return super().collate_sentences(sentences, seq_len)
        return self._collate_flat(memo_lookup(self._cache, tokens, self._char_ids), lengths, seq_len)

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, Tensor]:
        """:meth:`collate`'s tensors from the type ids: the batch's distinct types in order of first appearance
        are its distinct tokens (the memo's char arrays are one per string, as the types are)."""
        if len(typed.tokens) < COLLATE_VECTOR_FROM:
            return self.collate_sentences(typed.sentences, seq_len)
        self._by_type.ensure(typed)
        distinct, rows = typed.distinct()  # (distinct_tokens,), (tokens,)
        return {
            "chars": torch.from_numpy(self._by_type.padded(distinct)),  # (distinct_tokens, max_word_len)
            "rows": pad_flat(rows, typed.lengths, seq_len),
        }  # (batch, seq_len)

    def collate(self, items: list[list[np.ndarray]], seq_len: int) -> dict[str, Tensor]:
        """Equal tokens share one char array (memoised), so each distinct token is stored once, in the order of
        first appearance. Found token by token in small batches, and by the arrays' identities in whole-array
        operations from ``COLLATE_VECTOR_FROM`` tokens on (1.6x at 64 sentences of 24 tokens, 1.5x slower at
        one): the same tensors either way."""
        if sum(map(len, items)) >= COLLATE_VECTOR_FROM:
            return self._collate_many(items, seq_len)
        rows: dict[int, int] = {}  # id(char array) -> row
        distinct: list[np.ndarray] = []
        token_rows = []
        for sentence in items:
            r = np.empty(len(sentence), dtype=np.int64)
            for j, cj in enumerate(sentence):
                row = rows.get(id(cj))
                if row is None:
                    row = rows[id(cj)] = len(distinct)
                    distinct.append(cj)
                r[j] = row
            token_rows.append(r)
        chars = np.zeros((len(distinct), max(len(c) for c in distinct)), dtype=np.int64)
        for i, cj in enumerate(distinct):
            chars[i, : len(cj)] = cj
        # chars: (distinct_tokens, max_word_len), 0 = padding; rows: (batch, seq_len) row of each token
        return {"chars": torch.from_numpy(chars), "rows": pad_ids(token_rows, seq_len)}

    @staticmethod
    def _collate_many(items: list[list[np.ndarray]], seq_len: int) -> dict[str, Tensor]:
        """:meth:`collate` for large batches."""
        flat = [c for sentence in items for c in sentence]  # each token's char array, sentence by sentence
        sentence_lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        return CharsFeaturizer._collate_flat(flat, sentence_lengths, seq_len)

    @staticmethod
    def _collate_flat(flat: list[np.ndarray], sentence_lengths: np.ndarray, seq_len: int) -> dict[str, Tensor]:
        """Each token's char array (memoised: one per token type), sentence after sentence, and the sentences'
        lengths (batch,) -> :meth:`collate`'s tensors, with whole-array operations."""
        ids = np.fromiter(map(id, flat), dtype=np.uint64, count=len(flat))  # (tokens,)
        first, rows = first_appearances(ids)  # distinct arrays in order of first appearance, each token's row
        distinct = [flat[i] for i in first]
        lengths = np.fromiter(map(len, distinct), dtype=np.int64, count=len(distinct))  # (distinct_tokens,)
        chars = np.zeros((len(distinct), int(lengths.max())), dtype=np.int64)
        chars[np.arange(chars.shape[1]) < lengths[:, None]] = np.concatenate(distinct)  # row-major = token order
        return {"chars": torch.from_numpy(chars), "rows": pad_flat(rows, sentence_lengths, seq_len)}  # (batch, seq_len)

    def module(self) -> CharFeatures:
        c = self.config
        types = char_type_table(self.vocab.itos) if c.char_type else None
        if c.encoder == "cnn":
            return CharFeatures(CharCNN(len(self.vocab), c.dim, c.hidden, c.kernels, types))
        return CharFeatures(CharLSTM(len(self.vocab), c.dim, c.hidden, types))
