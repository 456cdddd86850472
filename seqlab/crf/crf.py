"""A batched, vectorised linear-chain conditional random field.

Conventions
-----------
* batch first everywhere: ``emissions`` (batch, seq_len, num_tags) float, ``tags`` (batch, seq_len)
  long, ``mask`` (batch, seq_len) bool, True on real tokens. Masks must be left-aligned and every
  sentence has at least one token (``mask[:, 0]`` all True). ``mask=None`` means "no padding".
* ``transitions[from, to]`` is the score of moving from tag ``from`` to tag ``to``;
  ``start_transitions[t]`` / ``end_transitions[t]`` score starting / ending a sentence with ``t``.
* The score of a path ``y`` of length ``L`` is
  ``start[y0] + sum_t emissions[t, y_t] + sum_{t>0} transitions[y_{t-1}, y_t] + end[y_{L-1}]``.

Hard constraints (``allowed``, ``allowed_start``, ``allowed_end``) are turned into additive penalty
buffers holding 0 for allowed moves and ``DISALLOWED_SCORE`` (-10000) for disallowed ones. The
penalties are added to the parameters once per call, inside every computation, so disallowed paths
have ~0 probability and never win Viterbi. A finite value (not -inf) keeps gradients NaN-free. The
n-best decoder, which needs no gradients, excludes disallowed moves outright (-inf), so it returns
only allowed paths, and fewer than ``k`` (possibly none) if fewer allowed paths exist.

Values at padded positions of ``emissions`` and ``tags`` are ignored: they change no result and
receive zero gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.crf.partition import LogPartition, alpha_recursion, beta_recursion
from seqlab.crf.posteriors import forward_backward
from seqlab.crf.viterbi import viterbi
from seqlab.nn.versions import weights_key

__all__ = ["CRF", "DISALLOWED_SCORE", "TagPath", "kbest_paths"]

#: Additive score of a disallowed move (finite so that gradients stay NaN-free).
DISALLOWED_SCORE = -10000.0
#: Batches of up to this many sentences on a CUDA GPU are decoded on the host, in NumPy (0: always on the GPU).
#: At batch 1 an H100 tagged the chunker's sentences at 3.1-3.8 ms each; the PyTorch loop dispatches 339 operations
#: for a 24-token sentence with 40 tags, the host's way 6 (benchmarks/op_count.py). Its effect on a GPU's time is not
#: measured yet (``benchmarks/gpu_lever_ab.py --lever host-viterbi``).
GPU_HOST_VITERBI_ROWS = 2


@dataclass(frozen=True)
class TagPath:
    """One decoded path: tag indices (cut to the sentence's length) and its score."""

    tags: list[int]
    score: float


def _penalty(allowed: Tensor | None, shape: tuple[int, ...], name: str) -> Tensor:
    """0 where allowed, DISALLOWED_SCORE where not; all zeros when ``allowed`` is None."""
    if allowed is None:
        return torch.zeros(shape)
    if not isinstance(allowed, Tensor):
        raise ValueError(f"{name}: expected a bool Tensor of shape {tuple(shape)}, got {type(allowed).__name__}")
    if allowed.dtype != torch.bool:
        raise ValueError(f"{name}: expected dtype torch.bool, got {allowed.dtype}")
    if tuple(allowed.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(allowed.shape)}")
    return torch.zeros(shape).masked_fill(~allowed.detach().cpu(), DISALLOWED_SCORE)


def _cooled(emissions: Tensor, temperature: float) -> Tensor:
    """Emission scores divided by a temperature (the same tensor at 1)."""
    return emissions if temperature == 1.0 else emissions / temperature


class CRF(nn.Module):
    """Linear-chain CRF over ``num_tags`` tags.

    Parameters ``transitions`` (num_tags, num_tags), ``start_transitions`` (num_tags,) and
    ``end_transitions`` (num_tags,) are initialised uniform(-0.1, 0.1).

    Optional hard constraints: ``allowed`` bool (num_tags, num_tags) with ``allowed[i, j]`` True when
    tag ``j`` may follow tag ``i``; ``allowed_start`` / ``allowed_end`` bool (num_tags,) for the
    first / last tag of a sentence. They are stored as penalty buffers (saved and moved with the
    module).

    Methods: :meth:`score`, :meth:`log_partition`, :meth:`nll` (also ``forward``), :meth:`viterbi_tags`
    and :meth:`viterbi` (best paths as a tensor), :meth:`decode` (best paths as lists), :meth:`nbest`
    (k best :class:`TagPath` per sentence) and :meth:`marginals`.
    """

    transition_penalty: Tensor
    start_penalty: Tensor
    end_penalty: Tensor

    def __init__(
        self,
        num_tags: int,
        allowed: Tensor | None = None,
        allowed_start: Tensor | None = None,
        allowed_end: Tensor | None = None,
    ) -> None:
        super().__init__()
        if isinstance(num_tags, bool) or not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags: expected a positive int, got {num_tags!r}")
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))  # [from, to]
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()
        self.register_buffer("transition_penalty", _penalty(allowed, (num_tags, num_tags), "allowed"))
        self.register_buffer("start_penalty", _penalty(allowed_start, (num_tags,), "allowed_start"))
        self.register_buffer("end_penalty", _penalty(allowed_end, (num_tags,), "allowed_end"))

    def reset_parameters(self) -> None:
        for p in (self.transitions, self.start_transitions, self.end_transitions):
            nn.init.uniform_(p, -0.1, 0.1)

    def extra_repr(self) -> str:
        constrained = bool(self.transition_penalty.any() or self.start_penalty.any() or self.end_penalty.any())
        return f"num_tags={self.num_tags}, constrained={constrained}"

    # ------------------------------------------------------------------ validation / helpers

    def _check(self, emissions: Tensor, mask: Tensor | None, tags: Tensor | None = None) -> Tensor:
        """Validate inputs; return the mask (all True when None was given)."""
        if not isinstance(emissions, Tensor):
            raise ValueError(f"emissions: expected a Tensor, got {type(emissions).__name__}")
        if emissions.dim() != 3:
            raise ValueError(
                f"emissions: expected 3 dims (batch, seq_len, num_tags), got shape {tuple(emissions.shape)}"
            )
        if not emissions.is_floating_point():
            raise ValueError(f"emissions: expected a floating dtype, got {emissions.dtype}")
        batch, seq_len, num_tags = emissions.shape
        if num_tags != self.num_tags:
            raise ValueError(
                f"emissions: expected last dim num_tags={self.num_tags}, got shape {tuple(emissions.shape)}"
            )
        if seq_len < 1:
            raise ValueError(f"emissions: expected seq_len >= 1, got shape {tuple(emissions.shape)}")
        if mask is None:
            mask = torch.ones(batch, seq_len, dtype=torch.bool, device=emissions.device)
        else:
            _check_like_emissions("mask", mask, torch.bool, (batch, seq_len))
            if not bool(mask[:, 0].all()):
                bad = (~mask[:, 0]).nonzero().flatten().tolist()
                raise ValueError(
                    f"mask: expected first column all True (every sentence has >= 1 token), got False in rows {bad}"
                )
            if seq_len > 1 and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
                raise ValueError("mask: expected left-aligned masks (no True after a False), got a gap")
        if tags is not None:
            _check_like_emissions("tags", tags, torch.long, (batch, seq_len))
            real = tags[mask]
            if real.numel() and bool(((real < 0) | (real >= self.num_tags)).any()):
                raise ValueError(
                    f"tags: expected values in [0, {self.num_tags}) on real tokens, "
                    f"got min {int(real.min())} max {int(real.max())}"
                )
        return mask

    def potentials(self, temperature: float = 1.0) -> tuple[Tensor, Tensor, Tensor]:
        """Transition / start / end scores with the constraint penalties added (once per call), divided
        by ``temperature``."""
        scores = (
            self.transitions + self.transition_penalty,
            self.start_transitions + self.start_penalty,
            self.end_transitions + self.end_penalty,
        )
        return scores if temperature == 1.0 else tuple(x / temperature for x in scores)

    def _numpy_potentials(self) -> tuple:
        """:meth:`potentials` as NumPy arrays (transitions, start, end) for the CPU Viterbi, made again when a
        score or a penalty changes (their version counters: an optimiser step, ``load_state_dict``), else kept: the
        three additions and conversions took about 15 us of a sentence's 165 us Viterbi at batch 1."""
        tensors = (
            self.transitions,
            self.start_transitions,
            self.end_transitions,
            self.transition_penalty,
            self.start_penalty,
            self.end_penalty,
        )
        key = weights_key(tensors)
        kept = self.__dict__.get("_numpy_kept")
        if kept is None or kept[0] != key:
            with torch.no_grad():
                kept = (key, tuple(p.detach().cpu().numpy() for p in self.potentials()))
            self.__dict__["_numpy_kept"] = kept
        return kept[1]

    @staticmethod
    def _trim(emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Cut the time axis to the longest sentence; also return lengths (batch,)."""
        lengths = mask.sum(1)  # (batch,)
        max_len = int(lengths.max()) if lengths.numel() else 1
        return emissions[:, :max_len], mask[:, :max_len], lengths

    # ------------------------------------------------------------------ training

    def score(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Unnormalised score of the given tag sequences, (batch,)."""
        mask = self._check(emissions, mask, tags)
        return self._score(emissions, tags, mask)

    def _score(self, emissions: Tensor, tags: Tensor, mask: Tensor, temperature: float = 1.0) -> Tensor:
        """The score of ``tags`` under ``emissions`` (already divided by ``temperature``) and the potentials."""
        trans, start, end = self.potentials(temperature)
        tags = tags.masked_fill(~mask, 0)  # padding tags may be anything (e.g. -100)
        emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (batch, seq_len)
        total = start[tags[:, 0]] + emit.masked_fill(~mask, 0.0).sum(1)  # (batch,)
        if tags.shape[1] > 1:
            moves = trans[tags[:, :-1], tags[:, 1:]]  # (batch, seq_len - 1)
            total = total + moves.masked_fill(~mask[:, 1:], 0.0).sum(1)
        last = tags.gather(1, (mask.sum(1) - 1).unsqueeze(1)).squeeze(1)  # (batch,)
        return total + end[last]

    def log_partition(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """log Z (forward algorithm), (batch,)."""
        mask = self._check(emissions, mask)
        return self._log_partition(emissions, mask)

    def _log_partition(self, emissions: Tensor, mask: Tensor, temperature: float = 1.0) -> Tensor:
        """log Z (batch,): the forward recursion unrecorded, its gradient in closed form (marginals)."""
        emissions, mask, _ = self._trim(emissions, mask)
        return LogPartition.apply(emissions, *self.potentials(temperature), mask)

    def nll(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None, temperature: float = 1.0) -> Tensor:
        """Per-sentence negative log-likelihood, log Z - score, (batch,). Take ``.mean()`` or
        ``.sum()`` yourself. With ``temperature`` T, of the distribution whose every score is divided by T
        (as :meth:`marginals` with T)."""
        mask = self._check(emissions, mask, tags)
        emissions = _cooled(emissions, temperature)
        return self._log_partition(emissions, mask, temperature) - self._score(emissions, tags, mask, temperature)

    def forward(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Same as :meth:`nll`."""
        return self.nll(emissions, tags, mask)

    # ------------------------------------------------------------------ inference

    def _forward_backward(
        self, emissions: Tensor, mask: Tensor, temperature: float = 1.0
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """On trimmed inputs: log alphas and log betas (batch, max_len, num_tags), log Z (batch,) and the
        trimmed mask, for ``emissions`` already divided by ``temperature`` (the potentials are divided here).
        alpha_t[j] scores every prefix ending in j at t (emission at t included); beta_t[j]
        every suffix after t given j at t (emission at t excluded). Without gradients on CPU, in NumPy
        (:mod:`seqlab.crf.posteriors`), returned as float64."""
        emissions, mask, _ = self._trim(emissions, mask)
        trans, start, end = self.potentials(temperature)
        if emissions.device.type == "cpu" and not (torch.is_grad_enabled() and emissions.requires_grad):
            fb = forward_backward(*(x.detach().numpy() for x in (emissions, mask, trans, start, end)))
            return torch.from_numpy(fb.alphas), torch.from_numpy(fb.betas), torch.from_numpy(fb.log_z), mask
        alphas = alpha_recursion(emissions, trans, start, mask)
        log_z = torch.logsumexp(alphas[:, -1] + end, dim=1)  # (batch,)
        return alphas, beta_recursion(emissions, trans, end, mask), log_z, mask

    def marginals(self, emissions: Tensor, mask: Tensor | None = None, temperature: float = 1.0) -> Tensor:
        """Posterior tag marginals p(y_t = j | x), (batch, seq_len, num_tags), by forward-backward.
        Rows sum to 1 on real tokens and are 0 on padding. Differentiable. ``temperature`` T divides every
        score first: T > 1 flattens the distribution, T < 1 sharpens it, and the best path stays the same."""
        mask = self._check(emissions, mask)
        seq_len = emissions.shape[1]
        alphas, betas, log_z, mask = self._forward_backward(_cooled(emissions, temperature), mask, temperature)
        log_post = alphas + betas - log_z[:, None, None]  # (batch, max_len, num_tags)
        probs = log_post.exp().masked_fill(~mask.unsqueeze(2), 0.0).to(emissions.dtype)
        if probs.shape[1] < seq_len:
            probs = nn.functional.pad(probs, (0, 0, 0, seq_len - probs.shape[1]))
        return probs

    @torch.no_grad()
    def segment_probs(
        self,
        emissions: Tensor,
        mask: Tensor,
        tags: Tensor,
        segments: list[list[tuple[int, int]]],
        temperature: float = 1.0,
    ) -> list[list[float]]:
        """p(y_a .. y_{b-1} = tags[a:b] | x) for each segment (a, b) of each sentence: the posterior
        probability that the sentence has exactly these tags there, whatever it has elsewhere
        (alpha_a + the path's scores inside + beta_{b-1} - log Z)."""
        mask = self._check(emissions, mask)
        emissions = _cooled(emissions, temperature)
        alphas, betas, log_z, _ = self._forward_backward(emissions, mask, temperature)
        return self._segment_probs(emissions, alphas, betas, log_z, tags, segments, temperature)

    @torch.no_grad()
    def path_confidence(
        self,
        emissions: Tensor,
        mask: Tensor,
        tags: Tensor,
        segments: list[list[tuple[int, int]]],
        temperature: float = 1.0,
    ) -> tuple[list[list[float]], list[list[float]]]:
        """Per sentence, the marginal p(y_t = tags[t] | x) of each real token (as :meth:`marginals`
        gathered at ``tags``) and the probability of each segment (as :meth:`segment_probs`), from one
        forward-backward pass."""
        mask = self._check(emissions, mask)
        emissions = _cooled(emissions, temperature)
        alphas, betas, log_z, trimmed = self._forward_backward(emissions, mask, temperature)
        path = tags[:, : alphas.shape[1]]  # (batch, max_len)
        log_post = (alphas + betas - log_z[:, None, None]).gather(2, path.unsqueeze(2)).squeeze(2)  # (batch, max_len)
        tokens = [row[:n] for row, n in zip(log_post.exp().tolist(), trimmed.sum(1).tolist())]
        return tokens, self._segment_probs(emissions, alphas, betas, log_z, tags, segments, temperature)

    def _segment_probs(
        self,
        emissions: Tensor,
        alphas: Tensor,
        betas: Tensor,
        log_z: Tensor,
        tags: Tensor,
        segments: list[list[tuple[int, int]]],
        temperature: float = 1.0,
    ) -> list[list[float]]:
        """All segments of the batch at once: alpha_a + the path's emissions at a+1 .. b-1 and moves into
        them + beta_{b-1} - log Z, each segment's sums over its own positions (masked gathers)."""
        flat = [(row, a, b) for row, spans in enumerate(segments) for a, b in spans]
        if not flat:
            return [[] for _ in segments]
        n = alphas.shape[1]
        path = tags[:, :n]  # (batch, n)
        trans = self.potentials(temperature)[0]
        emit = emissions[:, :n].gather(2, path.unsqueeze(2)).squeeze(2)  # (batch, n)
        moves = trans[path[:, :-1], path[:, 1:]]  # (batch, n - 1): trans into position t + 1
        rows, starts, ends = torch.tensor(flat, device=emissions.device).T  # (segments,) each
        offsets = torch.arange(max(b - a for _, a, b in flat), device=emissions.device)  # (width,)
        inner = starts[:, None] + 1 + offsets  # (segments, width): positions a + 1, a + 2, ...
        keep = inner < ends[:, None]
        inside = emit[rows[:, None], inner.clamp(max=n - 1)].masked_fill(~keep, 0.0).sum(1)  # (segments,)
        if n > 1:
            into = (inner - 1).clamp(max=n - 2)  # the move into position p is moves[p - 1]
            inside = inside + moves[rows[:, None], into].masked_fill(~keep, 0.0).sum(1)
        log_p = (
            alphas[rows, starts, path[rows, starts]]
            + inside
            + betas[rows, ends - 1, path[rows, ends - 1]]
            - log_z[rows]
        )  # (segments,)
        probs = iter(log_p.exp().clamp(max=1.0).tolist())
        return [[next(probs) for _ in spans] for spans in segments]

    @torch.no_grad()
    def viterbi_tags(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Best tag path per sentence, LongTensor (batch, seq_len), 0 on padding."""
        mask = self._check(emissions, mask)
        return self._viterbi(emissions, mask)[0]

    @torch.no_grad()
    def viterbi(self, emissions: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Best tag path per sentence (batch, seq_len), 0 on padding, and its score (batch,)."""
        mask = self._check(emissions, mask)
        return self._viterbi(emissions, mask)

    @torch.no_grad()
    def best_paths(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`viterbi` without its input checks, for callers whose mask is already known to be well
        formed (a :class:`seqlab.data.batching.Batch`'s): emissions (batch, seq_len, num_tags),
        mask (batch, seq_len) bool, left-aligned, first column True."""
        return self._viterbi(emissions, mask)

    def _viterbi(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Best paths (batch, seq_len), 0 on padding, and their scores (batch,), on ``emissions``' device: in NumPy
        on CPU (a several times cheaper loop, the same paths: see :mod:`seqlab.crf.viterbi`) and, by way of the host,
        for batches of up to :data:`GPU_HOST_VITERBI_ROWS` sentences on a CUDA GPU (where each of the PyTorch
        loop's few operations per time step is a kernel launch); else in PyTorch."""
        device = emissions.device.type
        host = device == "cpu" or (device == "cuda" and emissions.shape[0] <= GPU_HOST_VITERBI_ROWS)
        if not host or emissions.requires_grad:
            return self._viterbi_torch(emissions, mask)
        trans, start, end = self._numpy_potentials()
        tags, scores = viterbi(emissions.detach().cpu().numpy(), mask.sum(1).cpu().numpy(), trans, start, end)
        return torch.from_numpy(tags).to(emissions.device), torch.from_numpy(scores).to(emissions.device)

    def _viterbi_torch(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Max-product forward pass keeping only the best scores per step (``amax`` is several times
        cheaper than ``max`` with indices); the backward pass recomputes, for the one chosen tag per
        sentence, which predecessor gave its score: the same sums, so the same argmax."""
        _batch, seq_len, _num_tags = emissions.shape
        emissions, mask, _ = self._trim(emissions, mask)
        trans, start, end = self.potentials()
        mask_t = mask.unsqueeze(2)  # (batch, max_len, 1)
        score = start + emissions[:, 0]  # (batch, num_tags)
        history = [score]
        for t in range(1, emissions.shape[1]):
            best = (score.unsqueeze(2) + trans).amax(dim=1)  # (batch, num_tags): over "from"
            score = torch.where(mask_t[:, t], best + emissions[:, t], score)
            history.append(score)
        best_score, tag = (score + end).max(dim=1, keepdim=True)  # (batch, 1) each
        path = [tag]
        for t in range(len(history) - 1, 0, -1):
            into = history[t - 1] + trans[:, tag.squeeze(1)].T  # (batch, from): scores into the chosen tag
            prev = into.argmax(dim=1, keepdim=True)  # (batch, 1)
            tag = torch.where(mask_t[:, t], prev, tag)  # padding: stay put
            path.append(tag)
        path.reverse()
        out = torch.cat(path, dim=1).masked_fill(~mask, 0)  # (batch, max_len)
        if out.shape[1] < seq_len:
            out = nn.functional.pad(out, (0, seq_len - out.shape[1]))
        return out, best_score.squeeze(1)

    @torch.no_grad()
    def decode(self, emissions: Tensor, mask: Tensor | None = None) -> list[list[int]]:
        """Viterbi decoding: the best tag list per sentence, cut to its length."""
        mask = self._check(emissions, mask)
        paths = self._viterbi(emissions, mask)[0].tolist()
        return [p[:n] for p, n in zip(paths, mask.sum(1).tolist())]

    @torch.no_grad()
    def nbest(self, emissions: Tensor, mask: Tensor | None, k: int) -> list[list[TagPath]]:
        """Per sentence, up to ``k`` distinct paths with their scores, best first (fewer when fewer
        distinct allowed paths exist)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"nbest: expected a positive int, got {k!r}")
        mask = self._check(emissions, mask)
        neg_inf = float("-inf")
        # disallowed moves are excluded outright here (no gradients needed)
        trans = self.transitions.masked_fill(self.transition_penalty < 0, neg_inf)
        start = self.start_transitions.masked_fill(self.start_penalty < 0, neg_inf)
        end = self.end_transitions.masked_fill(self.end_penalty < 0, neg_inf)
        return kbest_paths(emissions, mask, k, trans, start, end)


def kbest_paths(
    emissions: Tensor, mask: Tensor, k: int, trans: Tensor, start: Tensor, end: Tensor
) -> list[list[TagPath]]:
    """k-best Viterbi: keep the top-k partial paths ending in each tag at each step.

    ``emissions`` (batch, seq_len, num_tags), ``mask`` (batch, seq_len) left-aligned with mask[:, 0]
    True, ``trans`` (from, to), ``start`` / ``end`` (num_tags,); -inf marks a forbidden move. Exact:
    zero transitions give the k best label sequences of independent per-token scores."""
    batch, _, num_tags = emissions.shape
    lengths = mask.sum(1)
    max_len = int(lengths.max())
    emissions, mask = emissions[:, :max_len], mask[:, :max_len]
    neg_inf = float("-inf")
    trans = trans.t().reshape(1, num_tags, num_tags, 1)  # (1, to, from, 1)
    mask_t = mask[:, :, None, None]  # (batch, max_len, 1, 1)
    # flat index (from * k + rank) of "the same partial path", used on padded steps
    identity = torch.arange(num_tags * k, device=emissions.device).view(1, num_tags, k).expand(batch, -1, -1)
    score = emissions.new_full((batch, num_tags, k), neg_inf)  # (batch, tag, rank)
    score[:, :, 0] = start + emissions[:, 0]
    backpointers = []
    for t in range(1, max_len):
        cand = score.unsqueeze(1) + trans  # (batch, to, from, rank)
        best, idx = cand.flatten(2).topk(k, dim=2)  # (batch, to, k): over (from, rank) pairs
        score = torch.where(mask_t[:, t], best + emissions[:, t, :, None], score)
        backpointers.append(torch.where(mask_t[:, t], idx, identity))
    final, idx = (score + end[:, None]).flatten(1).topk(k, dim=1)  # (batch, k)
    path = [idx // k]  # tags (batch, k)
    if backpointers:
        history = torch.stack(backpointers).flatten(2)  # (max_len - 1, batch, num_tags * k)
        for t in range(history.shape[0] - 1, -1, -1):
            idx = history[t].gather(1, idx)  # (batch, k): flat (prev tag, prev rank)
            path.append(idx // k)
    path.reverse()
    paths = torch.stack(path, dim=2).tolist()  # (batch, k, max_len)
    scores = final.tolist()
    out = []
    for b, n in enumerate(lengths.tolist()):
        out.append([TagPath(p[:n], s) for p, s in zip(paths[b], scores[b]) if s != neg_inf])
    return out


def _check_like_emissions(name: str, value: object, dtype: torch.dtype, shape: tuple[int, int]) -> None:
    """``value`` a Tensor of ``dtype`` and shape (batch, seq_len), the emissions' first two dims."""
    kind = "bool" if dtype == torch.bool else "long"
    if not isinstance(value, Tensor):
        raise ValueError(f"{name}: expected a {kind} Tensor, got {type(value).__name__}")
    if value.dtype != dtype:
        raise ValueError(f"{name}: expected dtype torch.{kind}, got {value.dtype}")
    if value.shape != shape:
        raise ValueError(f"{name}: expected shape {shape} (emissions' first two dims), got {tuple(value.shape)}")
