"""Heartbeats of ``seqlab serve --workers N``: how the parent tells a hung worker from a busy one.

Each worker's event loop adds one to a counter in shared memory every ``interval_s`` seconds, from the moment
its app reports start-up complete (:class:`Heartbeat`, a wrapper around the worker's ASGI app). A loop that is
blocked, or a process that is stopped, stops counting. The network runs in the micro-batcher's thread, off the
loop, so a long prediction does not. The parent (:class:`Pulse`) notes when it last saw the counter move and
judges a worker hung once it has stood still for the timeout. A counter still at 0 means that the worker is
still starting (loading its model): it is not judged before its first beat.

The counter is written without a lock: one writer, a 64-bit word, and a parent that only compares values.
A lock would be worse: a worker killed while holding it would leave the parent blocked on it for good.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

#: Beats per timeout, at least: a late beat or two does not make a worker look hung.
BEATS_PER_TIMEOUT = 4


class Counter(Protocol):
    """A number in shared memory (``multiprocessing`` ``RawValue("Q")``)."""

    value: int


def interval_for(timeout_s: float) -> float:
    """Seconds between beats for a parent that waits ``timeout_s``: a quarter of it, at most one second
    (a timeout of 0, no judging, still gets one beat a second)."""
    return min(1.0, timeout_s / BEATS_PER_TIMEOUT) if timeout_s > 0 else 1.0


class Heartbeat:
    """ASGI wrapper: ``app`` unchanged, plus a task on the server's event loop that adds one to ``counter``
    every ``interval_s`` seconds from the app's start-up to its shutdown (the lifespan protocol)."""

    def __init__(self, app: Any, counter: Counter, interval_s: float):
        self.app, self.counter, self.interval_s = app, counter, interval_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)
        beating: asyncio.Task | None = None

        async def send_and_watch(message: dict) -> None:
            nonlocal beating
            if message["type"] == "lifespan.startup.complete" and beating is None:
                beating = asyncio.get_running_loop().create_task(self._beat())
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            if beating is not None:
                beating.cancel()

    async def _beat(self) -> None:
        while True:
            self.counter.value += 1
            await asyncio.sleep(self.interval_s)


class Pulse:
    """The parent's view of one worker's counter."""

    def __init__(self, counter: Counter):
        self.counter = counter
        self._seen = 0
        self._moved_at: float | None = None  # when the parent last saw the counter change

    def silent_s(self, now: float) -> float:
        """Seconds (of the parent's clock, ``now``) since the counter last moved; 0 before its first beat."""
        count = self.counter.value
        if count != self._seen:
            self._seen, self._moved_at = count, now
        return 0.0 if self._moved_at is None else now - self._moved_at

    @property
    def beating(self) -> bool:
        """Whether the parent has seen a first beat (as of the last :meth:`silent_s`): the worker has started."""
        return self._moved_at is not None
