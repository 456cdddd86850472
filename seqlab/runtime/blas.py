"""NumPy's BLAS on one thread around seqlab's small matrix products.

The CRF's recursions in NumPy (:mod:`seqlab.crf.partition`, :mod:`seqlab.crf.posteriors`) multiply matrices of
tens of rows by tens of columns once per time step. NumPy's OpenBLAS starts a thread per core for them, and
its idle threads spin after each call on the cores that PyTorch's own threads are using: with the default
pool, a batch-10 training step of the chunker took about 1.5 times as long as with one BLAS thread (37 against
24 ms, 2 cores). :func:`one_blas_thread` limits the pool to one thread for the duration of a
block (threadpoolctl, about 14 microseconds to enter and leave) and leaves it as it was afterwards, so code
outside seqlab keeps its BLAS threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_controller = None  # threadpoolctl.ThreadpoolController, made once (it inspects the loaded libraries)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a declared dependency; without it, run as before
            _controller = False
        else:
            _controller = ThreadpoolController()
    if not _controller:  # pragma: no cover
        yield
        return
    with _controller.limit(limits=1, user_api="blas"):
        yield
