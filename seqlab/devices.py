"""Where the network runs: ``auto`` (CUDA when PyTorch sees a GPU), ``cpu`` or ``cuda``; and on how many CPU threads."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from seqlab.errors import SeqlabError


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
