"""Position-aware self-attention (PSA) and the self-attentional context fusion layer.

Reference: the journal version of "Position-Aware Self-Attention based Neural Sequence Labeling"
(Section IV-A, Eqs. 4-11; Section IV-B, Eqs. 12-14; ablations Tables VI-X; window size V-C4), and
its earlier conference variant (Eqs. 7, 8, 11, 12 there).

One layer (:class:`PSAFusionEncoder`) computes, for a sequence x_1..x_n (x_i in R^d):

* additive alignment scores    f_ij = w^T tanh(W1 x_i + W2 x_j + b)                     (Eq. 5)
* plus a positional bias        f_ij += Psi_ij(x_i)                                       (Eq. 6)
* attention                     a_i = softmax_j(f_ij) over the real tokens                (Eq. 7)
* attention output              s_i = sum_j a_i(j) x_j, then dropout (0.2, paper V-B)      (Eq. 8)
* two tanh FC layers            s~_i = tanh(Wz2 tanh(Wz1 s_i + b))                        (Eq. 12)
* feature-wise fusion gate      lambda = sigmoid(Wf3 tanh(Wf1 x_i + Wf2 s~_i))            (Eq. 13)
                                out_i = lambda * x_i + (1 - lambda) * s~_i                (Eq. 14)

The three positional factors:

* M (self-disabled mask, Eq. 9): -inf on the diagonal. It is applied as a *hard* mask (the
  diagonal key is removed from the softmax) rather than by adding -inf, so nothing can become NaN.
* G (distance-aware Gaussian, Eq. 10): G_ij = -(i - j)^2 / (2 eps^2), eps = k / 2 (k = ``window``).
* P (token-specific position bias), r = k:
    - ``variant="journal"`` (Eq. 11): a table R of r+1 rows indexed by the clipped distance
      m = min(|i - j|, r):  P_ij = x_i^T R_m + (v^T R_m + b).  (The paper writes R in R^{r x d}
      but indexes rows 0..r, so the table has r+1 rows.)  The scalar b adds the same value to
      every key of a row, so it cancels in the softmax (it gets zero gradient); it is kept to
      follow the equation.
    - ``variant="early"`` (conference Eqs. 11-12): a table W3 of 2r+1 rows indexed by the *signed*
      clipped offset C(i - j, r) = clamp(i - j, -r, r) (stored at row C + r):  P_ij = x_i^T W3_C.
      (The printed Eq. 12 maps every |q| > r to +r; we read it, as in Shaw et al. whom it cites,
      as clipping to -r / +r by sign.)

How they combine:

* journal (Eq. 4): Psi = M + alpha G + (1 - alpha) P with one trainable scalar alpha. To keep
  alpha a trade-off in (0, 1) it is parameterised as alpha = sigmoid(alpha_logit), logit
  initialised at 0 (alpha = 0.5). M enters with coefficient 1, i.e. as the hard mask.
* early (Eq. 8): Psi = a1 M + a2 P + a3 G with sum(a) = 1, a = softmax over trainable logits
  (initialised equal, a = 1/3 each). Since a1 > 0 always, a1 * (-inf) = -inf: M stays a hard
  mask, and a1 only matters through the normalisation (it takes weight away from a2 and a3).

Ablations (Table VII removes one factor "from the positional bias function (Eq. 4)"): the switches
``self_mask``, ``gaussian`` and ``position_bias`` drop the corresponding term. In the journal
combination the remaining coefficients are left as they are (alpha is not renormalised); in the
early combination the softmax runs over the logits of the factors that are switched on, so the
remaining coefficients still sum to 1. ``use_psi=False`` (Table VI, model 1: "minus Psi in Eq. 6")
drops the whole positional bias, M included, giving plain additive self-attention.
``position_encoding="absolute"`` (Table VI, model 2: the Transformer's sinusoidal encoding "before
the context encoder") adds sinusoidal absolute position embeddings to the layer's input, so the
attention, its values and the fusion gate all see x + PE.

Reading of the ambiguous points:

* Gate off (``gate=False``). The paper has no ablation of the gate alone (Table VIII removes the
  whole layer); its motivation (Section IV-B) is that with the self-disabled mask the attention
  output "is insufficient for learning context-aware representation", so the token's own features
  have to be combined back in. Returning s~ alone would therefore drop each token's own identity
  (and a stack of such layers could never recover it). Without the gate we thus keep the
  combination but make it non-adaptive: the output is the concatenation [x; s~], and
  ``output_dim = 2 * input_dim`` (the next layer can learn any fixed mixing of the two). The
  layer then publishes no "gate".
* SAN. Table IX's caption says "SAN denotes the proposed self-attentional context fusion
  network", i.e. the full layer above (PSA + FC + fusion gate), and its row 1 (SAN SAN SAN) is a
  stack of three such layers. ``type: "san"`` (:class:`SANConfig`) is therefore the same machinery
  under the paper's name, with the same fields and defaults, for writing Table IX stacks such as
  ``[san, bilstm, san]``; a plainer layer is any combination of the switches (e.g.
  ``fc_layers=False, gate=False, use_psi=False``). Table X's Transformer (multi-head scaled
  dot-product attention with a feed-forward sublayer) is a different architecture and not
  implemented here.

The pairwise scores w^T tanh(q_i + k_j) need a (batch, T, T, d) hidden tensor. :class:`AdditiveScores`
never materialises it whole: it works through blocks of about ``BLOCK_ELEMENTS`` elements that stay
in the CPU cache, and its backward recomputes each block's tanh instead of storing it. On 2 CPU cores
this made the attention scores about 8x faster at inference (batch 64) than plain broadcasting,
and memory is O(batch * T * d) plus one block. The blocks' tanh goes through the identity
tanh x = 2 sigmoid(2x) - 1, as w^T tanh(q_i + k_j) = 2 w^T sigmoid(2 q_i + 2 k_j) - sum(w): PyTorch's CPU
``tanh`` ran at 1.5 ns per element on 2 threads here, its ``sigmoid`` at 0.2, and the tanh was 44% of the
PSA chunker's batch-64 tagging time. The identity is exact; in float32 the scores differ from the tanh
form's by rounding (1e-6 at d = 300, tested), which left every tag of a trained chunker unchanged.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.nn.positions import sinusoidal_positions

Variant = Literal["journal", "early"]


# ---------------------------------------------------------------------------------------------
# Additive compatibility scores, block by block
# ---------------------------------------------------------------------------------------------

BLOCK_ELEMENTS = 1 << 18  # elements of one (rows, queries, T, d) block on CPU: about 1 MB of float32
#: On a GPU the cache argument does not hold and each block costs kernel launches: blocks of up to 64M elements
#: (256 MB of float32), so a batch of 64 CoNLL sentences (30 x 30 x 600 each) is one block instead of 192.
GPU_BLOCK_ELEMENTS = 1 << 26


def _blocks(x: Tensor):
    """(sentence slice, query slice) pairs covering x's (batch, T) for x (batch, T, d), each block of at most
    BLOCK_ELEMENTS elements on CPU and GPU_BLOCK_ELEMENTS elsewhere where possible (whole sentences when they fit,
    else groups of query rows)."""
    batch, t, d = x.shape
    limit = BLOCK_ELEMENTS if x.device.type == "cpu" else GPU_BLOCK_ELEMENTS
    per_sentence = t * t * d
    if per_sentence <= limit:
        step = limit // max(per_sentence, 1)
        for b0 in range(0, batch, step):
            yield slice(b0, b0 + step), slice(None)
        return
    step = max(1, limit // (t * d))
    for b0 in range(batch):
        for i0 in range(0, t, step):
            yield slice(b0, b0 + 1), slice(i0, i0 + step)


class AdditiveScores(torch.autograd.Function):
    """scores[b, i, j] = w^T tanh(q[b, i] + k[b, j]): (batch, T, d), (batch, T, d), (d,) -> (batch, T, T).

    Computed as 2 w^T sigmoid(2 q_i + 2 k_j) - sum(w), the same function (tanh x = 2 sigmoid(2x) - 1; see the
    module): one sigmoid pass over each (rows, queries, T, d) block instead of a tanh, and the doubling and
    shift on the small tensors."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, w: Tensor) -> Tensor:
        b, t, _d = q.shape
        q2, k2 = q * 2.0, k * 2.0  # exact: sigmoid(2 (q_i + k_j)) sees the same values as tanh(q_i + k_j)
        out = q.new_empty(b, t, t)
        for bs, qs in _blocks(q):
            s = torch.sigmoid_(q2[bs, qs, None] + k2[bs, None])  # (rows, queries, T, d)
            out[bs, qs] = s @ w
        ctx.save_for_backward(q2, k2, w)
        return out.mul_(2.0).sub_(w.sum())  # (batch, T, T)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q2, k2, w = ctx.saved_tensors
        d = q2.shape[2]
        grad_q, grad_k, grad_w = torch.zeros_like(q2), torch.zeros_like(k2), torch.zeros_like(w)
        w4 = w * 4.0  # d tanh(x) / dx = 1 - tanh^2 = 4 s (1 - s)
        for bs, qs in _blocks(q2):
            s = torch.sigmoid_(q2[bs, qs, None] + k2[bs, None])  # (rows, queries, T, d), recomputed
            g = grad[bs, qs].unsqueeze(-1)  # (rows, queries, T, 1)
            grad_w += (g.reshape(-1) @ s.reshape(-1, d)).mul_(2.0).sub_(g.sum())  # sum of g_ij tanh_ij
            dh = s.addcmul_(s, s, value=-1.0).mul_(g).mul_(w4)  # s - s^2, then g_ij * w * (1 - tanh_ij^2), in place
            grad_q[bs, qs] += dh.sum(2)
            grad_k[bs] += dh.sum(1)
        return grad_q, grad_k, grad_w


def additive_scores_traced(q: Tensor, k: Tensor, w: Tensor) -> Tensor:
    """:class:`AdditiveScores` in one piece, with the same operations, for tracing (export): (batch, T, T)."""
    return (torch.sigmoid((q * 2.0)[:, :, None] + (k * 2.0)[:, None]) @ w) * 2.0 - w.sum()


# ---------------------------------------------------------------------------------------------
# Position helpers (pure functions of the length: shared by the layer and easy to test)
# ---------------------------------------------------------------------------------------------


def gaussian_bias(seq_len: int, window: int, device: torch.device | None = None) -> Tensor:
    """G_ij = -(i - j)^2 / (2 eps^2) with eps = window / 2 (Eq. 10). Shape (seq_len, seq_len)."""
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)
    eps = window / 2.0
    diff = pos[:, None] - pos[None, :]  # (seq, seq): i - j
    return -diff.pow(2) / (2.0 * eps * eps)


def relative_distance_index(seq_len: int, r: int, device: torch.device | None = None) -> Tensor:
    """min(|i - j|, r): the row of R used by the journal's P_ij (Eq. 11). Shape (seq_len, seq_len)."""
    pos = torch.arange(seq_len, device=device)
    return (pos[:, None] - pos[None, :]).abs().clamp(max=r)  # (seq, seq) in 0..r


def signed_relative_index(seq_len: int, r: int, device: torch.device | None = None) -> Tensor:
    """clamp(i - j, -r, r) + r: the row of W3 used by the early P_ij (Eqs. 11-12). Shape (T, T)."""
    pos = torch.arange(seq_len, device=device)
    return (pos[:, None] - pos[None, :]).clamp(-r, r) + r  # (seq, seq) in 0..2r


# ---------------------------------------------------------------------------------------------
# Configs
# ---------------------------------------------------------------------------------------------


@ENCODERS.register
class PSAFusionConfig(EncoderConfig):
    """The self-attentional context fusion layer (Section IV-B) around position-aware attention."""

    type: Literal["psa_fusion"] = "psa_fusion"
    variant: Variant = Field(
        "journal",
        description="journal: Psi = M + aG + (1-a)P, |i-j| table R (Eq. 4, 11); "
        "early: Psi = a1 M + a2 P + a3 G, signed table W3 (conf. Eq. 8, 11)",
    )
    window: int = Field(
        10, gt=0, le=512, description="window size k: eps = k/2 and clipping r = k; 10 is the paper's best (Fig. 5)"
    )
    self_mask: bool = Field(True, description="self-disabled mask M (Eq. 9); off for Table VII")
    gaussian: bool = Field(True, description="distance-aware Gaussian bias G (Eq. 10); off for Table VII")
    position_bias: bool = Field(True, description="token-specific position bias P (Eq. 11); off for Table VII")
    use_psi: bool = Field(
        True,
        description="False drops the whole positional bias Psi (M included): "
        "plain additive attention, Table VI model 1",
    )
    position_encoding: Literal["none", "absolute"] = Field(
        "none", description="'absolute' adds sinusoidal position embeddings to the input: Table VI model 2"
    )
    fc_layers: bool = Field(True, description="the two tanh FC layers after attention (Eq. 12)")
    gate: bool = Field(
        True,
        description="feature-wise fusion gate (Eqs. 13-14); off: output is "
        "[x; s~] (2 x input_dim), see module docstring",
    )
    attention_dropout: float = Field(
        0.2, ge=0.0, lt=1.0, description="dropout on the attention output, 0.2 as in the paper (V-B)"
    )

    def output_dim(self, input_dim: int) -> int:
        return input_dim if self.gate else 2 * input_dim

    def build(self, input_dim: int) -> PSAFusionEncoder:
        return PSAFusionEncoder(
            input_dim,
            variant=self.variant,
            window=self.window,
            self_mask=self.self_mask,
            gaussian=self.gaussian,
            position_bias=self.position_bias,
            use_psi=self.use_psi,
            position_encoding=self.position_encoding,
            fc_layers=self.fc_layers,
            gate=self.gate,
            attention_dropout=self.attention_dropout,
        )


@ENCODERS.register
class SANConfig(PSAFusionConfig):
    """'SAN' of Table IX: the paper's name for the same self-attentional context fusion network.

    Identical fields and defaults to ``psa_fusion``; exists so Table IX stacks (SAN / Bi-LSTM
    placements) can be written with the paper's vocabulary.
    """

    type: Literal["san"] = "san"  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


class PositionAwareAttention(nn.Module):
    """Additive self-attention with the positional bias Psi (Eqs. 4-11). Returns weights only."""

    def __init__(
        self,
        dim: int,
        variant: Variant = "journal",
        window: int = 10,
        self_mask: bool = True,
        gaussian: bool = True,
        position_bias: bool = True,
        use_psi: bool = True,
    ):
        super().__init__()
        if variant not in ("journal", "early"):
            raise ValueError(f"unknown PSA variant {variant!r}")
        self.variant = variant
        self.window = window
        self.r = window  # the clipping distance equals the window size k (paper IV-A3)
        self.use_psi = use_psi
        self.self_mask = use_psi and self_mask
        self.gaussian = use_psi and gaussian
        self.position_bias = use_psi and position_bias

        self.w1 = nn.Linear(dim, dim, bias=False)  # W(1) x_i
        self.w2 = nn.Linear(dim, dim, bias=True)  # W(2) x_j + b
        self.score = nn.Linear(dim, 1, bias=False)  # w^T sigma(.)
        if variant == "journal":
            self.rel = nn.Parameter(torch.empty(self.r + 1, dim))  # R, rows 0..r
            self.rel_global = nn.Linear(dim, 1, bias=True)  # v^T R_m + b
            self.alpha_logit = nn.Parameter(torch.zeros(()))  # alpha = sigmoid(logit) in (0, 1)
        else:
            self.rel = nn.Parameter(torch.empty(2 * self.r + 1, dim))  # W3, rows for -r..r
            self.rel_global = None
            self.mix_logits = nn.Parameter(torch.zeros(3))  # softmax -> (a1 for M, a2 for P, a3 for G)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.w1, self.w2, self.score):
            nn.init.xavier_uniform_(lin.weight)
        nn.init.zeros_(self.w2.bias)
        nn.init.xavier_uniform_(self.rel)
        if self.rel_global is not None:
            nn.init.xavier_uniform_(self.rel_global.weight)
            nn.init.zeros_(self.rel_global.bias)

    @property
    def alpha(self) -> Tensor:
        """The journal's trade-off alpha in (0, 1)."""
        return torch.sigmoid(self.alpha_logit)

    def mixing(self) -> dict[str, Tensor]:
        """Coefficients of the enabled soft factors: {"G": ..., "P": ...} (M is always a hard mask)."""
        if self.variant == "journal":
            alpha = self.alpha
            return {"G": alpha, "P": 1.0 - alpha}
        enabled = (("M", self.self_mask), ("P", self.position_bias), ("G", self.gaussian))
        names = [n for n, on in enabled if on]
        if not names:
            return {}
        idx = torch.tensor([("M", "P", "G").index(n) for n in names], device=self.mix_logits.device)
        coef = torch.softmax(self.mix_logits[idx], dim=0)  # sums to 1 over the enabled factors
        return {n: c for n, c in zip(names, coef) if n != "M"}

    def position_scores(self, x: Tensor) -> Tensor:
        """P_ij(x_i) for all pairs, (batch, T, T)."""
        t = x.shape[1]
        xr = x @ self.rel.T  # (batch, T, rows): x_i^T R_m for every table row m
        if self.variant == "journal":
            index = relative_distance_index(t, self.r, x.device)  # (T, T)
            glob = self.rel_global(self.rel).squeeze(-1)  # (rows,): v^T R_m + b
            content = xr.gather(2, index.expand(x.shape[0], t, t))  # (batch, T, T)
            return content + glob[index]  # (batch, T, T)
        index = signed_relative_index(t, self.r, x.device)  # (T, T)
        return xr.gather(2, index.expand(x.shape[0], t, t))  # (batch, T, T)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Attention weights (batch, T, T): rows sum to 1 over allowed keys; 0 where no key is allowed."""
        _b, t, _ = x.shape
        query = self.w1(x)  # (batch, T, d): W1 x_i
        key = self.w2(x)  # (batch, T, d): W2 x_j + b
        w = self.score.weight.squeeze(0)  # (d,)
        if torch.jit.is_tracing():  # export: in one piece (the blocks are sized from the data)
            scores = additive_scores_traced(query, key, w)  # (batch, T, T)
        else:
            scores = AdditiveScores.apply(query, key, w)  # (batch, T, T)

        if self.use_psi:
            coef = self.mixing()
            if self.gaussian:
                scores = scores + coef["G"] * gaussian_bias(t, self.window, x.device).to(x.dtype)
            if self.position_bias:
                scores = scores + coef["P"] * self.position_scores(x)

        allowed = mask[:, None, :] & mask[:, :, None]  # (batch, T, T): real query and real key
        if self.self_mask:
            pos = torch.arange(t, device=x.device)
            eye = pos[:, None] == pos[None, :]  # (T, T); not torch.eye, which onnxruntime lacks for bool
            allowed = allowed & ~eye  # M: hard -inf on the diagonal
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        # rows with no allowed key (1-token sentence under M, padded queries) softmax to uniform
        # over finite values; multiplying by `allowed` zeroes them, so no NaN in either direction
        return torch.softmax(scores, dim=-1) * allowed  # (batch, T, T)


class PSAFusionEncoder(Encoder):
    """Self-attentional context fusion layer (Fig. 3): PSA -> dropout -> 2 FC -> fusion gate."""

    def __init__(
        self,
        input_dim: int,
        variant: Variant = "journal",
        window: int = 10,
        self_mask: bool = True,
        gaussian: bool = True,
        position_bias: bool = True,
        use_psi: bool = True,
        position_encoding: Literal["none", "absolute"] = "none",
        fc_layers: bool = True,
        gate: bool = True,
        attention_dropout: float = 0.2,
    ):
        super().__init__()
        d = input_dim
        self.attention = PositionAwareAttention(d, variant, window, self_mask, gaussian, position_bias, use_psi)
        self.position_encoding = position_encoding
        self.dropout = Dropout(attention_dropout)
        self.fc1 = nn.Linear(d, d, bias=True) if fc_layers else None  # W(z1) s + b
        self.fc2 = nn.Linear(d, d, bias=False) if fc_layers else None  # W(z2) (no bias in Eq. 12)
        self.gate_x = nn.Linear(d, d, bias=False) if gate else None  # W(f1)
        self.gate_s = nn.Linear(d, d, bias=False) if gate else None  # W(f2)
        self.gate_out = nn.Linear(d, d, bias=False) if gate else None  # W(f3)
        self.output_dim = d if gate else 2 * d
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.fc1, self.fc2, self.gate_x, self.gate_s, self.gate_out):
            if lin is not None:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        """Publishes "attention" (batch, T, T) and, with the gate on, "gate" lambda (batch, T, d)."""
        if self.position_encoding == "absolute":
            x = x + sinusoidal_positions(x.shape[1], x.shape[2], x.device).to(x.dtype)
        attn = self.attention(x, ctx.mask)  # (batch, T, T)
        ctx.publish("attention", attn)
        s = self.dropout(attn @ x)  # (batch, T, d): Eq. 8, dropout on the attention output
        if self.fc1 is not None:
            s = torch.tanh(self.fc2(torch.tanh(self.fc1(s))))  # Eq. 12
        if self.gate_out is None:
            return torch.cat([x, s], dim=-1)  # (batch, T, 2d)
        lam = torch.sigmoid(self.gate_out(torch.tanh(self.gate_x(x) + self.gate_s(s))))  # (batch, T, d)
        ctx.publish("gate", lam)
        return lam * x + (1.0 - lam) * s  # Eq. 14
