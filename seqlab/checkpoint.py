"""Training checkpoints: the tagger, the optimiser state and the trainer's counters.

Optimiser tensors and the torch RNG states go to safetensors, everything else to JSON; nothing is
pickled. The checkpoint folder is replaced atomically after each epoch. A run on a GPU also keeps that GPU's
generator state (``rng.cuda``): its dropout masks come from it, and without it a resumed run would draw others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from seqlab.errors import SeqlabError
from seqlab.io import atomic_write_dir


def optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split ``optimizer.state_dict()`` into a flat tensor dict and a JSON-able remainder."""
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict] = {}
    for pid, pstate in state["state"].items():
        for key, value in pstate.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{pid}.{key}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(pid), {})[key] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_files(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    """Inverse of :func:`optimizer_to_files`: a state dict for ``optimizer.load_state_dict``."""
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    for pid, extra in meta["scalars"].items():
        state.setdefault(int(pid), {}).update(extra)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(path: Path, tagger, optimizer: torch.optim.Optimizer, trainer_state: dict,
                    extra: dict[str, torch.Tensor] | None = None) -> None:
    """``extra``: more named tensors the trainer needs back (the weight average)."""
    tensors, opt_meta = optimizer_to_files(optimizer)
    tensors = {f"optimizer.{k}": v for k, v in tensors.items()}
    tensors["rng.torch"] = torch.get_rng_state()
    if tagger.device.type == "cuda":
        tensors["rng.cuda"] = torch.cuda.get_rng_state(tagger.device)
    tensors.update({f"extra.{k}": v.detach().contiguous().cpu() for k, v in (extra or {}).items()})

    def fill(tmp: Path) -> None:
        for name, data in tagger._files().items():
            (tmp / name).write_bytes(data)
        save_file(tensors, str(tmp / "trainer.safetensors"))
        meta = {"trainer": trainer_state, "optimizer": opt_meta, "optimizer_type": type(optimizer).__name__}
        (tmp / "trainer.json").write_text(json.dumps(meta, indent=1))
    atomic_write_dir(path, fill)


@dataclass
class Checkpoint:
    """What a checkpoint folder holds besides the tagger."""

    optimizer: dict  # a state dict for optimizer.load_state_dict
    trainer: dict  # epoch, best, best_epoch, bad_epochs, history, steps, optimizer_type
    rng: torch.Tensor  # the CPU generator's state
    rng_cuda: torch.Tensor | None  # the GPU's generator state, for a run on a GPU
    extra: dict[str, torch.Tensor]  # the trainer's other tensors (weight average, ranks' RNG states)

    def restore_rng(self, device: torch.device) -> None:
        """Put the generators back as they were when the checkpoint was written (the GPU's where the run trains
        on one and the checkpoint has its state)."""
        torch.set_rng_state(self.rng)
        if self.rng_cuda is not None and device.type == "cuda":
            torch.cuda.set_rng_state(self.rng_cuda, device)


def _rng_state(tensors: dict[str, torch.Tensor], key: str, path: Path) -> torch.Tensor | None:
    state = tensors.get(key)
    if state is not None and (state.dtype != torch.uint8 or state.dim() != 1):
        raise SeqlabError(f"trainer.safetensors: '{key}' is not an RNG state (a byte vector)", path=path)
    return state


def load_checkpoint(path: Path) -> Checkpoint:
    """A checkpoint folder's optimiser state, trainer state, RNG states and extra tensors. Everything read is
    checked; a defect is a one-line :class:`SeqlabError` naming the file."""
    try:
        tensors = load_file(str(path / "trainer.safetensors"))
    except FileNotFoundError:
        raise SeqlabError("checkpoint has no trainer.safetensors", path=path) from None
    except Exception as err:  # safetensors raises its own error types
        raise SeqlabError(f"trainer.safetensors: corrupt: {str(err).splitlines()[0]}", path=path) from None
    try:
        meta = json.loads((path / "trainer.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SeqlabError(f"trainer.json: unreadable or corrupt: {err}", path=path) from None
    trainer = meta.get("trainer") if isinstance(meta, dict) else None
    opt = meta.get("optimizer") if isinstance(meta, dict) else None
    ok = (isinstance(trainer, dict) and isinstance(opt, dict)
          and isinstance(trainer.get("epoch"), int) and trainer["epoch"] >= 0
          and isinstance(trainer.get("best_epoch"), int) and isinstance(trainer.get("bad_epochs"), int)
          and isinstance(trainer.get("best"), (int, float)) and isinstance(trainer.get("history"), list)
          and isinstance(opt.get("param_groups"), list) and isinstance(opt.get("scalars"), dict))
    if not ok:
        raise SeqlabError("trainer.json: expected {trainer: {epoch, best, best_epoch, bad_epochs, history}, "
                          "optimizer: {param_groups, scalars}}", path=path)
    rng = _rng_state(tensors, "rng.torch", path)
    if rng is None:
        raise SeqlabError("trainer.safetensors: no torch RNG state", path=path)

    def prefixed(prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    try:
        opt_state = optimizer_from_files(prefixed("optimizer."), opt)
    except (ValueError, AttributeError, TypeError) as err:
        raise SeqlabError(f"trainer.safetensors: bad optimiser state: {err}", path=path) from None
    trainer = {**trainer, "optimizer_type": meta.get("optimizer_type")}  # None in checkpoints before 2026-11-23
    return Checkpoint(opt_state, trainer, rng, _rng_state(tensors, "rng.cuda", path), prefixed("extra."))
