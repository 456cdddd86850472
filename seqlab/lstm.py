"""Bidirectional LSTM over right-padded batches, on PyTorch's fused one-way LSTM kernel.

Each direction is a one-way ``nn.LSTM``: ``fwd`` reads every row left to right, ``bwd`` reads every
row's real steps reversed (padding stays at the end), and its outputs are put back in place. Padding
comes after the real steps in both readings, so it never reaches a real step's output: the result
equals a bidirectional LSTM over packed sequences on every real position.

Which kernel runs: with gradients (training), the padded rows always go through the fused kernel,
1.4x faster on CPU than packed sequences (char BiLSTM, batch 10, forward + backward). Without
gradients (inference) and with ``packed_inference=True``, each direction runs on packed sequences
instead: 1.3-1.6x faster for char BiLSTMs, whose rows mix short and long words (CoNLL-2000 test
words at batch 10 and 64), but slower for the word BiLSTM, whose batches are length-bucketed and
hardly padded. Both give the same real steps.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def reversal_index(lengths: Tensor, seq_len: int) -> Tensor:
    """(batch, seq_len) gather index reversing each row's first ``lengths[b]`` steps (an involution
    on real steps); padded positions point at step 0 and are never read as real steps."""
    steps = torch.arange(seq_len, device=lengths.device)
    return (lengths[:, None] - 1 - steps).clamp(min=0)


def gather_steps(x: Tensor, index: Tensor) -> Tensor:
    """x (batch, seq_len, d), index (batch, seq_len) -> x[b, index[b, t]] (batch, seq_len, d)."""
    return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.shape[2]))


def _run_padded(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> Tensor:
    """One-way LSTM over all steps of right-padded rows: (batch, seq_len, d) -> (batch, seq_len, h)."""
    return lstm(x)[0]


def _run_packed(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> Tensor:
    """One-way LSTM over the real steps only; padded positions come back as zeros. Same shapes."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.shape[1])[0]


class BiLSTM(nn.Module):
    """``layers`` stacked bidirectional layers of ``hidden`` units per direction; dropout between layers."""

    def __init__(self, input_dim: int, hidden: int, layers: int = 1, dropout: float = 0.0,
                 packed_inference: bool = False):
        super().__init__()
        self.packed_inference = packed_inference
        dims = [input_dim] + [2 * hidden] * (layers - 1)
        self.fwd = nn.ModuleList(nn.LSTM(d, hidden, batch_first=True) for d in dims)
        self.bwd = nn.ModuleList(nn.LSTM(d, hidden, batch_first=True) for d in dims)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = 2 * hidden

    def directions(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Last layer's (forward, backward) outputs, each (batch, seq_len, hidden), in input order.
        x (batch, seq_len, input_dim) right-padded; lengths (batch,) >= 1. Padded positions: garbage."""
        index = reversal_index(lengths, x.shape[1])  # (batch, seq_len)
        packed = self.packed_inference and not torch.is_grad_enabled()
        run = _run_packed if packed else _run_padded
        out_f = out_b = x
        for layer, (fwd, bwd) in enumerate(zip(self.fwd, self.bwd)):
            if layer:
                x = self.dropout(torch.cat([out_f, out_b], dim=-1))
            out_f = run(fwd, x, lengths)
            out_b = gather_steps(run(bwd, gather_steps(x, index), lengths), index)
        return out_f, out_b

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        """(batch, seq_len, 2 * hidden): both directions concatenated."""
        return torch.cat(self.directions(x, lengths), dim=-1)
