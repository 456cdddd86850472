"""Where the network runs and on how many threads: batches side by side on CPU (``run_concurrently``)."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from seqlab.runtime import devices
from seqlab.runtime.devices import run_concurrently
from tests.conftest import torch_threads

CPU = torch.device("cpu")


@pytest.fixture
def two_threads():
    with torch_threads(2):
        yield


def test_items_run_on_pool_threads_of_one_intra_op_thread_each_in_the_callers_mode(two_threads):
    seen = {}

    def record(item):
        seen[item] = (threading.current_thread().name, torch.get_num_threads(), torch.is_inference_mode_enabled())

    with torch.inference_mode():
        run_concurrently(record, range(6), CPU)
    assert sorted(seen) == list(range(6))
    assert all(
        name.startswith("seqlab-batch") and threads == 1 and inference for name, threads, inference in seen.values()
    )
    assert torch.get_num_threads() == 2  # restored
    run_concurrently(record, [7, 8], CPU)
    assert not seen[7][2] and not seen[8][2]  # outside inference mode, the threads are too


def test_one_thread_one_item_or_a_gpu_run_in_the_callers_thread(two_threads):
    where = []
    run_concurrently(lambda _: where.append(threading.current_thread()), [1], CPU)
    run_concurrently(lambda _: where.append(threading.current_thread()), [1, 2], torch.device("cuda"))
    torch.set_num_threads(1)
    run_concurrently(lambda _: where.append(threading.current_thread()), [1, 2], CPU)
    assert where == [threading.current_thread()] * 5


def test_the_first_error_in_item_order_is_raised_after_every_started_item_finished(two_threads):
    done = []

    def work(item):
        if item in (3, 1):
            raise ValueError(f"item {item}")
        done.append(item)

    with pytest.raises(ValueError, match="item 1"):
        run_concurrently(work, range(8), CPU)
    assert sorted(done) == [0, 2, 4, 5, 6, 7]  # the others all ran: no half-written results left running
    assert torch.get_num_threads() == 2


def test_a_second_caller_meanwhile_runs_its_items_in_its_own_thread(two_threads):
    inner_threads = []
    release = threading.Event()

    def outer(item):
        if item == 0:  # while this section runs, another thread asks for one
            t = threading.Thread(
                target=lambda: run_concurrently(
                    lambda _: inner_threads.append(threading.current_thread().name), [1, 2], CPU
                ),
                name="second",
            )
            t.start()
            t.join()
            release.set()
        release.wait(5)

    run_concurrently(outer, [0, 1], CPU)
    assert inner_threads == ["second", "second"]


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or not torch.backends.mkl.is_available(),
    reason="counts the process's threads in /proc (Linux) after MKL's matrix products",
)
def test_items_start_no_openmp_threads_of_their_own(two_threads, monkeypatch):
    """A pool thread's first MKL product must not start a team of OpenMP threads for that thread: extra teams
    put more OpenMP threads than cores, and GNU OpenMP then sleeps between parallel regions in every team."""
    monkeypatch.setattr(devices, "_pool", None)  # fresh pool threads, whose settings no torch call has made yet
    a = torch.randn(300, 300)

    def product(_):
        a @ a  # MKL's sgemm, which reads the calling thread's own thread count

    both = threading.Barrier(2, timeout=10)
    run_concurrently(lambda _: both.wait(), range(2), CPU)  # the pool's two threads made
    a @ a  # the main thread's team made
    before = _os_threads()
    run_concurrently(product, range(4), CPU)
    a @ a
    assert _os_threads() == before


def test_deterministic_algorithms_for_the_block_and_restored_after_it(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with devices.deterministic_algorithms(False):
        assert not torch.are_deterministic_algorithms_enabled()
    with pytest.raises(KeyError), devices.deterministic_algorithms(True):
        assert torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.deterministic
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        raise KeyError("the block fails")
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # the user's own setting is kept
    with devices.deterministic_algorithms(True):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
