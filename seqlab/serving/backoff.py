"""Crash-loop back-off: how long the supervisor of ``seqlab serve --workers N`` waits before replacing a worker.

A worker that ran for a while (``stable_s``) and then ended is replaced at once. One that ended sooner, as a
worker does that crashes on every request or is killed while it starts, is replaced after a wait that doubles
with each such end in a row: 0.5, 1, 2, 4 ... seconds, at most ``cap_s``. A worker that then runs for
``stable_s`` resets the count, so a later end is again replaced at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    """The restart policy of one worker slot; :meth:`delay` is called each time its worker ends."""

    first_s: float = 0.5
    cap_s: float = 30.0
    stable_s: float = 30.0
    quick_ends: int = 0  # ends in a row, each less than stable_s after its worker started

    def delay(self, uptime_s: float) -> float:
        """Seconds to wait before starting the replacement of a worker that ran ``uptime_s`` seconds."""
        if uptime_s >= self.stable_s:
            self.quick_ends = 0
            return 0.0
        self.quick_ends += 1
        return min(self.cap_s, self.first_s * 2.0 ** min(self.quick_ends - 1, 64))
