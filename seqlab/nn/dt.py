"""Deep-transition GRUs (Meng and Zhang 2019; GCDT, Liu et al. 2019, Section 3.2).

One step of a deep-transition (DT) block with transition number L reads one token:

    h^0_t = L-GRU(x_t, h^L_{t-1})                                   (Eq. 14)
    h^j_t = T-GRU_j(h^{j-1}_t),  1 <= j <= L                        (Eq. 15)

L-GRU (Eqs. 16-20): a GRU whose candidate adds a linear transformation of the input, gated by l_t:

    r = sigma(W_xr x + W_hr h),  z = sigma(W_xz x + W_hz h),  l = sigma(W_xl x + W_hl h)
    h~ = tanh(W_xh x + r * (W_hh h)) + l * (W_x x)
    h' = (1 - z) * h + z * h~

T-GRU (Eqs. 21-24): a GRU with no input, reading only the state below:

    r = sigma(W_r h),  z = sigma(W_z h),  h~ = tanh(r * (W_h h)),  h' = (1 - z) * h + z * h~

The input projections of all time steps (W_x* x) are one matrix product before the time loop; the
loop runs once per token and each step goes through the L-GRU and the L T-GRUs. Options seen in the
authors' code: layer normalisation of the gate pre-activations, dropout on the state inside the cell
(between transitions), and a sinusoidal position signal added to the inputs.

:class:`BiDTRNN` runs its two directions in one time loop: the state is (2, batch, hidden) and each
cell's hidden product is one batched matrix product with the two directions' weights stacked, so a
token costs one direction's number of operations (the arithmetic is the same). That saves per-operation
overhead, which counts at small batches (tagging); a training step of thousands of tokens spends most of
its time in the matrix products themselves. The weights stay two :class:`DTRNN` modules' parameters.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.dropout import Dropout
from seqlab.nn.lstm import gather_steps, reversal_index
from seqlab.nn.positions import sinusoidal_positions


def lgru_update(xp: Tensor, h: Tensor, hp: Tensor, norm: Callable[[Tensor], Tensor] | None) -> Tensor:
    """The L-GRU given its products: xp (..., 5 * hidden) = [W_xr x; W_xz x; W_xl x; W_xh x; W_x x],
    h (..., hidden), hp (..., 4 * hidden) = [W_hr; W_hz; W_hl; W_hh] h; ``norm`` on the gates, or None."""
    n = h.shape[-1]
    # split, not slicing: a slice's backward zero-fills a tensor of the whole input, a split's is one cat
    hp_gates, hp_cand = hp.split([3 * n, n], dim=-1)  # (..., 3 * hidden), (..., hidden)
    xp_gates, xp_cand, xp_lin = xp.split([3 * n, n, n], dim=-1)
    gates = xp_gates + hp_gates  # r, z, l pre-activations
    if norm is not None:
        gates = norm(gates)
    r, z, lin = torch.sigmoid(gates).chunk(3, dim=-1)
    cand = torch.tanh(xp_cand + r * hp_cand) + lin * xp_lin
    return torch.lerp(h, cand, z)  # (1 - z) * h + z * h~


def tgru_update(h: Tensor, hp: Tensor, norm: Callable[[Tensor], Tensor] | None) -> Tensor:
    """The T-GRU given its product: h (..., hidden), hp (..., 3 * hidden) = [W_r; W_z; W_h] h."""
    n = h.shape[-1]
    gates, hp_cand = hp.split([2 * n, n], dim=-1)  # (..., 2 * hidden), (..., hidden)
    if norm is not None:
        gates = norm(gates)
    r, z = torch.sigmoid(gates).chunk(2, dim=-1)
    cand = torch.tanh(r * hp_cand)
    return torch.lerp(h, cand, z)  # (1 - z) * h + z * h~


class LGRUCell(nn.Module):
    """The hidden-state half of an L-GRU; the input half is precomputed by :class:`DTRNN`."""

    def __init__(self, hidden: int, layer_norm: bool = False):
        super().__init__()
        self.hh = nn.Linear(hidden, 4 * hidden)  # [W_hr; W_hz; W_hl; W_hh] h
        self.norm = nn.LayerNorm(3 * hidden) if layer_norm else None

    def forward(self, xp: Tensor, h: Tensor) -> Tensor:
        """xp (batch, 5 * hidden) = [W_xr x; W_xz x; W_xl x; W_xh x; W_x x], h (batch, hidden)."""
        return lgru_update(xp, h, self.hh(h), self.norm)


class TGRUCell(nn.Module):
    def __init__(self, hidden: int, layer_norm: bool = False):
        super().__init__()
        self.hh = nn.Linear(hidden, 3 * hidden)  # [W_r; W_z; W_h] h
        self.norm = nn.LayerNorm(2 * hidden) if layer_norm else None

    def forward(self, h: Tensor) -> Tensor:
        return tgru_update(h, self.hh(h), self.norm)


class DTRNN(nn.Module):
    """A unidirectional deep-transition RNN: (batch, seq_len, input_dim) -> (batch, seq_len, hidden).

    ``cell="gru"`` is a conventional GRU (the paper's baseline) with the same interface. Rows are
    right-padded; outputs at real positions never depend on padding (steps run left to right)."""

    def __init__(
        self,
        input_dim: int,
        hidden: int,
        transitions: int = 4,
        cell: str = "dt",
        layer_norm: bool = False,
        cell_dropout: float = 0.0,
        position_signal: bool = False,
    ):
        super().__init__()
        self.hidden, self.cell, self.position_signal = hidden, cell, position_signal
        if cell == "gru":
            self.gru = nn.GRU(input_dim, hidden, batch_first=True)
        else:
            self.x_proj = nn.Linear(input_dim, 5 * hidden)  # [W_xr; W_xz; W_xl; W_xh; W_x] for all steps
            self.lgru = LGRUCell(hidden, layer_norm)
            self.tgrus = nn.ModuleList(TGRUCell(hidden, layer_norm) for _ in range(transitions))
            self.dropout = Dropout(cell_dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():  # Glorot, as the paper (Section 4.2); biases zero
            if p.dim() >= 2:
                nn.init.xavier_uniform_(p)
            elif "norm" not in name:
                nn.init.zeros_(p)

    def with_positions(self, x: Tensor) -> Tensor:
        """x (batch, seq_len, input_dim) with the position signal added, if the layer has one."""
        if not self.position_signal:
            return x
        return x + sinusoidal_positions(x.shape[1], x.shape[2], x.device).to(x.dtype)

    def forward(self, x: Tensor, h0: Tensor | None = None) -> Tensor:
        x = self.with_positions(x)
        if self.cell == "gru":
            return self.gru(x, None if h0 is None else h0.unsqueeze(0))[0]
        xp = self.x_proj(x)  # (batch, seq_len, 5 * hidden): one product for every step
        h = x.new_zeros(x.shape[0], self.hidden) if h0 is None else h0
        out = []
        for xp_t in xp.unbind(1):  # unbind, not xp[:, t]: its backward is one stack, not a fill per step
            h = self.step(xp_t, h)
            out.append(h)
        return torch.stack(out, dim=1)  # (batch, seq_len, hidden)

    def step(self, xp: Tensor, h: Tensor) -> Tensor:
        """One token through the L-GRU and the T-GRUs: xp (batch, 5 * hidden) precomputed, h (batch, hidden)."""
        h = self.lgru(xp, h)
        for tgru in self.tgrus:
            h = tgru(self.dropout(h))
        return h


def _two_directions(fwd: nn.Module, bwd: nn.Module) -> tuple[Callable, Callable | None]:
    """One cell's hidden product and gate norm for the state (2, batch, hidden) of :class:`BiDTRNN`:
    the forward cell's weights apply to row 0, the backward cell's to row 1. The parameters are stacked
    here, on every call, so the modules (names, shapes, model files) stay those of two DTRNNs."""
    weight_t = torch.stack([fwd.hh.weight, bwd.hh.weight]).transpose(1, 2)  # (2, hidden, out)
    bias = torch.stack([fwd.hh.bias, bwd.hh.bias]).unsqueeze(1)  # (2, 1, out)

    def product(h: Tensor) -> Tensor:  # (2, batch, hidden) -> (2, batch, out)
        return torch.baddbmm(bias, h, weight_t)

    if fwd.norm is None:
        return product, None
    gain = torch.stack([fwd.norm.weight, bwd.norm.weight]).unsqueeze(1)  # (2, 1, gates)
    shift = torch.stack([fwd.norm.bias, bwd.norm.bias]).unsqueeze(1)  # (2, 1, gates)
    eps = fwd.norm.eps

    def norm(gates: Tensor) -> Tensor:  # (2, batch, gates): layer norm, then each direction's affine
        return torch.addcmul(shift, F.layer_norm(gates, gates.shape[-1:], eps=eps), gain)

    return product, norm


class BiDTRNN(nn.Module):
    """Both directions of a DT RNN over right-padded rows, concatenated: (batch, seq, 2 * hidden).
    The backward direction reads each row's real tokens reversed, so padding never reaches them.

    The DT cell runs both directions in one time loop (the state (2, batch, hidden), one batched
    product per cell and token); the result equals ``fwd`` and ``bwd`` run one after the other, up to
    float rounding. With ``cell_dropout`` one mask of (2, batch, hidden) is drawn per transition and
    token, for both directions at once: the same distribution, another order of random draws than
    running the directions one after the other."""

    def __init__(self, input_dim: int, hidden: int, **options):
        super().__init__()
        self.fwd = DTRNN(input_dim, hidden, **options)
        self.bwd = DTRNN(input_dim, hidden, **options)
        self.output_dim = 2 * hidden

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        index = reversal_index(lengths, x.shape[1])  # (batch, seq_len)
        if self.fwd.cell == "gru":
            back = gather_steps(self.bwd(gather_steps(x, index)), index)
            return torch.cat([self.fwd(x), back], dim=-1)
        fwd, bwd = self.fwd, self.bwd
        x_rev = gather_steps(x, index)  # (batch, seq_len, input_dim): each row's real tokens reversed
        xp = torch.stack([fwd.x_proj(fwd.with_positions(x)), bwd.x_proj(bwd.with_positions(x_rev))])
        # xp (2, batch, seq_len, 5 * hidden): row 0 the forward direction's inputs, row 1 the backward's
        lgru_product, lgru_norm = _two_directions(fwd.lgru, bwd.lgru)
        tgrus = [_two_directions(f, b) for f, b in zip(fwd.tgrus, bwd.tgrus)]
        h = x.new_zeros(2, x.shape[0], fwd.hidden)  # (2, batch, hidden)
        out = []
        for xp_t in xp.unbind(2):  # (2, batch, 5 * hidden)
            h = lgru_update(xp_t, h, lgru_product(h), lgru_norm)
            for product, norm in tgrus:
                h = fwd.dropout(h)  # (2, batch, hidden): both directions' masks in one draw
                h = tgru_update(h, product(h), norm)
            out.append(h)
        out = torch.stack(out, dim=2)  # (2, batch, seq_len, hidden)
        return torch.cat([out[0], gather_steps(out[1], index)], dim=-1)  # back in reading order
