"""Training checkpoints: the tagger, the optimiser state and the trainer's counters.

Optimiser tensors and the torch RNG state go to safetensors, everything else to JSON; nothing is
pickled. The checkpoint folder is replaced atomically after each epoch.
"""

from __future__ import annotations

import json
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
    tensors.update({f"extra.{k}": v.detach().contiguous().cpu() for k, v in (extra or {}).items()})

    def fill(tmp: Path) -> None:
        for name, data in tagger._files().items():
            (tmp / name).write_bytes(data)
        save_file(tensors, str(tmp / "trainer.safetensors"))
        meta = {"trainer": trainer_state, "optimizer": opt_meta, "optimizer_type": type(optimizer).__name__}
        (tmp / "trainer.json").write_text(json.dumps(meta, indent=1))
    atomic_write_dir(path, fill)


def load_checkpoint(path: Path) -> tuple[dict, dict, torch.Tensor, dict[str, torch.Tensor]]:
    """(optimizer state dict, trainer state, torch RNG state, extra tensors) from a checkpoint folder.
    Everything read is checked; a defect is a one-line :class:`SeqlabError` naming the file."""
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
    if "rng.torch" not in tensors or tensors["rng.torch"].dtype != torch.uint8:
        raise SeqlabError("trainer.safetensors: no torch RNG state", path=path)

    def prefixed(prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    try:
        opt_state = optimizer_from_files(prefixed("optimizer."), opt)
    except (ValueError, AttributeError, TypeError) as err:
        raise SeqlabError(f"trainer.safetensors: bad optimiser state: {err}", path=path) from None
    trainer = {**trainer, "optimizer_type": meta.get("optimizer_type")}  # None in checkpoints before 2026-11-23
    return opt_state, trainer, tensors["rng.torch"], prefixed("extra.")
