"""FLAT: the flat-lattice Transformer with relative span positions (Li et al., paper 002, Section 3).

The layer reads the token (character) vectors x, (batch, n, input_dim), and, when ``lattice`` names a
lattice feature, the lexicon words that feature published, (batch, W, word_dim), with their head and
tail token positions. Characters and words are projected separately into d_model and laid out as one
sequence of L = n + W spans: the batch's character positions first (span i = token i, head = tail = i),
then its word positions. Per layer and head:

* four relative distances between spans i and j                                   (Eqs. 4-7)
    d_hh = head_i - head_j,  d_ht = head_i - tail_j,  d_th = tail_i - head_j,  d_tt = tail_i - tail_j
* sinusoidal encodings p_d of each distance                                         (Eqs. 9-10)
* the relative span encoding  R_ij = ReLU(W_r [p_hh; p_th; p_ht; p_tt])             (Eq. 8)
* scores  A*_ij = q_i k_j + q_i (R_ij W_kR) + u k_j + v (R_ij W_kR),
  q = E W_q, k = E W_kE  (per head; ``scale: true`` divides by sqrt(d_head))         (Eq. 11)
* softmax over the allowed spans, times V = E W_v, heads concatenated, an output projection, then
  residual + layer norm, a ReLU feed-forward, residual + layer norm (the vanilla Transformer, post-norm)

Only the character positions leave the layer (the CRF tags characters), after output dropout.

**Memory.** The naive R is (batch, L, L, d_model) (4x that before W_r): about 10 GB at a few hundred
characters with their words. W_r is linear, so W_r [p_hh; p_th; p_ht; p_tt] = T_hh[d_hh] + T_th[d_th]
+ T_ht[d_ht] + T_tt[d_tt] where T_k = p(D) W_r,k over the distinct distance values D = -(n-1) .. n-1
(2n - 1 rows per kind). R's rows are then gathered from these four small tables block by block of query
spans (about ``BLOCK_ELEMENTS`` floats per block), each block reduced at once against the queries, and
in training each block is recomputed in the backward pass instead of stored (activation
checkpointing). Peak memory is O(batch L^2 heads) for the scores plus one block, against
O(batch L^2 d_model) naively (an R of up to ``WHOLE_ELEMENTS`` floats, 64 MB, is made whole and kept for
the backward pass: faster, and small); ``relative: naive`` computes the textbook formula (the oracle of the
tests and the baseline of the memory benchmark). R_ij depends only on d_hh and the two spans' lengths
(d_th = d_hh + a, d_ht = d_hh - b, d_tt = d_hh + a - b, a and b the spans' tail - head), so it is a row of a
small table of ReLU'd sums per (a, b, d_hh). Between two words R is one gather from that table (instead of
four gathers, three sums and a ReLU of R's size: 1.5x faster training). A character has one length, so for
the pairs with a character the table has few rows per query: projected through W_kR per head, one matrix
product of the queries with it holds every such score, and a gather picks each pair's, with no R at all
(training 1.67x faster on Resume, 1.22x on OntoNotes 4, than with R for the pairs of a character and a word).

**Variants** (paper Tables 2-3): ``self_matched: false`` is FLAT_msm (a character cannot attend to the
words that contain it); ``max_distance: 10`` is FLAT_mld (no attention between spans more than 10
apart, the distance of two spans being the gap between them: 0 when they overlap); ``distances: hh``
is FLAT_head (R from d_hh alone). ``lattice: null`` is the lexicon-free Transformer with the same
relative encoding (a TENER-like baseline: all four distances are then i - j).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.registry import ConfigCheckError

BLOCK_ELEMENTS = 1 << 22  # floats in one (batch, query rows, L, d_model) block of R: 16 MB
WHOLE_ELEMENTS = 1 << 24  # an R of at most this many floats (64 MB: training batches of short sentences) is
# computed in one piece and kept for the backward pass, which is faster than recomputing it
LENGTH_TABLE_ELEMENTS = 1 << 22  # at most this many floats in the table of ReLU'd sums per span lengths
KINDS = ("hh", "th", "ht", "tt")  # the order of Eq. 8's concatenation


@ENCODERS.register
class FlatConfig(EncoderConfig):
    """Flat-lattice Transformer layers; defaults: the paper's Table 5 (OntoNotes, MSRA)."""

    type: Literal["flat"] = "flat"
    lattice: str | None = Field(
        "lexicon",
        description="the lattice feature whose words join the characters; null: characters only (TENER-like baseline)",
    )
    d_model: int = Field(160, ge=2, le=8192, description="Table 5: 160")
    heads: int = Field(8, ge=1, le=256, description="Table 5: 8 (Table 6 searched 4, 8, 12 for Resume)")
    ff: int = Field(480, ge=1, le=65536, description="feed-forward size, Table 5: 480")
    layers: int = Field(1, ge=1, le=24, description="one layer, as the paper (Section 4.1)")
    distances: Literal["four", "hh"] = Field("four", description="'hh': R from d_hh only (FLAT_head, Table 3)")
    self_matched: bool = Field(
        True, description="false: characters cannot attend to their self-matched words (FLAT_msm)"
    )
    max_distance: int | None = Field(
        None, ge=0, le=100_000, description="10: no attention beyond distance 10 (FLAT_mld); null: none"
    )
    scale: bool = Field(False, description="Eq. 11 has no 1/sqrt(d_head); true adds it")
    attention_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="on the attention weights")
    ff_dropout: float = Field(
        0.15, ge=0.0, lt=1.0, description="inside the feed-forward and on each sublayer's output (the authors' code)"
    )
    output_dropout: float = Field(0.3, ge=0.0, lt=1.0, description="before the CRF, Table 5: 0.3")
    relative: Literal["blocked", "naive"] = Field(
        "blocked", description="how R is computed: blocked (memory O(L^2 heads)) or naive (O(L^2 d_model))"
    )

    def check(self, input_dim: int, published: Mapping[str, int]) -> None:
        if self.d_model % self.heads:
            raise ConfigCheckError("heads", f"{self.heads} heads do not divide d_model {self.d_model}")
        if self.lattice is not None and self.lattice not in published:
            raise ConfigCheckError(
                "lattice",
                f"no feature '{self.lattice}' publishes lattice words: add "
                f"'{self.lattice}: {{type: lattice}}' to model.embedder.features",
            )

    def output_dim(self, input_dim: int) -> int:
        return self.d_model

    def build(self, input_dim: int) -> FlatEncoder:
        return self.build_in(input_dim, {})

    def build_in(self, input_dim: int, published: Mapping[str, int]) -> FlatEncoder:
        self.check(input_dim, published)
        word_dim = published[self.lattice] if self.lattice is not None else None
        return FlatEncoder(self, input_dim, word_dim)


def sinusoid(values: Tensor, dim: int) -> Tensor:
    """Eqs. 9-10 for each value: sin(v / 10000^(2k/dim)) at feature 2k, cos at 2k+1. (..., dim)."""
    k2 = torch.arange(0, dim, 2, device=values.device, dtype=torch.float32)  # 2k
    angles = values.float()[..., None] / torch.pow(10000.0, k2 / dim)  # (..., ceil(dim / 2))
    out = torch.empty(*values.shape, dim, device=values.device)
    out[..., 0::2] = torch.sin(angles)
    out[..., 1::2] = torch.cos(angles[..., : dim // 2])
    return out


def span_distances(
    heads: Tensor, tails: Tensor, rows: slice = slice(None), cols: slice = slice(None)
) -> dict[str, Tensor]:
    """The four distance matrices (Eqs. 4-7) for query spans ``rows`` and key spans ``cols``: kind ->
    (batch, rows, cols) long."""
    hi, ti = heads[:, rows, None], tails[:, rows, None]  # (batch, rows, 1)
    hj, tj = heads[:, None, cols], tails[:, None, cols]  # (batch, 1, cols)
    return {"hh": hi - hj, "th": ti - hj, "ht": hi - tj, "tt": ti - tj}


def length_classes(
    heads: Tensor, tails: Tensor, rows: slice, cols: slice, width: int, offset: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The span lengths (tail - head) of the query spans ``rows``, a_values (A,), and of the key spans ``cols``,
    b_values (B,), and for each pair its row (a_i, b_j, d_hh) of an (A, B, width) table whose distances start at
    -offset: (batch, rows, cols) long."""
    hi, ti, hj, tj = heads[:, rows], tails[:, rows], heads[:, cols], tails[:, cols]  # (batch, rows|cols)
    a_values, a_index = torch.unique(ti - hi, return_inverse=True)  # (A,), (batch, rows)
    b_values, b_index = torch.unique(tj - hj, return_inverse=True)  # (B,), (batch, cols)
    pair = a_index[:, :, None] * len(b_values) + b_index[:, None, :]  # (batch, rows, cols)
    return a_values, b_values, pair * width + (hi[:, :, None] - hj[:, None, :] + offset)


def lattice_mask(
    heads: Tensor, tails: Tensor, key_mask: Tensor, num_chars: int, self_matched: bool, max_distance: int | None
) -> Tensor:
    """Which spans each span may attend to: (batch, L, L) bool. Keys must be real spans; FLAT_msm removes a
    character's self-matched words (head_j <= i <= tail_j for a word j), FLAT_mld spans more than
    ``max_distance`` apart (the gap between the spans, 0 when they overlap)."""
    allowed = key_mask[:, None, :].expand(-1, heads.shape[1], -1)  # (batch, L, L)
    if not self_matched:
        pos = torch.arange(num_chars, device=heads.device)[None, :, None]  # (1, n, 1): character i
        hw, tw = heads[:, None, num_chars:], tails[:, None, num_chars:]  # (batch, 1, W)
        inside = (hw <= pos) & (pos <= tw)  # (batch, n, W): word j contains character i
        blocked = torch.zeros_like(allowed)
        blocked[:, :num_chars, num_chars:] = inside
        allowed = allowed & ~blocked
    if max_distance is not None:
        gap = torch.maximum(heads[:, None, :] - tails[:, :, None], heads[:, :, None] - tails[:, None, :])
        allowed = allowed & (gap <= max_distance)  # gap < 0 means the spans overlap
    return allowed


class RelativeSpanEncoding(nn.Module):
    """R_ij = ReLU(W_r [p_hh; p_th; p_ht; p_tt]) (Eq. 8), or ReLU(W_r p_hh) for FLAT_head, reduced against
    per-head query vectors: ``scores(qr, heads, tails)[b, h, i, j] = qr[b, h, i] . R[b, i, j]``."""

    def __init__(self, d_model: int, kinds: tuple[str, ...], naive: bool):
        super().__init__()
        self.d_model, self.kinds, self.naive = d_model, kinds, naive
        self.w_r = nn.Linear(len(kinds) * d_model, d_model)
        self.fixed_span: int | None = None  # set for export: tables of a fixed size, R in one piece

    def naive_r(self, heads: Tensor, tails: Tensor) -> Tensor:
        """The textbook R: (batch, L, L, d_model), through (batch, L, L, kinds * d_model)."""
        dist = span_distances(heads, tails)
        p = torch.cat([sinusoid(dist[k], self.d_model) for k in self.kinds], dim=-1)  # (batch, L, L, 4d)
        return torch.relu(self.w_r(p))  # (batch, L, L, d_model)

    def tables(self, span: int, device: torch.device) -> tuple[Tensor, int]:
        """Per kind, W_r's slice times p(d) for d = -span .. span: (kinds, 2 span + 1, d_model), and the
        offset that maps a distance to its row."""
        values = torch.arange(-span, span + 1, device=device)
        p = sinusoid(values, self.d_model)  # (2 span + 1, d_model)
        w = self.w_r.weight.view(self.d_model, len(self.kinds), self.d_model)  # (out, kind, in)
        t = torch.einsum("vi,oki->kvo", p, w)  # (kinds, 2 span + 1, d_model)
        t = t + torch.cat([self.w_r.bias[None, None], t.new_zeros(len(self.kinds) - 1, 1, self.d_model)])
        return t, span

    def scores(self, qv: Tensor, w: Tensor, heads: Tensor, tails: Tensor, num_chars: int = 0) -> Tensor:
        """The relative term of Eq. 11, ``[b, h, i, j] = qv[b, h, i] . (R_ij W_kR)_h``: qv (batch, heads, L,
        d_head) the per-head queries q_i + v, w (heads, d_head, d_model) W_kR's rows per head -> (batch, heads, L,
        L). ``num_chars``: the first spans are that many characters (head = tail = position), whose rows and
        columns go through :meth:`_products`, R itself only between words."""
        if self.naive:
            return torch.einsum("bhie,bije->bhij", torch.matmul(qv, w), self.naive_r(heads, tails))
        length = qv.shape[2]
        if self.fixed_span is not None:  # a traced graph: no sizes read from the data
            table, offset = self.tables(self.fixed_span, qv.device)
            return self._block(torch.matmul(qv, w), table, heads, tails, slice(None), slice(None), offset)
        span = int(torch.maximum(heads.max(), tails.max()).clamp(min=0)) if heads.numel() else 0
        table, offset = self.tables(span, qv.device)
        n = min(num_chars, length)
        if not n:
            return self._rows(torch.matmul(qv, w), table, heads, tails, 0, slice(None), offset)
        top = self._pairs(qv[:, :, :n], w, table, heads, tails, 0, slice(None), offset)  # (batch, heads, n, L)
        if n == length:
            return top
        words = qv[:, :, n:]
        left = self._pairs(words, w, table, heads, tails, n, slice(0, n), offset)  # (batch, heads, W, n)
        right = self._rows(torch.matmul(words, w), table, heads, tails, n, slice(n, None), offset)  # (b, h, W, W)
        return torch.cat([top, torch.cat([left, right], dim=-1)], dim=2)

    def _pairs(
        self, qv: Tensor, w: Tensor, table: Tensor, heads: Tensor, tails: Tensor, first: int, cols: slice, offset: int
    ) -> Tensor:
        """Query spans first .. first + qv.shape[2] against key spans ``cols``, one side characters: by
        :meth:`_products`, or through R (:meth:`_rows`) when its table would be too large."""
        rows = slice(first, first + qv.shape[2])
        out = self._products(qv, w, table, heads, tails, rows, cols, offset)
        return self._rows(torch.matmul(qv, w), table, heads, tails, first, cols, offset) if out is None else out

    def _products(
        self, qv: Tensor, w: Tensor, table: Tensor, heads: Tensor, tails: Tensor, rows: slice, cols: slice, offset: int
    ) -> Tensor | None:
        """Query spans ``rows`` against key spans ``cols`` where one side is characters (one span length), or
        None when the tables would exceed ``LENGTH_TABLE_ELEMENTS`` or one row of products a block.

        R_ij is row (a_i, b_j, d_hh) of the table of ReLU'd sums (:meth:`length_sums`), whose A B (2 span + 1)
        rows are few when one side has a single length. So one matrix product of the queries (batch, heads,
        rows, d_head) with that table projected per head through W_kR, (heads, d_head, A B (2 span + 1)), holds
        every score, and a gather picks each pair's. No (batch, rows, cols, d_model) R is made, looked up,
        reduced or scattered back in the backward pass. The products are made in blocks of rows of at most
        ``BLOCK_ELEMENTS`` floats; the gather keeps only its index for the backward pass, so no block is kept
        or recomputed. -> (batch, heads, rows, cols)."""
        a_values, b_values, index = length_classes(heads, tails, rows, cols, table.shape[1], offset)
        b, h, length, _ = qv.shape
        combinations = len(a_values) * len(b_values) * table.shape[1]  # rows of the table of sums
        if combinations * self.d_model > LENGTH_TABLE_ELEMENTS or h * combinations > BLOCK_ELEMENTS:
            return None
        sums = self.length_sums(table, a_values, b_values, offset)  # (A, B, width, d_model)
        k = torch.matmul(w, sums.reshape(-1, self.d_model).T)  # (heads, d_head, A B width)
        index = index.reshape(1, b * length, -1).expand(h, -1, -1)  # (heads, batch rows, cols): column of the products
        q = qv.transpose(0, 1).reshape(h, b * length, -1)  # (heads, batch rows, d_head): one product per head
        step = BLOCK_ELEMENTS // (h * combinations)
        out = [torch.bmm(q[:, i : i + step], k).gather(-1, index[:, i : i + step]) for i in range(0, b * length, step)]
        out = out[0] if len(out) == 1 else torch.cat(out, dim=1)  # (heads, batch rows, cols)
        return out.view(h, b, length, -1).transpose(0, 1)

    def _rows(
        self, qr: Tensor, table: Tensor, heads: Tensor, tails: Tensor, first: int, cols: slice, offset: int
    ) -> Tensor:
        """Query spans first .. first + qr.shape[2] against key spans ``cols``: in one piece when R is small,
        else in blocks of rows (recomputed in the backward pass instead of stored)."""
        b, _, length, d = qr.shape
        keys = heads[:, cols].shape[1]
        if b * length * keys * d <= WHOLE_ELEMENTS:
            return self._block(qr, table, heads, tails, slice(first, first + length), cols, offset)
        rows = max(1, BLOCK_ELEMENTS // max(1, b * keys * d))
        out = []
        for start in range(0, length, rows):
            sl = slice(first + start, first + min(start + rows, length))
            part = qr[:, :, start : start + rows]
            if torch.is_grad_enabled() and (qr.requires_grad or table.requires_grad):
                out.append(checkpoint(self._block, part, table, heads, tails, sl, cols, offset, use_reentrant=False))
            else:
                out.append(self._block(part, table, heads, tails, sl, cols, offset))
        return torch.cat(out, dim=2)

    def _block(
        self, qr: Tensor, table: Tensor, heads: Tensor, tails: Tensor, rows: slice, cols: slice, offset: int
    ) -> Tensor:
        """Query spans ``rows`` against key spans ``cols``: (batch, heads, rows, cols)."""
        r = None if torch.jit.is_tracing() else self._by_lengths(table, heads, tails, rows, cols, offset)
        if r is None:  # R's four lookups, summed, then the ReLU
            dist = span_distances(heads, tails, rows, cols)
            for k, kind in enumerate(self.kinds):
                part = nn.functional.embedding(dist[kind] + offset, table[k])  # (batch, rows, cols, d_model)
                r = part if r is None else r.add_(part)
            r = torch.relu_(r)
        return torch.einsum("bhie,bije->bhij", qr, r)  # (batch, heads, rows, cols)

    def length_sums(self, table: Tensor, a_values: Tensor, b_values: Tensor, offset: int) -> Tensor:
        """ReLU(T_hh[d] + T_th[d + a] + T_ht[d - b] + T_tt[d + a - b]) for query span lengths ``a_values`` (A,),
        key span lengths ``b_values`` (B,) and every distance d_hh: (A, B, 2 span + 1, d_model), summed in the
        order of Eq. 8's lookups, so each R_ij has the bits of the four lookups. Combinations no pair has may
        index outside the tables: clamped, never gathered."""
        width = table.shape[1]
        d = torch.arange(-offset, width - offset, device=table.device)[None, None, :]  # (1, 1, width)
        a, b = a_values[:, None, None], b_values[None, :, None]  # (A, 1, 1), (1, B, 1)
        shifted = {"hh": d, "th": d + a, "ht": d - b, "tt": d + a - b}
        sums = None
        for k, kind in enumerate(self.kinds):
            # a lookup, not table[k][...]: advanced indexing's backward adds with atomics on several threads, in
            # an order that changes from run to run; the embedding's backward adds in a fixed order
            index = (shifted[kind] + offset).clamp(0, width - 1)  # (A|1, B|1, width)
            part = nn.functional.embedding(index, table[k])  # (A|1, B|1, width, d_model)
            sums = part if sums is None else sums + part
        return torch.relu(sums.expand(len(a_values), len(b_values), width, -1))

    def _by_lengths(
        self, table: Tensor, heads: Tensor, tails: Tensor, rows: slice, cols: slice, offset: int
    ) -> Tensor | None:
        """R (batch, rows, cols, d_model) by one lookup in a table of ReLU'd sums, or None when that table
        would exceed a block.

        With a = tail_i - head_i and b = tail_j - head_j, the four distances are d_hh, d_hh + a (th),
        d_hh - b (ht) and d_hh + a - b (tt): R_ij depends on (a_i, b_j, d_hh) alone. The few span lengths of
        a block (1 for characters, 2-4 for most words) give a small table over every (a, b, d)
        (:meth:`length_sums`); then R is one gather from it. Against four gathers of (batch, rows, cols,
        d_model), three additions and a ReLU over that size, forward and backward."""
        a_values, b_values, index = length_classes(heads, tails, rows, cols, table.shape[1], offset)
        if len(a_values) * len(b_values) * table.shape[1] * self.d_model > LENGTH_TABLE_ELEMENTS:
            return None
        sums = self.length_sums(table, a_values, b_values, offset).reshape(-1, self.d_model)
        return nn.functional.embedding(index, sums)  # (batch, rows, cols, d_model)


class FlatLayer(nn.Module):
    """One Transformer layer with relative span attention (Eq. 11), post-norm."""

    def __init__(self, cfg: FlatConfig):
        super().__init__()
        d, h = cfg.d_model, cfg.heads
        self.heads, self.d_head, self.scale = h, d // h, cfg.scale
        self.w_q = nn.Linear(d, d)
        self.w_ke = nn.Linear(d, d)
        self.w_v = nn.Linear(d, d)
        self.w_kr = nn.Linear(d, d, bias=False)  # W_k,R: R_ij W_k,R per head
        self.u = nn.Parameter(torch.empty(h, d // h))
        self.v = nn.Parameter(torch.empty(h, d // h))
        nn.init.xavier_uniform_(self.u)
        nn.init.xavier_uniform_(self.v)
        kinds = ("hh",) if cfg.distances == "hh" else KINDS
        self.relative = RelativeSpanEncoding(d, kinds, cfg.relative == "naive")
        self.out = nn.Linear(d, d)
        self.norm1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, cfg.ff), nn.ReLU(), Dropout(cfg.ff_dropout), nn.Linear(cfg.ff, d))
        self.norm2 = nn.LayerNorm(d)
        self.attention_dropout = Dropout(cfg.attention_dropout)
        self.dropout = Dropout(cfg.ff_dropout)

    def _split(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.heads, self.d_head).transpose(1, 2)  # (batch, heads, L, d_head)

    def attention_scores(self, e: Tensor, heads: Tensor, tails: Tensor, num_chars: int = 0) -> Tensor:
        """A* of Eq. 11 before masking: (batch, heads, L, L); the first ``num_chars`` spans are characters."""
        q, k = self._split(self.w_q(e)), self._split(self.w_ke(e))  # (batch, heads, L, d_head)
        content = torch.matmul(q + self.u[:, None], k.transpose(-1, -2))  # (q_i + u) . k_j
        w = self.w_kr.weight.view(self.heads, self.d_head, -1)  # (heads, d_head, d_model): W_kR per head
        relative = self.relative.scores(q + self.v[:, None], w, heads, tails, num_chars)  # (q_i + v) . (R_ij W_kR)
        scores = content + relative
        return scores / math.sqrt(self.d_head) if self.scale else scores

    def forward(self, e: Tensor, heads: Tensor, tails: Tensor, allowed: Tensor, num_chars: int = 0) -> Tensor:
        scores = self.attention_scores(e, heads, tails, num_chars)  # (batch, heads, L, L)
        # a finite fill: a row with nothing allowed (padding under max_distance) gets uniform weights, not NaN
        scores = scores.masked_fill(~allowed[:, None], torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        if self.attention_dropout.p:
            weights = self.attention_dropout(weights)
        ctx = torch.matmul(weights, self._split(self.w_v(e)))  # (batch, heads, L, d_head)
        ctx = ctx.transpose(1, 2).reshape(e.shape)  # (batch, L, d_model)
        e = self.norm1(e + self.dropout(self.out(ctx)))
        return self.norm2(e + self.dropout(self.ff(e)))  # (batch, L, d_model)


class FlatEncoder(Encoder):
    def __init__(self, cfg: FlatConfig, input_dim: int, word_dim: int | None):
        super().__init__()
        self.lattice = cfg.lattice
        self.max_distance, self.self_matched = cfg.max_distance, cfg.self_matched
        self.char_proj = nn.Linear(input_dim, cfg.d_model)
        self.word_proj = nn.Linear(word_dim, cfg.d_model) if word_dim is not None else None
        self.layers = nn.ModuleList(FlatLayer(cfg) for _ in range(cfg.layers))
        self.output_dropout = Dropout(cfg.output_dropout)
        self.output_dim = cfg.d_model

    def spans(self, x: Tensor, ctx: Context) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The flat lattice of the batch: span vectors (batch, L, d_model), heads and tails (batch, L),
        real-span mask (batch, L); the first n spans are the characters."""
        b, n, _ = x.shape
        pos = torch.arange(n, device=x.device).expand(b, n)  # (batch, n)
        e = self.char_proj(x)  # (batch, n, d_model)
        if self.word_proj is None:
            return e, pos, pos, ctx.mask
        words = ctx.inputs[self.lattice]
        e = torch.cat([e, self.word_proj(ctx.published[self.lattice])], dim=1)  # (batch, n + W, d_model)
        heads = torch.cat([pos, words["heads"]], dim=1)  # (batch, L)
        tails = torch.cat([pos, words["tails"]], dim=1)  # (batch, L)
        return e, heads, tails, torch.cat([ctx.mask, words["mask"]], dim=1)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        n = x.shape[1]
        e, heads, tails, key_mask = self.spans(x, ctx)
        allowed = lattice_mask(heads, tails, key_mask, n, self.self_matched, self.max_distance)  # (batch, L, L)
        for layer in self.layers:
            e = layer(e, heads, tails, allowed, n)
        return self.output_dropout(e[:, :n])  # (batch, n, d_model): characters only
