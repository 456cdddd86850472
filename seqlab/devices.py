"""Where the network runs: ``auto`` (CUDA when PyTorch sees a GPU), ``cpu`` or ``cuda``."""

from __future__ import annotations

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
