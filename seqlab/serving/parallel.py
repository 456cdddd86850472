"""Bulk tagging in several processes: ``seqlab predict MODEL FILE --workers N``.

The input is read lazily in this process and cut into chunks (``--chunk`` sentences); each chunk goes to one of
``N`` worker processes, which load the model once (in their initializer) and return the chunk's output text.
The texts are written in input order, and at most ``2 * N`` chunks are in flight at any time, so memory stays
bounded whatever the input size. Every chunk is rendered by :func:`render_chunk`, the function that one process
uses too, so the output is the same bytes for any number of workers.

An error in the input (a bad line) is raised here, by the reader, as with one process: the chunks before it are
written first, then the one-line ``error: FILE:LINE: ...``. An error inside a worker (a model it cannot load)
comes back as the :class:`~seqlab.errors.SeqlabError` it raised, never as a worker's traceback.

Workers are started with ``spawn`` (a forked child of a process that has run PyTorch may hang in its thread
pool) and split the parent's PyTorch threads between them (``torch.set_num_threads``).
"""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from seqlab.data.readers import write_conll
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.runtime.heap import freeze_loaded

log = logging.getLogger("seqlab")


@dataclass(frozen=True)
class PredictOptions:
    """What ``seqlab predict`` asks for every chunk (one value for the whole run)."""

    output_format: str = "conll"  # "conll": input columns + predicted tag; "jsonl": one prediction per line
    batch_size: int | None = None  # None: the model's eval_batch_size
    nbest: int | None = None  # also the k best tag sequences (forces jsonl, as --explain does)
    explain: bool = False  # attention weights and fusion gates
    max_length: int | None = None  # longer sentences are tagged in pieces
    linked: bool = False  # the chunks come linked to their neighbours (linked_chunks): tagged as they are


def render_chunk(tagger, sentences: list[Sentence], options: PredictOptions) -> str:
    """The output text of one chunk: CoNLL lines (a blank line after each sentence), or one JSON object per line
    when the output format is jsonl or n-best lists or explanations are asked for."""
    if options.output_format == "conll" and not (options.nbest or options.explain):
        out = io.StringIO()
        tags = tagger.predict_tags(
            sentences, options.batch_size, max_length=options.max_length, link=not options.linked
        )
        write_conll(sentences, tags, out)
        return out.getvalue()
    preds = tagger.predict(
        sentences,
        options.batch_size,
        nbest=options.nbest,
        explain=options.explain,
        max_length=options.max_length,
        confidence=True,
        link=not options.linked,
    )
    return "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in preds)


# ----- inside a worker process ------------------------------------------------------------------------------
_state: dict = {}  # per worker: "tagger" and "options", or "error" (raised with the first chunk)


def _init_worker(
    model: str,
    device: str,
    beam: int | None,
    engine: str,
    options: PredictOptions,
    threads: int,
    logging_setup: tuple[int, str | None, str | None],
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent handles it
    level, fmt, datefmt = logging_setup
    logging.basicConfig(level=level, format=fmt, datefmt=datefmt)  # --max-length splits are logged here
    import torch

    from seqlab.tagger import Tagger

    torch.set_num_threads(threads)
    try:
        tagger = Tagger.load(model, device, engine)
        if beam:
            tagger.set_beam(beam)
    except Exception as err:
        _state["error"] = err
        return
    _state["tagger"], _state["options"] = tagger, options
    freeze_loaded()  # this process tags until the pool ends


def _tag_chunk(sentences: list[Sentence]) -> str:
    if "error" in _state:
        raise _state["error"]
    return render_chunk(_state["tagger"], sentences, _state["options"])


# ----- in the parent ----------------------------------------------------------------------------------------
def _logging_setup() -> tuple[int, str | None, str | None]:
    """The parent's log level and format, for the workers' own logging."""
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers and root.handlers[0].formatter else None
    level = logging.getLogger("seqlab").getEffectiveLevel()
    return level, formatter._fmt if formatter else None, formatter.datefmt if formatter else None


def _result(future: Future) -> str:
    try:
        return future.result()
    except BrokenProcessPool:
        raise SeqlabError(
            "--workers: a worker process ended unexpectedly (out of memory?); try fewer workers or a smaller --chunk"
        ) from None


def tag_in_processes(
    model: str,
    chunks: Iterable[list[Sentence]],
    options: PredictOptions,
    workers: int,
    write: Callable[[str], object],
    device: str = "cpu",
    beam: int | None = None,
    engine: str = "torch",
) -> int:
    """Tag ``chunks`` (lists of sentences) in ``workers`` processes, each loading ``model`` once, and call
    ``write(text)`` with each chunk's output (:func:`render_chunk`) in input order. Returns the number of
    sentences tagged. At most ``2 * workers`` chunks are submitted and not yet written."""
    import torch

    if workers < 1:
        raise SeqlabError(f"--workers: expected a positive integer, got {workers!r}")
    threads = max(1, torch.get_num_threads() // workers)
    executor = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(str(model), device, beam, engine, options, threads, _logging_setup()),
    )
    pending: deque[Future] = deque()  # in input order
    chunks = iter(chunks)
    tagged = 0
    try:
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except SeqlabError:  # a bad input line: write what one process would have written before it
                while pending:
                    write(_result(pending.popleft()))
                raise
            if len(pending) >= 2 * workers:
                write(_result(pending.popleft()))
            pending.append(executor.submit(_tag_chunk, chunk))
            tagged += len(chunk)
        while pending:
            write(_result(pending.popleft()))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)  # on an error, only the running chunks are waited for
    return tagged
