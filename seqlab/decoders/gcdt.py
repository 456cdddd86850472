"""GCDT's sequence labeling decoder (Liu et al. 2019, Eqs. 11-13): a unidirectional deep-transition RNN
over [h_t; emb(y_{t-1})] with label embeddings and a begin-of-sentence label, a softmax over the tags,
teacher forcing in training (label smoothing as an option) and beam search at inference.

The global vector g published by a ``global_context`` layer can enter the decoder's input
(``global_input: decoder_input``) or the softmax layer's input (``softmax_input``), Table 5.

Scores are sums of log-probabilities log P(y_t | y_<t, x). ``beam: 1`` is greedy decoding. ``nbest(k)``
returns the k best of a beam of max(beam, k): the beam's ranking, exact only when the beam holds every
prefix (a beam of at least labels^(n-1) for n tokens). With ``constrained: true`` the tag scheme's
transitions (no I-X after O in BIOES) are enforced inside the beam: a forbidden label gets -inf.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor, nn

from seqlab.crf.crf import TagPath
from seqlab.decoders.base import DECODERS, Decoded, Decoder, DecoderConfig, TagSet
from seqlab.encoders.gcdt import DTOptions
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.nn.dt import DTRNN
from seqlab.nn.positions import sinusoidal_positions
from seqlab.registry import ConfigCheckError


@DECODERS.register
class LabelDTConfig(DecoderConfig, DTOptions):
    type: Literal["label_dt"] = "label_dt"
    hidden: int = Field(256, gt=0, le=16384, description="decoder state size, 256 in the paper")
    label_dim: int = Field(64, gt=0, le=4096, description="size of the label embeddings y_{t-1}")
    beam: int = Field(4, ge=1, le=256, description="beam size at inference; 1 = greedy")
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0, description="of the training targets; 0 = none")
    constrained: bool = Field(False, description="forbid transitions invalid in the training scheme inside the beam")
    global_input: Literal["none", "decoder_input", "softmax_input"] = Field(
        "none", description="where the published global vector g enters the decoder (Table 5)"
    )
    dropout: float = Field(0.3, ge=0.0, lt=1.0, description="on the decoder states, 0.3 in the paper")

    def check(self, input_dim: int, published: dict[str, int]) -> None:
        if self.global_input != "none" and "global" not in published:
            raise ConfigCheckError(
                "global_input",
                f"'{self.global_input}' needs a global_context encoder layer "
                "(which publishes 'global') before the decoder",
            )

    def build(self, input_dim: int, tags: TagSet, published: dict[str, int]) -> LabelDTDecoder:
        return LabelDTDecoder(input_dim, tags, self, published.get("global", 0))


class LabelDTDecoder(Decoder):
    def __init__(self, input_dim: int, tags: TagSet, config: LabelDTConfig, global_dim: int = 0):
        super().__init__()
        n = len(tags)
        self.num_tags, self.bos = n, n  # label id n is the begin-of-sentence label
        self.beam, self.smoothing, self.global_input = config.beam, config.label_smoothing, config.global_input
        g_in = global_dim if config.global_input == "decoder_input" else 0
        g_out = global_dim if config.global_input == "softmax_input" else 0
        self.labels = nn.Embedding(n + 1, config.label_dim)
        self.rnn = DTRNN(input_dim + g_in + config.label_dim, config.hidden, **config.rnn_options())
        self.dropout = Dropout(config.dropout)
        self.out = nn.Linear(config.hidden + g_out, n)  # Eq. 12
        nn.init.xavier_uniform_(self.labels.weight)
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        # (n + 1, n): from label (or BOS) to label, and (n,) at the end; 0 allowed, -inf not
        penalty, end = torch.zeros(n + 1, n), torch.zeros(n)
        constraints = tags.constraints() if config.constrained else None
        if constraints is not None:
            allowed, allowed_start, allowed_end = constraints
            penalty[:n].masked_fill_(~allowed, float("-inf"))
            penalty[n].masked_fill_(~allowed_start, float("-inf"))
            end.masked_fill_(~allowed_end, float("-inf"))
        self.register_buffer("penalty", penalty, persistent=False)
        self.register_buffer("end_penalty", end, persistent=False)

    # ----- pieces shared by teacher forcing and search ---------------------------------------------
    def _inputs(self, features: Tensor, ctx: Context) -> tuple[Tensor, Tensor | None]:
        """The features (with g when it enters the decoder input) and g for the softmax input, if any."""
        g = ctx.latest("global") if self.global_input != "none" else None
        if self.global_input == "decoder_input":
            features = torch.cat([features, g.unsqueeze(1).expand(-1, features.shape[1], -1)], dim=-1)
            return features, None
        return features, g

    def _logits(self, s: Tensor, g: Tensor | None) -> Tensor:
        """Eq. 12 on decoder states s (..., hidden), with g (same leading dims) at the softmax input."""
        s = self.dropout(s)
        return self.out(s if g is None else torch.cat([s, g], dim=-1))

    # ----- training ---------------------------------------------------------------------------------
    def loss(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        """Teacher forcing: -sum_t log P(y_t | y_<t, x) per sentence (with label smoothing if set)."""
        x, g = self._inputs(features, ctx)
        prev = torch.cat([tags.new_full((tags.shape[0], 1), self.bos), tags[:, :-1]], dim=1)  # (batch, seq)
        s = self.rnn(torch.cat([x, self.labels(prev)], dim=-1))  # (batch, seq, hidden)
        g = None if g is None else g.unsqueeze(1).expand(-1, s.shape[1], -1)  # (batch, seq, g)
        logits = self._logits(s, g)  # (batch, seq, tags)
        nll = F.cross_entropy(logits.transpose(1, 2), tags, reduction="none", label_smoothing=self.smoothing)
        return (nll * mask).sum(1)

    # ----- inference --------------------------------------------------------------------------------
    def decode(self, features: Tensor, mask: Tensor, ctx: Context) -> Decoded:
        tags, scores = self._search(features, mask, ctx, self.beam)  # (batch, beam, seq), (batch, beam)
        return Decoded(tags[:, 0].masked_fill(~mask, 0), scores[:, 0])

    def nbest(self, features: Tensor, mask: Tensor, ctx: Context, k: int) -> list[list[TagPath]]:
        tags, scores = self._search(features, mask, ctx, max(self.beam, k))
        lengths = mask.sum(1).tolist()
        out = []
        for b, n in enumerate(lengths):
            out.append(
                [
                    TagPath(tags[b, r, :n].tolist(), float(scores[b, r]))
                    for r in range(k)
                    if scores[b, r] > float("-inf")
                ]
            )
        return out

    def _search(self, features: Tensor, mask: Tensor, ctx: Context, k: int) -> tuple[Tensor, Tensor]:
        """Beam search: (batch, k, seq_len) label paths best first and their scores (batch, k); -inf
        marks an empty slot (fewer than k paths exist)."""
        x, g = self._inputs(features, ctx)
        batch, seq_len, _ = x.shape
        n, d_lab = self.num_tags, self.labels.embedding_dim
        # the decoder input is [x_t; emb(y)]: split the input projection into the two parts
        dx = x.shape[-1]
        pos = None  # the position signal DTRNN.forward adds to its whole input [x_t; emb(y)], split in two
        if self.rnn.position_signal:
            pe = sinusoidal_positions(seq_len, dx + d_lab, x.device).to(x.dtype)  # (seq, dx + d_lab)
            x, pos = x + pe[:, :dx], pe[:, dx:]
        w = self.rnn.x_proj.weight if self.rnn.cell == "dt" else None
        if w is not None:
            x_part = nn.functional.linear(x, w[:, :dx], self.rnn.x_proj.bias)  # (batch, seq, 5h)
            y_part = self.labels.weight @ w[:, dx:].T  # (n + 1, 5h)
            if pos is not None:
                x_part = x_part + pos @ w[:, dx:].T  # the label half's position signal, per step
        ends = mask.sum(1) - 1  # (batch,) last real position
        score = x.new_full((batch, k), float("-inf"))
        score[:, 0] = 0.0  # one live beam at the start: all beams would be the same BOS prefix
        prev = torch.full((batch, k), self.bos, dtype=torch.long, device=x.device)
        h = x.new_zeros(batch * k, self.rnn.hidden)
        back, labels = [], []  # per step: (batch, k) source beam and label
        g_k = None if g is None else g.repeat_interleave(k, dim=0)  # (batch * k, g)
        # loop invariants: each beam its own source, each sentence's first row, the mask per beam row, and
        # the end penalty at each sentence's last position
        keep = torch.arange(k, device=x.device).expand(batch, k)  # (batch, k)
        first_row = torch.arange(batch, device=x.device).unsqueeze(1) * k  # (batch, 1)
        mask_k = mask.repeat_interleave(k, dim=0)  # (batch * k, seq)
        at_end = ends.unsqueeze(1) == torch.arange(seq_len, device=x.device)  # (batch, seq)
        last_penalty = torch.where(at_end.unsqueeze(-1), self.end_penalty, 0.0)  # (batch, seq, n)
        for t in range(seq_len):
            if w is not None:
                xp = (x_part[:, t].unsqueeze(1) + y_part[prev]).view(batch * k, -1)  # (batch * k, 5h)
                h_new = self.rnn.step(xp, h)
            else:  # conventional GRU cell
                y = self.labels(prev.flatten()) + (0 if pos is None else pos[t])
                inp = torch.cat([x[:, t].repeat_interleave(k, dim=0), y], dim=-1)
                h_new = self.rnn.gru(inp.unsqueeze(1), h.unsqueeze(0))[0].squeeze(1)
            logp = self._logits(h_new, g_k).log_softmax(-1).view(batch, k, n)  # (batch, k, n)
            logp = logp + self.penalty[prev]  # forbidden transitions from each beam's last label
            logp = logp + last_penalty[:, t].unsqueeze(1)  # the end penalty at each last token
            cand = (score.unsqueeze(-1) + logp).view(batch, k * n)
            top, idx = cand.topk(k, dim=1)  # (batch, k)
            src, lab = idx // n, idx % n
            live = mask[:, t].unsqueeze(1)  # (batch, 1): sentences that still have a token here
            src = torch.where(live, src, keep)
            lab = torch.where(live, lab, prev)
            score = torch.where(live, top, score)
            rows = (src + first_row).flatten()  # (batch * k,)
            h = torch.where(mask_k[:, t].unsqueeze(1), h_new[rows], h)
            prev = lab
            back.append(src)
            labels.append(lab)
        # follow the back-pointers from the final beams
        path = []
        beam = keep
        for t in range(seq_len - 1, -1, -1):
            path.append(labels[t].gather(1, beam))
            beam = back[t].gather(1, beam)
        tags = torch.stack(path[::-1], dim=2)  # (batch, k, seq)
        return tags, score
