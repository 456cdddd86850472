"""seqlab.runtime.blas.one_blas_thread: one NumPy BLAS thread inside the block, the pool as it was after it."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

from seqlab.runtime.blas import one_blas_thread


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_one_thread_inside_and_restored_after():
    np.ones((4, 4)) @ np.ones((4, 4))  # NumPy's BLAS is loaded
    before = _blas_threads()
    assert before  # NumPy's wheel ships one
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        product = np.arange(6.0).reshape(2, 3) @ np.ones((3, 2))
    assert _blas_threads() == before
    assert product.tolist() == [[3.0, 3.0], [12.0, 12.0]]
