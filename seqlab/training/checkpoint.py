"""Training checkpoints: the tagger, the optimiser state and the trainer's counters.

Optimiser tensors and the torch RNG states go to safetensors, everything else to JSON; nothing is
pickled. The checkpoint folder is replaced atomically after each epoch. A run on a GPU also keeps that GPU's
generator state (``rng.cuda``): its dropout masks come from it, and without it a resumed run would draw others.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from seqlab.errors import SeqlabError
from seqlab.io.files import atomic_write_dir
from seqlab.tagging.storage import model_files
from seqlab.training.ranks import CUDA_RNG_PREFIX, RNG_PREFIX  # the ranks' RNG states among the extras


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


def save_checkpoint(
    path: Path,
    tagger,
    optimizer: torch.optim.Optimizer,
    trainer_state: dict,
    extra: dict[str, torch.Tensor] | None = None,
) -> None:
    """``extra``: more named tensors the trainer needs back (the weight average)."""
    tensors, opt_meta = optimizer_to_files(optimizer)
    tensors = {f"optimizer.{k}": v for k, v in tensors.items()}
    tensors["rng.torch"] = torch.get_rng_state()
    if tagger.device.type == "cuda":
        tensors["rng.cuda"] = torch.cuda.get_rng_state(tagger.device)
    tensors.update({f"extra.{k}": v.detach().contiguous().cpu() for k, v in (extra or {}).items()})

    def fill(tmp: Path) -> None:
        for name, data in model_files(tagger).items():
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
    path: Path | None = None  # the folder it was read from, for error messages

    def restore_rng(self, device: torch.device) -> None:
        """Put the generators back as they were when the checkpoint was written (the GPU's where the run trains
        on one and the checkpoint has its state). A GPU state that the GPU's generator refuses (its size is only
        known there) is a one-line SeqlabError."""
        torch.set_rng_state(self.rng)  # checked by load_checkpoint
        if self.rng_cuda is not None and device.type == "cuda":
            try:
                torch.cuda.set_rng_state(self.rng_cuda, device)
            except RuntimeError as err:
                raise SeqlabError(
                    f"trainer.safetensors: 'rng.cuda' is not this GPU's RNG state: {str(err).splitlines()[0]}",
                    path=self.path,
                ) from None


#: The size of the CPU generator's state (a Mersenne Twister's, 5056 bytes in PyTorch 2).
CPU_RNG_BYTES = torch.get_rng_state().numel()


def _rng_state(tensors: dict[str, torch.Tensor], key: str, path: Path, cpu: bool = False) -> torch.Tensor | None:
    """The RNG state ``key`` (None if absent): a byte vector, and for a CPU generator (``cpu``) one of the size
    and content PyTorch's generator takes, else a SeqlabError."""
    state = tensors.get(key)
    if state is None:
        return None
    if state.dtype != torch.uint8 or state.dim() != 1:
        raise SeqlabError(f"trainer.safetensors: '{key}' is not an RNG state (a byte vector)", path=path)
    if cpu:
        if state.numel() != CPU_RNG_BYTES:
            raise SeqlabError(
                f"trainer.safetensors: '{key}' has {state.numel()} bytes, a CPU RNG state has {CPU_RNG_BYTES}",
                path=path,
            )
        try:
            torch.Generator().set_state(state)  # a scratch generator: the global one is set by restore_rng
        except RuntimeError as err:
            raise SeqlabError(
                f"trainer.safetensors: '{key}' is not a valid CPU RNG state: {str(err).splitlines()[0]}", path=path
            ) from None
    return state


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    """An integer >= 0."""
    return _is_int(value) and value >= 0


def _nonnegative(value: object) -> bool:
    """A finite number >= 0."""
    return _is_number(value) and math.isfinite(value) and value >= 0


def _costs(value: object) -> bool:
    """seqlab.training.budget.Plan.measured(): {step: seconds, dev and dev_full: seconds or null, scorings: a
    count (absent in older checkpoints)}, or null."""
    return value is None or (
        isinstance(value, dict)
        and _nonnegative(value.get("step"))
        and all(value.get(key) is None or _nonnegative(value.get(key)) for key in ("dev", "dev_full"))
        and ("scorings" not in value or _count(value["scorings"]))
    )


#: The trainer state's keys: (required, check, what a valid value is). ``steps``, ``step_in_epoch``,
#: ``elapsed``, ``best_dev`` and ``costs`` are absent from older checkpoints; ``ended_budget`` (the budget whose
#: clock ended the run) from those of runs that have not ended so.
TRAINER_KEYS: dict[str, tuple[bool, object, str]] = {
    "epoch": (True, _count, "an integer >= 0"),
    "best_epoch": (True, _nonnegative, "a number >= 0 (an epoch, fractional for a mid-epoch scoring)"),
    "bad_epochs": (True, _count, "an integer >= 0"),
    "best": (True, lambda v: _is_number(v) and not math.isnan(v) and v != math.inf, "a score, or -Infinity"),
    "history": (
        True,
        lambda v: isinstance(v, list) and all(isinstance(h, dict) for h in v),
        "a list of log records (objects)",
    ),
    "steps": (False, lambda v: v is None or _count(v), "an integer >= 0"),
    "step_in_epoch": (False, _count, "an integer >= 0"),
    "elapsed": (False, _nonnegative, "seconds: a finite number >= 0"),
    "best_dev": (False, lambda v: v is None or isinstance(v, dict), "an object of dev scores"),
    "costs": (False, _costs, "{step: seconds, dev and dev_full: seconds or null, scorings: a count}"),
    "ended_budget": (False, lambda v: v is None or _nonnegative(v), "seconds: a finite number >= 0, or null"),
}


def _short(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_trainer(trainer: dict, path: Path) -> None:
    """Every trainer counter of the right type and range (a string step count, a negative epoch, a NaN best
    pass a look at the keys but break the resumed run), else a SeqlabError naming the key."""
    for key, (required, valid, what) in TRAINER_KEYS.items():
        if key not in trainer:
            if required:
                raise SeqlabError(f"trainer.json: trainer.{key} is missing", path=path)
            continue
        if not valid(trainer[key]):
            raise SeqlabError(f"trainer.json: trainer.{key} is {_short(trainer[key])}, expected {what}", path=path)


def _finite_numbers(value: object) -> bool:
    """No NaN or infinity anywhere in a JSON value (an optimiser's hyper-parameters)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_finite_numbers(v) for v in value)
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    return True


def _check_optimizer_meta(opt: dict, path: Path) -> set[int]:
    """The optimiser's param groups (hyper-parameters finite, parameter ids distinct integers) and scalars;
    returns the parameter ids."""
    ids: list[int] = []
    for g, group in enumerate(opt["param_groups"]):
        if (
            not isinstance(group, dict)
            or not isinstance(group.get("params"), list)
            or not all(_count(i) for i in group["params"])
        ):
            raise SeqlabError(f"trainer.json: optimizer.param_groups[{g}] has no list of parameter ids", path=path)
        bad = next((k for k, v in group.items() if not _finite_numbers(v)), None)
        if bad is not None:
            raise SeqlabError(f"trainer.json: optimizer.param_groups[{g}].{bad} is not finite", path=path)
        ids += group["params"]
    if len(set(ids)) != len(ids):
        raise SeqlabError("trainer.json: optimizer.param_groups list a parameter twice", path=path)
    for pid, extra in opt["scalars"].items():
        if not (pid.isdigit() and int(pid) in ids and isinstance(extra, dict) and _finite_numbers(extra)):
            raise SeqlabError(
                f"trainer.json: optimizer.scalars.{pid}: not finite values of a listed parameter", path=path
            )
    return set(ids)


#: Optimiser state tensors that are scalars whatever the parameter's shape (NAdam's mu_product).
SCALAR_STATES = ("step", "mu_product")


def _check_optimizer_tensors(tensors: dict[str, torch.Tensor], ids: set[int], path: Path) -> None:
    """Each ``optimizer.PID.KEY`` tensor belongs to a listed parameter, holds finite floats, and is a scalar where
    the key is one (a step count: >= 0)."""
    for name, value in tensors.items():
        if not name.startswith("optimizer."):
            continue
        pid, _, key = name[len("optimizer.") :].partition(".")
        where = f"trainer.safetensors: '{name}'"
        if not pid.isdigit() or int(pid) not in ids or not key:
            raise SeqlabError(f"{where} is not the state of a parameter that trainer.json lists", path=path)
        if not value.is_floating_point():
            raise SeqlabError(f"{where} is {value.dtype}, expected floats", path=path)
        if not torch.isfinite(value).all():
            raise SeqlabError(f"{where} holds NaN or infinite values", path=path)
        if key in SCALAR_STATES and value.numel() != 1:
            raise SeqlabError(f"{where} has shape {list(value.shape)}, expected a scalar", path=path)
        if key == "step" and value.item() < 0:
            raise SeqlabError(f"{where} is {value.item():g}, expected a step count >= 0", path=path)


def _check_extra(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """The ranks' RNG states (CPU ones of the generator's size) and the weight average's tensors (no NaN, and
    its count of averaged steps >= 0)."""
    for name, value in tensors.items():
        if not name.startswith("extra."):
            continue
        key = name[len("extra.") :]
        if key.startswith(CUDA_RNG_PREFIX):
            _rng_state(tensors, name, path)
        elif key.startswith(RNG_PREFIX):
            _rng_state(tensors, name, path, cpu=True)
        elif value.is_floating_point() and torch.isnan(value).any():  # buffers may hold -inf (masks)
            raise SeqlabError(f"trainer.safetensors: '{name}' holds NaN values", path=path)
        elif key == "n_averaged" and (value.is_floating_point() or value.numel() != 1 or value.item() < 0):
            raise SeqlabError(f"trainer.safetensors: '{name}' is not a count of averaged steps >= 0", path=path)


def load_checkpoint(path: Path) -> Checkpoint:
    """A checkpoint folder's optimiser state, trainer state, RNG states and extra tensors. Everything read is
    checked, values as well as types (counts are integers >= 0, the best score is not NaN, RNG states have the
    generator's size, optimiser tensors are finite); a defect is a one-line :class:`SeqlabError` naming the file
    and key. Whether the optimiser tensors fit the parameters is :func:`check_optimizer_state`'s to say."""
    try:
        tensors = load_file(str(path / "trainer.safetensors"))
    except FileNotFoundError:
        raise SeqlabError("checkpoint has no trainer.safetensors", path=path) from None
    except Exception as err:  # safetensors raises its own error types
        raise SeqlabError(f"trainer.safetensors: corrupt: {str(err).splitlines()[0]}", path=path) from None
    try:
        meta = json.loads((path / "trainer.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise SeqlabError(f"trainer.json: unreadable or corrupt: {str(err)[:200]}", path=path) from None
    trainer = meta.get("trainer") if isinstance(meta, dict) else None
    opt = meta.get("optimizer") if isinstance(meta, dict) else None
    if not (
        isinstance(trainer, dict)
        and isinstance(opt, dict)
        and isinstance(opt.get("param_groups"), list)
        and isinstance(opt.get("scalars"), dict)
    ):
        raise SeqlabError(
            "trainer.json: expected {trainer: {epoch, best, best_epoch, bad_epochs, history}, "
            "optimizer: {param_groups, scalars}}",
            path=path,
        )
    _check_trainer(trainer, path)
    optimizer_type = meta.get("optimizer_type")
    if optimizer_type is not None and not isinstance(optimizer_type, str):
        raise SeqlabError(f"trainer.json: optimizer_type is {_short(optimizer_type)}, expected a class name", path=path)
    rng = _rng_state(tensors, "rng.torch", path, cpu=True)
    if rng is None:
        raise SeqlabError("trainer.safetensors: no torch RNG state", path=path)
    _check_optimizer_tensors(tensors, _check_optimizer_meta(opt, path), path)
    _check_extra(tensors, path)

    def prefixed(prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}

    try:
        opt_state = optimizer_from_files(prefixed("optimizer."), opt)
    except (ValueError, AttributeError, TypeError) as err:
        raise SeqlabError(f"trainer.safetensors: bad optimiser state: {err}", path=path) from None
    trainer = {**trainer, "optimizer_type": optimizer_type}  # None in checkpoints before 2026-11-23
    return Checkpoint(opt_state, trainer, rng, _rng_state(tensors, "rng.cuda", path), prefixed("extra."), path)


def check_optimizer_state(optimizer: torch.optim.Optimizer, state: dict, path: Path | None = None) -> None:
    """Whether a checkpoint's optimiser state (``Checkpoint.optimizer``) fits ``optimizer``'s parameters: the
    same groups of the same sizes, and each state tensor of its parameter's shape (scalars for
    :data:`SCALAR_STATES`). ``optimizer.load_state_dict`` checks only the group sizes: a moment of another shape
    would load and fail in the first step, with a traceback. Call it before ``load_state_dict``; a misfit is a
    one-line SeqlabError naming the checkpoint and the tensor."""
    saved_groups, groups = state.get("param_groups", []), optimizer.param_groups
    if len(saved_groups) != len(groups):
        raise SeqlabError(
            f"trainer.json: the optimiser state has {len(saved_groups)} parameter group(s), the "
            f"model's optimiser {len(groups)}",
            path=path,
        )
    for g, (saved, group) in enumerate(zip(saved_groups, groups)):
        if len(saved["params"]) != len(group["params"]):
            raise SeqlabError(
                f"trainer.json: optimizer.param_groups[{g}] has {len(saved['params'])} parameters, "
                f"the model's optimiser {len(group['params'])}",
                path=path,
            )
        for pid, param in zip(saved["params"], group["params"]):
            for key, value in state.get("state", {}).get(pid, {}).items():
                if not isinstance(value, torch.Tensor):
                    continue
                scalar = key in SCALAR_STATES
                if (value.numel() != 1) if scalar else (value.shape != param.shape):
                    expected = "a scalar" if scalar else f"the parameter's shape {list(param.shape)}"
                    raise SeqlabError(
                        f"trainer.safetensors: 'optimizer.{pid}.{key}' has shape "
                        f"{list(value.shape)}, expected {expected}",
                        path=path,
                    )
