"""Viterbi decoding of a linear-chain CRF in NumPy, for CPU inference.

A decode is a loop over time steps of small array operations; for the tag sets of sequence labeling
(tens of tags) each step costs a few microseconds in NumPy and several times that as PyTorch ops,
whose per-call dispatch dominates. :class:`seqlab.crf.crf.CRF` uses this on CPU without gradients; the
exported-model runner (:mod:`seqlab.serving.export`) uses it on onnxruntime's outputs.

Ties are broken towards the lowest tag index, as ``torch.argmax`` does, and every score is the same
float32 sum as in :meth:`seqlab.crf.crf.CRF._viterbi_torch`, so both give the same paths.

Large batches keep no pointers on the way forward: a step there is one PyTorch add into (tags, batch, tags) and
``amax`` over its outer axis, several times cheaper than NumPy's ``argmax`` and the read-back of the maxima
(64 sentences, 40 tags). The way back recomputes, for the one tag each row is at, the sums into it from the
stored scores of the step before and takes their ``argmax``: the same float32 sums as the forward's, so the
same pointers, the same paths and scores as the pointer-keeping loop at every batch size.
"""

from __future__ import annotations

import numpy as np
import torch

#: From this many (batch x tags x tags) elements on, a step's broadcast sum runs as a PyTorch add into
#: the same buffer: about twice as fast as NumPy's for (64, 40, 40), whose inner loops are 40 long;
#: below it NumPy's lower per-call cost wins.
TORCH_ADD_FROM = 8192

#: From this many (batch x tags x tags) elements on, the forward keeps only each step's scores (``amax``)
#: and the way back recomputes the pointers it follows: faster from about 8 sentences at 40 tags, 64 at 17.
MAX_ONLY_FROM = 12000


def viterbi(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Best path of every sentence of a right-padded batch.

    ``emissions`` (batch, seq_len, num_tags); ``lengths`` (batch,) >= 1; ``trans`` (from, to);
    ``start``, ``end`` (num_tags,). Returns the tags (batch, seq_len) int64, 0 on padding, and the
    paths' scores (batch,)."""
    batch, seq_len, num_tags = emissions.shape
    steps = int(lengths.max()) if batch else 0  # steps of the longest row
    full = int(lengths.min()) if batch else 0  # steps every row has: no masking needed before this
    if batch > 1 and batch * num_tags * num_tags >= MAX_ONLY_FROM:
        return _viterbi_max_only(emissions, lengths, trans, start, end, steps, full)
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


def _viterbi_max_only(
    emissions: np.ndarray,
    lengths: np.ndarray,
    trans: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    steps: int,
    full: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`viterbi` for large batches: a forward of maxima only, pointers recomputed on the way back
    for the followed tags alone (see the module's docstring)."""
    batch, seq_len, num_tags = emissions.shape
    dtype = np.result_type(emissions, trans)
    emit = torch.from_numpy(np.ascontiguousarray(emissions.transpose(1, 0, 2), dtype=dtype))  # (seq, batch, tags)
    moves = torch.from_numpy(np.ascontiguousarray(trans, dtype=dtype))[:, None, :]  # (from, 1, to)
    inside = torch.from_numpy(np.arange(steps)[:, None] < lengths[None])[:, :, None]  # (steps, batch, 1)
    history = np.empty((steps, batch, num_tags), dtype=dtype)  # the scores after each step
    kept = torch.from_numpy(history)
    score = torch.from_numpy(start.astype(dtype)) + emit[0]  # (batch, num_tags)
    kept[0] = score
    total = torch.empty(num_tags, batch, num_tags, dtype=score.dtype)  # (from, batch, to)
    for t in range(1, steps):
        # score[b, i] + trans[i, j] at (i, b, j): the maximum over the outer axis runs along whole (batch, to)
        # slabs, 1.8x faster than over a last axis of num_tags (64 sentences, 40 tags: 31-33 against 57-58 us)
        torch.add(score.T[:, :, None], moves, out=total)
        best = torch.amax(total, 0)  # (batch, to)
        best += emit[t]
        score = best if t < full else torch.where(inside[t], best, score)  # padding keeps its score
        kept[t] = score
    final = history[steps - 1] + end  # (batch, num_tags)
    rows = np.arange(batch)
    tag = final.argmax(1)  # (batch,)
    best_score = final[rows, tag]
    sources = np.ascontiguousarray(trans.T, dtype=dtype)  # (to, from): row j holds the moves into j
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
