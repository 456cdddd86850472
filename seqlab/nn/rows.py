"""Embedding tables trained by rows: momentum SGD whose step touches only the rows a batch read.

``torch.optim.SGD`` with momentum mu updates every row of an embedding table on every step: a row's velocity
decays (v <- mu v) and keeps moving the row (p <- p - lr v) long after its word was last seen. So a step reads and
writes the whole table, its momentum buffer and its dense gradient (zero-filled, then summed into the clipping
norm), whatever the batch: for the chunker's 18,950 x 50 word table about 30 MB of memory traffic a step, and ten
times that for a 100,000-word, 300-d table, where the batch itself reads a few hundred rows.

A :class:`LazyRows` owns a table's momentum buffer and applies the steps a row was not in lazily, when the row is
next read or at the latest when the window below ends. A row brought up to date at step s and not in steps
s+1 .. t is, at step t, in exact arithmetic,

    v_t = mu^(t-s) v_s,    p_t = p_s - v_s * sum_{j=s+1..t} lr_j mu^(j-s),

which two running sums over the window's steps give in float64: with c_j = mu^j and S_j = sum_{i<=j} lr_i c_i
(j counted from the window's start), mu^(t-s) = c_t / c_s and the sum is (S_t - S_s) / c_s. A window ends, with
every row brought up to date (one pass over the table), once c_t falls below ``MIN_DECAY`` (65 steps at mu 0.9),
so that dividing by c_s keeps float64's precision, or after ``WINDOW`` steps. Rows in a step are brought up to date
and then take torch's update, v <- mu v + g and p <- p - lr v. The result is torch.optim.SGD's to float rounding (a
lazy row moves by one product instead of a product a step), not to the bit (tested against torch.optim.SGD).

Who reads a table must see it up to date. The module that owns one marks it (:func:`mark`) and reads it only
through :func:`lookup`: a lookup with gradients brings the rows it reads up to date first and gives the table a
row-sparse gradient; one without gradients (evaluation, prediction, export) brings the whole table up to date.
The module also calls :func:`flush` when put in eval mode and before its ``state_dict``, and
:class:`seqlab.training.optim.SGD` flushes its tables before its own ``state_dict`` (checkpoints). Only a marked
parameter of an :class:`seqlab.training.optim.SGD` made with ``row_tables=True``
(:func:`seqlab.training.loop.make_optimizer`: not with weight averaging or data-parallel ranks, which read or reduce the
whole table each step) becomes a table, and only with plain momentum (no weight decay, dampening, Nesterov or
``maximize``); anything else keeps the dense update.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F
from torch.utils.weak import WeakIdKeyDictionary

#: A window ends once mu^steps falls below this (dividing by mu^s then loses at most ~3 digits of float64's 16).
MIN_DECAY = 1e-3
#: ... or after this many steps (the sums' length).
WINDOW = 1024

_MARKED: WeakIdKeyDictionary = WeakIdKeyDictionary()  # parameters read only through lookup(): -> True
_TABLES: WeakIdKeyDictionary = WeakIdKeyDictionary()  # parameters updated by rows -> their LazyRows


def mark(weight: Tensor) -> None:
    """Declare that ``weight`` (rows, dim) is read only through :func:`lookup` (and the module flushes it before
    other reads), so that an optimiser may update it by rows."""
    _MARKED[weight] = True


def marked(weight: Tensor) -> bool:
    return weight in _MARKED


def table(weight: Tensor) -> LazyRows | None:
    """The :class:`LazyRows` updating ``weight``, if any."""
    return _TABLES.get(weight)


def lookup(ids: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """``F.embedding(ids, weight, padding_idx)`` with ``weight``'s pending updates applied to what it reads: with
    gradients, the rows in ``ids`` (and the gradient comes back row-sparse); without, the whole table."""
    lazy = _TABLES.get(weight) if _TABLES else None  # (the emptiness test is the cheaper one, for inference)
    if lazy is None:
        return F.embedding(ids, weight, padding_idx)
    if not (torch.is_grad_enabled() and weight.requires_grad):
        lazy.flush()
        return F.embedding(ids, weight, padding_idx)
    lazy.catch_up(ids.flatten().unique())
    return F.embedding(ids, weight, padding_idx, sparse=True)


def flush(weight: Tensor) -> None:
    """Apply every pending update of ``weight`` (nothing when it is not updated by rows)."""
    lazy = _TABLES.get(weight)
    if lazy is not None:
        lazy.flush()


class LazyRows:
    """One table's momentum buffer and the momentum steps it owes its rows (see the module)."""

    def __init__(self, weight: Tensor, buffer: Tensor | None, momentum: float):
        self.weight = weight  # (rows, dim)
        self.momentum = momentum
        self.buffer = torch.zeros_like(weight) if buffer is None else buffer  # (rows, dim): v, current as `at` says
        self.at = torch.zeros(weight.shape[0], dtype=torch.long, device=weight.device)  # (rows,) window step
        self.decays = torch.ones(WINDOW + 1, dtype=torch.float64, device=weight.device)  # c_j
        self.sums = torch.zeros(WINDOW + 1, dtype=torch.float64, device=weight.device)  # S_j
        self.steps, self.decay, self.sum = 0, 1.0, 0.0  # the window's step count, c and S at it

    def _owed(self, at: Tensor) -> tuple[Tensor, Tensor]:
        """For rows current at window steps ``at`` (k,): what their velocity is multiplied by up to the current step,
        mu^(t-s), and what moves them by that velocity, -(S_t - S_s) / c_s; each (k, 1) in the table's dtype."""
        c = self.decays.index_select(0, at)  # (k,) c_s
        decay = (self.decay / c).to(self.weight.dtype).unsqueeze(1)
        shift = ((self.sums.index_select(0, at) - self.sum) / c).to(self.weight.dtype).unsqueeze(1)
        return decay, shift

    @torch.no_grad()
    def catch_up(self, rows: Tensor) -> None:
        """Bring ``rows`` (distinct row indices) up to the current step."""
        if self.steps == 0:
            return  # every row is current at a window's start
        decay, shift = self._owed(self.at.index_select(0, rows))  # (k, 1) each
        v = self.buffer.index_select(0, rows)  # (k, dim)
        self.weight.index_add_(0, rows, v * shift)
        self.buffer.index_copy_(0, rows, v.mul_(decay))
        self.at.index_fill_(0, rows, self.steps)

    @torch.no_grad()
    def flush(self) -> None:
        """Bring every row up to date and start a new window."""
        if self.steps == 0:
            return
        decay, shift = self._owed(self.at)  # (rows, 1) each
        self.weight.addcmul_(self.buffer, shift)
        self.buffer.mul_(decay)
        self.at.zero_()
        self.steps, self.decay, self.sum = 0, 1.0, 0.0

    @torch.no_grad()
    def step(self, grad: Tensor, lr: float, momentum: float, grad_scale: Tensor | None = None) -> None:
        """torch.optim.SGD's step with a coalesced row-sparse ``grad`` (divided by ``grad_scale`` when given)."""
        rows, values = grad.indices()[0], grad.values()  # (k,), (k, dim)
        if grad_scale is not None:
            values = values / grad_scale.to(values.dtype)
        if momentum != self.momentum:  # the group's momentum changed: the steps owed so far at the old one
            self.flush()
            self.momentum = momentum
        if momentum == 0:  # v = g: rows not in the step do not move
            self.weight.index_add_(0, rows, values, alpha=-lr)
            return
        if rows.numel() and int(self.at.index_select(0, rows).min()) < self.steps:
            self.catch_up(rows)  # a gradient from before the last step (none when each forward precedes its step)
        v = self.buffer.index_select(0, rows).mul_(momentum).add_(values)  # (k, dim)
        self.buffer.index_copy_(0, rows, v)
        self.steps += 1
        self.decay *= momentum
        self.sum += lr * self.decay
        self.decays[self.steps], self.sums[self.steps] = self.decay, self.sum
        self.weight.index_add_(0, rows, v, alpha=-lr)
        self.at.index_fill_(0, rows, self.steps)
        if self.decay < MIN_DECAY or self.steps == WINDOW:
            self.flush()


def attach(weight: Tensor, buffer: Tensor | None, momentum: float) -> LazyRows:
    """Make ``weight`` updated by rows, with ``buffer`` as its momentum (a table it had is flushed first)."""
    flush(weight)
    lazy = _TABLES[weight] = LazyRows(weight, buffer, momentum)
    return lazy


def detach(weight: Tensor) -> None:
    """Apply ``weight``'s pending updates and update it densely from now on."""
    flush(weight)
    _TABLES.pop(weight, None)
