"""Memos of a frozen network's states by input row, for features whose outputs are a fixed function of their
ids (a frozen transformer's windows, a frozen LAC tagger's sentences): in training each row runs once per run, not
once per epoch, and the trainer's dev scoring keeps a memo of its own
(:meth:`seqlab.features.base.FeatureModule.remember_for_scoring`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from seqlab.features.base import FeatureModule


class WindowMemo:
    """States by row: a row's ids (int64 bytes) -> (length, dim), up to ``cap_bytes`` of states; rows beyond it
    are computed again each time."""

    def __init__(self, cap_bytes: int):
        self.cap_bytes, self.used_bytes = cap_bytes, 0
        self.states: dict[bytes, Tensor] = {}
        # batches tagged side by side (seqlab.runtime.devices.run_concurrently) add at once
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.states)

    def __getstate__(self) -> dict:  # copy.deepcopy and pickle: a lock is neither
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def add(self, key: bytes, states: Tensor) -> None:
        size = states.numel() * states.element_size()
        with self._lock:
            if key not in self.states and self.used_bytes + size <= self.cap_bytes:
                self.states[key] = states
                self.used_bytes += size


def memoized(
    ids: Tensor,
    lengths: list[int],
    memo: WindowMemo,
    run: Callable[[Tensor, int], Tensor],
    keep: list[int] | None = None,
    starts: list[int] | None = None,
) -> Tensor:
    """The states of each row of ``ids`` (rows, width), (rows, width, dim): from ``memo`` where it has them, else
    ``run(pick, longest)`` on the missing rows ``pick`` (missing,) cut to the longest of them, which must return
    (missing, longest, dim); those are added while the memo has room. A row is known by its first ``lengths`` ids
    and by ``starts`` (where the states it keeps begin in it: one text read for several sentences), and keeps its
    first ``keep`` states (default: ``lengths``); positions past those are zero."""
    keep = lengths if keep is None else keep
    rows = ids.cpu().numpy()
    keys = [rows[w, :n].tobytes() for w, n in enumerate(lengths)]
    if starts is not None:
        keys = [k + b"@%d" % at for k, at in zip(keys, starts)]
    found = [memo.states.get(k) for k in keys]
    missing = [w for w, hit in enumerate(found) if hit is None]
    if missing:
        pick = torch.tensor(missing, device=ids.device)
        fresh = run(pick, max(lengths[w] for w in missing))  # (missing, longest, dim)
        for j, w in enumerate(missing):
            found[w] = states = fresh[j, : keep[w]].clone()  # (kept, dim), not a view of the batch
            memo.add(keys[w], states)
    out = pad_sequence(found, batch_first=True)  # (rows, longest, dim)
    return nn.functional.pad(out, (0, 0, 0, ids.shape[1] - out.shape[1]))  # (rows, width, dim)


class MemoizedModule(FeatureModule):
    """A feature module whose states are a fixed function of each row of its ids: in training they come from a memo
    of up to ``cache_mb`` MiB, and while the trainer's dev scoring is on, from one of its own, as large (kept apart:
    made in inference mode, for inference mode); otherwise they are always computed."""

    def __init__(self, cache_mb: int):
        super().__init__()
        self.cache_bytes = cache_mb * 2**20
        self.memo = WindowMemo(self.cache_bytes)  # training passes
        self.scoring_memo: WindowMemo | None = None  # the trainer's dev scoring, while it is on

    def remember_for_scoring(self, on: bool) -> bool:
        self.scoring_memo = WindowMemo(self.cache_bytes) if on and self.cache_bytes else None
        return self.scoring_memo is not None

    def active_memo(self) -> WindowMemo | None:
        """The memo this pass reads and fills, or None to compute every row."""
        return self.memo if self.training and self.cache_bytes else self.scoring_memo
