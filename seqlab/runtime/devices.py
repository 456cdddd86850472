"""Where the network runs: ``auto`` (CUDA when PyTorch sees a GPU), ``cpu`` or ``cuda``; and on how many CPU threads."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

from seqlab.errors import SeqlabError
from seqlab.runtime.blas import one_blas_thread


def resolve_device(name: str | torch.device) -> torch.device:
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise SeqlabError(f"device: expected auto, cpu or cuda, got '{name}'")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SeqlabError(f"device '{name}' was asked for, but this PyTorch sees no CUDA GPU")
    return torch.device(name)


#: Inference batches of at most this many sentences run on one CPU thread. For them every operation is too
#: small to share out: the BiLSTM-CRF chunker's bidirectional LSTM over one 24-token sentence took 0.70-0.74 ms
#: on one thread and 0.81-1.33 ms on two (2-core machine); from 16 sentences on, two threads are faster.
SMALL_BATCH = 2


@contextmanager
def threads_for(rows: int, device: torch.device):
    """One intra-op thread for a small CPU batch (``rows`` <= :data:`SMALL_BATCH`), the process's
    setting otherwise; restored on exit. Switching costs under a microsecond."""
    threads = torch.get_num_threads()
    if device.type != "cpu" or rows > SMALL_BATCH or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextmanager
def deterministic_algorithms(on: bool):
    """With ``on``, PyTorch's deterministic algorithms for the block (``torch.use_deterministic_algorithms``,
    cuDNN's deterministic kernels, cuBLAS's fixed workspace unless the environment names one), restored after
    it. On a GPU, embedding and index_add backwards otherwise add with atomics, in an order that varies from run
    to run, so two runs of one seed (or a run and its resumption) part after a few steps."""
    if not on:
        yield
        return
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if workspace is None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # what cuBLAS needs to be deterministic
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
        if workspace is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def one_thread_here() -> None:
    """Compute on one thread in the calling thread, for every library that keeps its own setting per thread.

    ``torch.set_num_threads`` sets the process's count, but OpenMP's and MKL's are per thread (MKL's through
    ``mkl_set_num_threads_local``), and a thread that never called it keeps their defaults, all cores, until
    PyTorch's first parallel loop there copies the process's count in. If its first operation is an MKL matrix
    product, that product starts a team of OpenMP threads of its own, which stays; with more OpenMP threads
    than cores, GNU OpenMP then sleeps instead of spinning between parallel regions, in every team, and each
    small two-thread operation of the main thread waits for a worker to wake (a one-layer BiLSTM's forward
    and backward at batch 10 took 2-2.9x as long on the 2-core machine; BENCHMARKS.md, seventeenth
    session). seqlab's own batches happen to reach a parallel loop first; this makes it so for any work."""
    torch.set_num_threads(1)


_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (process id, workers, pool): made on first use
_pool_lock = threading.Lock()  # one concurrent section at a time: each sets the process's thread count


def _workers(n: int) -> ThreadPoolExecutor:
    """A pool of ``n`` threads, made again after a fork (a forked child inherits no running threads)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid() or _pool[1] != n:
        _pool = (os.getpid(), n, ThreadPoolExecutor(n, thread_name_prefix="seqlab-batch"))
    return _pool[2]


def run_concurrently(fn: Callable[[object], None], items: Iterable, device: torch.device) -> None:
    """``fn(item)`` for every item, for its side effects; on CPU with ``k`` >= 2 PyTorch threads, ``k`` items
    at a time on ``k`` threads of one intra-op thread each, elsewhere one after another in this thread.

    Large inference batches gain from this on CPU: one batch's small operations (a time step of the LSTM, the
    Viterbi's, the Python between them) use two threads poorly, while two batches side by side keep both cores
    busy, and one batch's Python overlaps the other's kernels, which release the interpreter's lock. Each
    batch computes on one thread wherever it runs, so the results do not depend on which thread takes it.
    ``fn`` must write only what its own item owns. The first exception is raised here, after the items
    already started have finished; the thread count is restored on every way out."""
    items = list(items)
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads < 2 or len(items) < 2 or not _pool_lock.acquire(blocking=False):
        for item in items:  # on a GPU, on one thread, or while another thread runs a concurrent section
            fn(item)
        return
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    def one(item) -> None:  # the caller's autograd modes are thread-local: each thread takes them on
        one_thread_here()
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            fn(item)

    futures = []
    try:
        # NumPy's BLAS held at one thread around the whole section: nested limits (the confidences') then
        # save and restore one, where interleaved ones from two threads could leave it at one for good
        with one_blas_thread():
            torch.set_num_threads(1)  # the process's setting: every thread of the pool computes on one
            pool = _workers(min(threads, len(items)))
            futures = [pool.submit(one, item) for item in items]
            for f in futures:
                f.exception()  # wait for all: none may still run once the thread count is restored
    except BaseException:  # an interrupt while waiting: what has not started never will
        for f in futures:
            f.cancel()
        for f in futures:
            if not f.cancelled():
                f.exception()
        raise
    finally:
        torch.set_num_threads(threads)
        _pool_lock.release()
    for f in futures:
        f.result()  # the first error, in the items' order
