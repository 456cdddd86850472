"""Micro-batching for the HTTP service: concurrent requests merged into one network call.

Requests arrive one by one on the event loop; tagging them one by one would run the network at batch 1
(a few hundred sentences/s) while it can do several thousand at batch 64. :class:`MicroBatcher` collects the
sentences of requests that arrive within ``max_wait`` seconds of the first one (up to ``max_batch``
sentences; a larger request goes alone), runs them as one call in a worker thread, off the event loop, and
hands each request its own predictions. Requests with different options (n-best, explain, confidence) are
run as separate calls. Predictions do not depend on batch composition (tested), so merging is invisible to
clients. If a merged call fails on one request's input, each request of the group is run on its own so that
the error reaches only the request that caused it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Pending:
    sentences: list
    options: Hashable
    future: asyncio.Future = field(repr=False)


class MicroBatcher:
    """``await submit(sentences, options)`` -> ``run(sentences, options)``'s results for these sentences."""

    def __init__(self, run: Callable[[list, Any], list], max_batch: int = 64, max_wait: float = 0.005):
        self.run, self.max_batch, self.max_wait = run, max_batch, max_wait
        self.calls = 0  # network calls made (for tests and /info)
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-net")

    async def submit(self, sentences: list, options: Hashable) -> list:
        if self._queue is None:  # made lazily: it belongs to the running event loop
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._serve())
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(sentences, options, future))
        return await future

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            group = [await self._queue.get()]
            size = len(group[0].sentences)
            deadline = loop.time() + self.max_wait
            while size < self.max_batch:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
                group.append(item)
                size += len(item.sentences)
            by_options: dict[Hashable, list[_Pending]] = {}
            for item in group:
                by_options.setdefault(item.options, []).append(item)
            for options, items in by_options.items():
                await self._run_group(loop, options, items)

    async def _run_group(self, loop, options: Hashable, items: list[_Pending]) -> None:
        merged = [s for item in items for s in item.sentences]
        try:
            self.calls += 1
            results = await loop.run_in_executor(self._executor, self.run, merged, options)
        except Exception as err:
            if len(items) == 1:
                if not items[0].future.done():
                    items[0].future.set_exception(err)
                return
            for item in items:  # isolate the request at fault
                await self._run_group(loop, options, [item])
            return
        start = 0
        for item in items:
            if not item.future.done():
                item.future.set_result(results[start : start + len(item.sentences)])
            start += len(item.sentences)
