"""What tagging costs in memory, known before anything is allocated.

Inference memory grows with a sentence in two ways. Per position, each layer's activations: linear in the
length. Per pair of positions, the attention of FLAT, PSA and the parallel attention of Li et al. (2019):
(batch, heads, L, L) scores, their mask and softmax, quadratic in L, where FLAT's L is its lattice (the
characters plus the lexicon words matched in the sentence). :func:`network_cost` reads both rates off the
network's modules as a :class:`Cost`, an upper bound (several copies of each tensor alive at once; for one
sentence of 1,500 tokens to the tiny test models the estimate was 1.6x the measured peak for FLAT, 2x for PSA and
1.9x for the parallel attention, tests/test_cost.py), and :class:`Budget` holds every call of
:class:`seqlab.tagger.Tagger` to :data:`MEMORY_BUDGET` bytes (:attr:`seqlab.tagger.Tagger.memory_budget`):

* a sentence whose one-piece cost is over the budget is refused before anything of it is encoded or run, with
  the longest piece that fits (``--max-length``): first by its tokens alone, then, for a lattice, by its lattice
  length (:class:`OverBudget`, a one-line :class:`SeqlabError`; the server answers it with HTTP 413);
* a batch over the budget runs in parts, rows of it at a time, each part within the budget; parts that run side
  by side on several threads (:func:`seqlab.runtime.devices.run_concurrently`) share it;
* what a call keeps for its caller (the attention maps of ``explain``) is summed over all its sentences, and a
  call whose explanations would pass half the budget is refused; the batches then get the other half.

With the default budget, FLAT with 8 heads takes a sentence of about 3,300 lattice positions in one piece (some
2,400 Chinese characters with their words); before the budget, one of 20,000 characters asked for 25.9 GB. The
attention is not computed in pieces (its time grows with the square of the length all the same): a longer sentence
is tagged in pieces with ``--max-length``. The memory of the model itself (its weights) is bounded when it is
loaded (:mod:`seqlab.tagging.modelfile`).

:func:`parameter_shapes` builds a network with its large tensors on PyTorch's meta device (no memory): the
shapes and dtypes a model file must hold, and the parameter bytes a config asks for, known before the real
network is built or a weight is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from seqlab.errors import SeqlabError

#: Bytes one call of the tagger may spend on its tensors (the running batches, and what it keeps for the caller).
MEMORY_BUDGET = 2 << 30

FLOAT = 4  # bytes of a float32
#: FLAT, per pair and head: content scores, relative scores, their sum, the masked scores and the softmax
#: (float32), live together in the worst case.
FLAT_PER_HEAD = 5 * FLOAT
#: FLAT, per pair: the (batch, L, L) bool mask, and int64 gather indices / FLAT_mld's gaps.
FLAT_PER_PAIR = 24
#: PSA, per pair: additive scores, Gaussian and position terms and their sums, masked scores, softmax, int64
#: distance index and bool masks.
PSA_PER_PAIR = 64
#: Parallel attention (Li et al. 2019), per pair and head: scores, scaled, masked, softmax.
PARALLEL_PER_HEAD = 4 * FLOAT
#: Per published attention value that ``explain`` returns: a Python float in a list, then JSON text.
EXPLAIN_BYTES = 64
#: Per position: copies of the widest activation of any layer that may be alive at once.
WIDTH_COPIES = 6


class OverBudget(SeqlabError):
    """A call the memory budget refuses. ``index``: the sentence of the call at fault (None for the whole call);
    ``reason``: what it needs, without its place; ``fits``: the longest piece, in tokens, that would fit."""

    def __init__(self, message: str, reason: str, index: int | None = None, fits: int | None = None, **where):
        super().__init__(message, **where)
        self.reason, self.index, self.fits = reason, index, fits


@dataclass(frozen=True)
class Cost:
    """Bytes of inference memory: ``position`` per padded position of a batch (for a lattice, per lattice
    position), ``pair`` per pair of positions while a batch runs, ``kept_pair`` per pair kept after it for the
    caller (explanations)."""

    position: int
    pair: int = 0
    kept_pair: int = 0

    def batch(self, rows: int, length: int) -> int:
        """Bytes of a batch of ``rows`` sentences padded to ``length`` positions while it runs."""
        return rows * (length * self.position + length * length * self.pair)

    def kept(self, length: int) -> int:
        """Bytes a sentence of ``length`` positions keeps after its batch (its explanations)."""
        return length * length * self.kept_pair

    def fits(self, limit: int, ratio: float = 1.0) -> int:
        """The most tokens a sentence may have for its batch of one to stay within ``limit`` bytes, when its
        length is ``ratio`` positions per token (a lattice's words on top of its characters)."""
        a, b = self.pair * ratio * ratio, self.position * ratio  # bytes = a n^2 + b n
        n = limit / b if a == 0 else (-b + math.sqrt(b * b + 4 * a * limit)) / (2 * a)
        n = int(n)
        while n > 1 and self.batch(1, math.ceil(n * ratio)) > limit:
            n -= 1
        return max(n, 1)


def _round_down(n: int) -> int:
    """``n`` to its first two digits, rounded down (4527 -> 4500): a length to suggest, with a margin."""
    unit = 10 ** max(0, len(str(n)) - 2)
    return n // unit * unit


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB" if size >= 1 << 20 else f"{size / 1024:,.1f} KiB"


class Budget:
    """A call's memory budget (``limit`` bytes) for a network of cost ``cost``: refuses what cannot fit, cuts
    batches into parts that do. ``threads``: batches that may run side by side."""

    def __init__(self, cost: Cost, limit: int, threads: int = 1):
        self.cost, self.threads = cost, max(1, threads)
        self.limit = limit // 2 if cost.kept_pair else limit  # explanations get the other half
        self.kept_limit = limit - self.limit

    def over(self, length: int) -> bool:
        """Whether a sentence of ``length`` positions, alone in its batch, is over the budget."""
        return self.cost.batch(1, length) + self.cost.kept(length) > self.limit

    def check(self, index: int, source: str, line: int, tokens: int, length: int, ratio: float | None = None) -> None:
        """A sentence of ``tokens`` tokens and ``length`` positions, alone in its batch: :class:`OverBudget` if
        over, with the longest piece that fits at ``ratio`` positions per token (by default its own)."""
        if not self.over(length):
            return
        need = self.cost.batch(1, length) + self.cost.kept(length)
        fits = _round_down(self.cost.fits(self.limit, ratio or length / max(tokens, 1)))
        lattice = f" ({length} lattice positions)" if length != tokens else ""
        reason = (
            f"a sentence of {tokens} tokens{lattice} needs about {_mib(need)} to tag in one piece, over the "
            f"{_mib(self.limit)} memory budget"
        )
        raise OverBudget(
            f"{reason}; tag it in pieces with --max-length {fits}", reason, index, fits, path=source, line=line
        )

    def check_kept(self, lengths: Sequence[int]) -> None:
        """What the sentences keep for the caller, together: OverBudget if over its share."""
        need = sum(self.cost.kept(n) for n in lengths)
        if need > self.kept_limit:
            reason = (
                f"the explanations of {len(lengths)} sentences need about {_mib(need)} together, over the "
                f"{_mib(self.kept_limit)} memory budget"
            )
            raise OverBudget(f"{reason}: explain fewer or shorter sentences at a time", reason)

    def parts(self, group: list[int], tokens: Sequence[int], lengths: Sequence[int]) -> list[list[int]]:
        """``group`` (positions into ``tokens`` and ``lengths``, ascending by tokens) cut into consecutive parts
        whose batches fit the budget; whole when it fits (the usual case). A batch pads its tokens and its
        lattice words separately: its length is its most tokens plus its most words (:func:`padded`)."""
        parts: list[list[int]] = [[]]
        most_tokens = most_extra = 0  # of the last part
        for i in group:
            longest = max(most_tokens, tokens[i]) + max(most_extra, lengths[i] - tokens[i])
            if parts[-1] and self.cost.batch(len(parts[-1]) + 1, longest) > self.limit:
                parts.append([])
                most_tokens = most_extra = 0
            parts[-1].append(i)
            most_tokens, most_extra = max(most_tokens, tokens[i]), max(most_extra, lengths[i] - tokens[i])
        return parts

    def side_by_side(self, rows: int, length: int) -> bool:
        """Whether a batch may run beside others: its cost within the budget's share of one thread."""
        return self.threads == 1 or self.cost.batch(rows, length) <= self.limit // self.threads


def padded(group: Sequence[int], tokens: Sequence[int], lengths: Sequence[int]) -> int:
    """The positions of a batch of the sentences ``group`` (positions into ``tokens`` and ``lengths``): its most
    tokens, plus its most other positions (a lattice's words), each padded on its own."""
    return max(tokens[i] for i in group) + max(lengths[i] - tokens[i] for i in group)


# ---------------------------------------------------------------------------------------------
# Rates read off the network
# ---------------------------------------------------------------------------------------------


def _width(module: nn.Module) -> int:
    """The widest per-position activation a module makes (0 for a module that makes none of its own)."""
    if isinstance(module, nn.Linear):
        return max(module.in_features, module.out_features)
    if isinstance(module, nn.Embedding):
        return module.embedding_dim
    if isinstance(module, nn.RNNBase):
        gates = {"LSTM": 4, "GRU": 3}.get(module.mode, 1)
        return gates * module.hidden_size * (2 if module.bidirectional else 1)
    if isinstance(module, nn.Conv1d):
        return max(module.in_channels, module.out_channels) * module.kernel_size[0]
    return 0


def network_cost(
    net: nn.Module,
    per_token: Mapping[str, int] | None = None,
    tags: int = 0,
    nbest: int = 0,
    explain: bool = False,
    whole_pairs: int = 0,
) -> Cost:
    """The :class:`Cost` of ``net``'s inference. ``per_token``: the embedder's features that work on several
    positions per token (characters: their ``max_len``), by name; ``tags``: the decoder's tag count (its
    lattices of scores and back-pointers, per position); ``nbest``: the paths asked for; ``explain``: the
    published attention maps are returned; ``whole_pairs``: floats per pair of a pairwise tensor made in one
    piece (the exported graph of onnxruntime, :mod:`seqlab.runtime.engine`)."""
    from seqlab.encoders.attention import ParallelAttentionEncoder
    from seqlab.encoders.flat import FlatLayer
    from seqlab.encoders.psa import PSAFusionEncoder

    widths = [1]
    for name, module in net.named_modules():
        factor = next((k for f, k in (per_token or {}).items() if name.startswith(f"embedder.{f}.")), 1)
        widths.append(_width(module) * factor)
    position = FLOAT * WIDTH_COPIES * max(widths) + 8 * tags * (4 + 2 * nbest)
    running, kept, explained = 0, 0, 0
    for module in net.modules():
        if isinstance(module, FlatLayer):
            running = max(running, FLAT_PER_HEAD * module.heads + FLAT_PER_PAIR + FLOAT * whole_pairs)
        elif isinstance(module, PSAFusionEncoder):
            running = max(running, PSA_PER_PAIR + FLOAT * whole_pairs)
            kept, explained = kept + FLOAT, explained + 1  # its published attention lives to the decoder
        elif isinstance(module, ParallelAttentionEncoder):
            running = max(running, PARALLEL_PER_HEAD * module.heads)
            kept, explained = kept + FLOAT * module.heads, explained + module.heads + 1  # the heads and their mean
    return Cost(position, running + kept, EXPLAIN_BYTES * explained if explain else 0)


# ---------------------------------------------------------------------------------------------
# Parameters, before the network is built
# ---------------------------------------------------------------------------------------------

#: Tensors of more elements than this are made on the meta device by :func:`parameter_shapes`; smaller ones are
#: made as usual (buffers computed from data at construction, such as a CRF's allowed transitions).
META_ABOVE = 1 << 12


class _LargeOnMeta(TorchFunctionMode):
    """Factory functions (``torch.empty``, ``zeros``, ...) given no device make tensors of more than
    :data:`META_ABOVE` elements on the meta device: shapes and dtypes without memory."""

    def __init__(self):
        super().__init__()
        self.factories = _device_constructors()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.factories and kwargs.get("device") is None:
            size = args[0] if args and isinstance(args[0], (tuple, list)) else args
            if size and all(isinstance(s, int) for s in size) and math.prod(size) > META_ABOVE:
                kwargs["device"] = "meta"
        return func(*args, **kwargs)


def parameter_shapes(build: Callable[[], nn.Module]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """The state dict ``build()`` makes, as name -> (shape, dtype), built with its large tensors on the meta
    device: the shapes a network of any size has, for no memory."""
    with _LargeOnMeta():
        net = build()
    return {name: (tuple(t.shape), t.dtype) for name, t in net.state_dict().items()}


def state_bytes(shapes: Mapping[str, tuple[tuple[int, ...], torch.dtype]]) -> int:
    """Bytes of a state dict of these shapes and dtypes."""
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())


__all__ = ["MEMORY_BUDGET", "Budget", "Cost", "OverBudget", "network_cost", "padded", "parameter_shapes", "state_bytes"]
