"""Viterbi decoding of a linear-chain CRF in NumPy, for CPU inference.

A decode is a loop over time steps of small array operations; for the tag sets of sequence labeling
(tens of tags) each step costs a few microseconds in NumPy and several times that as PyTorch ops,
whose per-call dispatch dominates. :class:`seqlab.crf.CRF` uses this on CPU without gradients; the
exported-model runner (:mod:`seqlab.export`) uses it on onnxruntime's outputs.

Ties are broken towards the lowest tag index, as ``torch.argmax`` does, and every score is the same
float32 sum as in :meth:`seqlab.crf.CRF._viterbi_torch`, so both give the same paths.

Large batches keep no pointers on the way forward: a step there is one PyTorch add and ``amax`` over
(batch, tags, tags), about four times cheaper than NumPy's ``argmax`` and the read-back of the maxima
(64 sentences, 40 tags). The way back recomputes, for the one tag each row is at, the sums into it from the
stored scores of the step before and takes their ``argmax``: the same float32 sums as the forward's, so the
same pointers, the same paths and scores as the pointer-keeping loop at every batch size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch


#: From this many (batch x tags x tags) elements on, a step's broadcast sum runs as a PyTorch add into
#: the same buffer: about twice as fast as NumPy's for (64, 40, 40), whose inner loops are 40 long;
#: below it NumPy's lower per-call cost wins.
TORCH_ADD_FROM = 8192

#: From this many (batch x tags x tags) elements on, the forward keeps only each step's scores (``amax``)
#: and the way back recomputes the pointers it follows: faster from about 8 sentences at 40 tags, 64 at 17.
MAX_ONLY_FROM = 12000


def viterbi(emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray,
            end: np.ndarray, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Best path of every sentence of a right-padded batch.

    ``emissions`` (batch, seq_len, num_tags); ``lengths`` (batch,) >= 1; ``trans`` (from, to);
    ``start``, ``end`` (num_tags,). ``allowed`` (from, to) bool, optional: the moves a constrained CRF allows
    (``trans`` already holds its penalty on the others); large batches then take maxima over allowed moves
    only (:class:`MoveBlocks`). Returns the tags (batch, seq_len) int64, 0 on padding, and the paths' scores
    (batch,)."""
    batch, seq_len, num_tags = emissions.shape
    steps = int(lengths.max()) if batch else 0  # steps of the longest row
    full = int(lengths.min()) if batch else 0  # steps every row has: no masking needed before this
    if batch > 1 and batch * num_tags * num_tags >= MAX_ONLY_FROM:
        blocks = None if allowed is None else MoveBlocks.of(np.ascontiguousarray(allowed, dtype=bool).tobytes(),
                                                             num_tags)
        return _viterbi_max_only(emissions, lengths, trans, start, end, steps, full, blocks)
    into = np.ascontiguousarray(trans.T)[None]  # (1, to, from): the reduction runs over the last axis
    rows = np.arange(batch)
    offsets = np.arange(batch * num_tags).reshape(batch, num_tags) * num_tags  # flat index of (row, to, 0)
    emit = emissions.transpose(1, 0, 2)  # (seq_len, batch, num_tags), a view
    score = start + emit[0]  # (batch, num_tags)
    back = np.empty((max(steps - 1, 0), batch, num_tags), dtype=np.int64)  # best "from" per (step, row, to)
    total = np.empty((batch, num_tags, num_tags), dtype=np.result_type(emissions, trans))  # (batch, to, from)
    flat = total.reshape(-1)
    torch_add = total.size >= TORCH_ADD_FROM
    if torch_add:
        total_t, into_t = torch.from_numpy(total), torch.from_numpy(into)  # share the arrays' memory
    for t in range(1, steps):
        if torch_add:
            torch.add(torch.from_numpy(score)[:, None, :], into_t, out=total_t)
        else:
            np.add(score[:, None, :], into, out=total)
        best_from = total.argmax(2)  # (batch, to)
        best = flat.take(best_from + offsets)  # (batch, to): the max, read back
        best += emit[t]
        score = best if t < full else np.where((t < lengths)[:, None], best, score)  # padding keeps its score
        back[t - 1] = best_from
    final = score + end  # (batch, num_tags)
    tag = final.argmax(1)  # (batch,)
    best_score = final[rows, tag]
    tags = np.zeros((batch, seq_len), dtype=np.int64)
    if batch == 1:  # one path: follow the pointers as Python ints, cheaper than a NumPy call per step
        pointers = back[:, 0].tolist()  # (steps - 1, num_tags)
        k = int(tag[0])
        path = [k]
        for t in range(steps - 2, -1, -1):
            k = pointers[t][k]
            path.append(k)
        tags[0, :steps] = path[::-1]
        return tags, best_score
    for t in range(steps - 1, -1, -1):
        if t < full:
            tags[:, t] = tag
            if t:
                tag = back[t - 1, rows, tag]
            continue
        inside = t < lengths  # (batch,)
        tags[:, t] = np.where(inside, tag, 0)
        if t:
            tag = np.where(inside, back[t - 1, rows, tag], tag)
    return tags, best_score


#: A group of moves into tags that share their allowed sources is taken as "narrow" (gathered, padded to the
#: widest) up to this many sources, and as its own dense block above it.
NARROW_SOURCES = 4


@dataclass(frozen=True, eq=False)
class MoveBlocks:
    """A constrained CRF's allowed moves in a few dense blocks, for the max-only forward: the maximum into each
    tag taken over its allowed sources alone. Tags whose allowed sources are the same set form a block (BIOES:
    B-, S- and O are entered from O, E- and S-, so 21 x 21 moves for CoNLL-2000's 40 tags); the many small sets
    (I-X and E-X are entered from B-X and I-X only) share one block of gathered sources, padded with an
    impossible move. 479 sums and maxima a step instead of 1,600 for that tag set.

    ``allowed`` (from, to) bool; ``order`` lists the blocks' target tags one block after the other, the column
    order of the forward's scores; ``wide``: (targets, sources) tag index arrays; ``narrow``: targets, then their
    sources (targets, width) padded with source 0, and which of those are real (targets, width) bool."""

    allowed: np.ndarray
    order: np.ndarray
    wide: tuple[tuple[np.ndarray, np.ndarray], ...]
    narrow: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    @staticmethod
    @lru_cache(maxsize=16)
    def of(allowed: bytes, num_tags: int) -> MoveBlocks | None:
        """The blocks of ``allowed`` ((from, to) bool as bytes), or None where they would not save at least
        half of the dense sums, where more than two wide blocks are needed, or where a tag cannot be entered."""
        into = np.frombuffer(allowed, dtype=bool).reshape(num_tags, num_tags).T  # (to, from)
        groups: dict[bytes, list[int]] = {}
        for j in range(num_tags):
            groups.setdefault(into[j].tobytes(), []).append(j)
        wide, narrow = [], []
        for targets in groups.values():
            sources = np.flatnonzero(into[targets[0]])
            if not len(sources):
                return None  # a tag no move enters: the dense forward's scores there are what the tests compare
            (narrow if len(sources) <= NARROW_SOURCES else wide).append((targets, sources))
        sums = sum(len(t) * len(s) for t, s in wide) + sum(len(t) for t, _ in narrow) * NARROW_SOURCES
        if len(wide) > 2 or 2 * sums > num_tags * num_tags:
            return None
        order = [j for targets, _ in wide + narrow for j in targets]
        packed = None
        if narrow:
            width = max(len(s) for _, s in narrow)
            targets = [j for t, _ in narrow for j in t]
            src = np.zeros((len(targets), width), dtype=np.int64)
            real = np.zeros((len(targets), width), dtype=bool)
            k = 0
            for t, s in narrow:
                for _ in t:
                    src[k, : len(s)], real[k, : len(s)] = s, True
                    k += 1
            packed = (np.array(targets), src, real)
        return MoveBlocks(into.T.copy(), np.array(order), tuple((np.array(t), s) for t, s in wide), packed)

    def step(self, trans: torch.Tensor) -> "_BlockStep":
        """The forward's per-step operator for ``trans`` (from, to), in the blocks' column order."""
        position = np.empty(len(self.order), dtype=np.int64)
        position[self.order] = np.arange(len(self.order))  # column of each tag
        wide = []
        for targets, sources in self.wide:
            into = trans[torch.from_numpy(sources)][:, torch.from_numpy(targets)].T.contiguous()  # (to, from)
            wide.append((torch.from_numpy(position[sources]), into[None]))
        narrow = None
        if self.narrow is not None:
            targets, src, real = self.narrow
            into = trans[torch.from_numpy(src), torch.from_numpy(targets)[:, None]]  # (targets, width)
            into = into.masked_fill(~torch.from_numpy(real), float("-inf"))  # padding: an impossible move
            narrow = (torch.from_numpy(position[src].reshape(-1)), into, src.shape)
        return _BlockStep(wide, narrow)


class _BlockStep:
    """One max-only step over :class:`MoveBlocks`: (batch, tags) scores in block order -> each tag's best sum."""

    def __init__(self, wide, narrow):
        self.wide, self.narrow = wide, narrow

    def __call__(self, score: torch.Tensor) -> torch.Tensor:
        parts = []
        for sources, into in self.wide:
            parts.append(torch.amax(score.index_select(1, sources)[:, None, :] + into, 2))  # (batch, targets)
        if self.narrow is not None:
            sources, into, shape = self.narrow
            gathered = score.index_select(1, sources).view(len(score), *shape)  # (batch, targets, width)
            parts.append(torch.amax(gathered + into, 2))
        return torch.cat(parts, 1) if len(parts) > 1 else parts[0]  # (batch, tags), block order


def _viterbi_max_only(emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray,
                      end: np.ndarray, steps: int, full: int,
                      blocks: MoveBlocks | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`viterbi` for large batches: a forward of maxima only, pointers recomputed on the way back
    for the followed tags alone (see the module's docstring). With ``blocks``, the forward runs in their
    column order over the allowed moves only, and the way back follows allowed moves only."""
    batch, seq_len, num_tags = emissions.shape
    dtype = np.result_type(emissions, trans)
    order = slice(None) if blocks is None else blocks.order
    emit = torch.from_numpy(np.ascontiguousarray(emissions.transpose(1, 0, 2)[:, :, order], dtype=dtype))
    into = torch.from_numpy(np.ascontiguousarray(trans.T, dtype=dtype))[None]  # (1, to, from)
    inside = torch.from_numpy(np.arange(steps)[:, None] < lengths[None])[:, :, None]  # (steps, batch, 1)
    history = np.empty((steps, batch, num_tags), dtype=dtype)  # the scores after each step (blocks' order)
    kept = torch.from_numpy(history)
    score = torch.from_numpy(start[order].astype(dtype)) + emit[0]  # (batch, num_tags); emit (seq, batch, tags)
    kept[0] = score
    if blocks is None:
        total = torch.empty(batch, num_tags, num_tags, dtype=score.dtype)  # (batch, to, from)
        step = lambda s: torch.amax(torch.add(s[:, None, :], into, out=total), 2)  # noqa: E731
    else:
        step = blocks.step(torch.from_numpy(trans.astype(dtype)))
    for t in range(1, steps):
        best = step(score)  # (batch, to)
        best += emit[t]
        score = best if t < full else torch.where(inside[t], best, score)  # padding keeps its score
        kept[t] = score
    sources = into[0].numpy()  # (to, from): row j holds the moves into j
    if blocks is not None:
        history = history[:, :, np.argsort(blocks.order)]  # back to tag order
        sources = np.where(blocks.allowed.T, sources, -np.inf).astype(dtype)
    final = history[steps - 1] + end  # (batch, num_tags)
    rows = np.arange(batch)
    tag = final.argmax(1)  # (batch,)
    best_score = final[rows, tag]
    tags = np.zeros((batch, seq_len), dtype=np.int64)
    for t in range(steps - 1, -1, -1):
        if t >= full:
            real = t < lengths  # (batch,)
            tags[:, t] = np.where(real, tag, 0)
        else:
            tags[:, t] = tag
        if t:
            previous = (history[t - 1] + sources[tag]).argmax(1)  # (batch,): the forward's sums into tag
            tag = previous if t < full else np.where(real, previous, tag)
    return tags, best_score
