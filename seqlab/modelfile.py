"""Model folders and ``.zip`` archives: reading, validating and migrating their three files.

    config.json        {"seqlab_version", "format_version", "scheme", "config": <ExperimentConfig>}
    vocab.json         {"features": {<feature name>: <featurizer state>}, "tags": [<label>, ...]}
    model.safetensors  the network's weights

Only JSON and safetensors are read: nothing is unpickled. Every defect is a one-line
:class:`SeqlabError` naming the file. Format 1 (before featurizers) is migrated on load.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load

from seqlab.config import ExperimentConfig, config_from_dict
from seqlab.data.schemes import split_tag
from seqlab.data.vocab import CASING_CLASSES
from seqlab.errors import SeqlabError

FORMAT_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
NAMES = ("config.json", "vocab.json", "model.safetensors")


@dataclass
class ModelFiles:
    """The validated contents of a model folder, in the current format."""

    config: ExperimentConfig
    scheme: str  # the tag scheme of the data the model was trained on
    features: dict[str, Any]  # featurizer name -> state
    tags: list[str]
    weights: dict[str, torch.Tensor]


def read_model_files(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        missing = [n for n in NAMES if not (path / n).is_file()]
        if missing:
            raise SeqlabError(f"not a seqlab model folder (missing {', '.join(missing)})", path=path)
        try:
            return {n: (path / n).read_bytes() for n in NAMES}
        except OSError as err:
            raise SeqlabError(f"cannot read the model: {err.strerror}", path=path) from None
    if path.is_file() and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                present = set(zf.namelist())
                missing = [n for n in NAMES if n not in present]
                if missing:
                    raise SeqlabError(f"not a seqlab model archive (missing {', '.join(missing)})", path=path)
                return {n: zf.read(n) for n in NAMES}
        except (zipfile.BadZipFile, OSError, ValueError) as err:
            raise SeqlabError(f"corrupt model archive: {err}", path=path) from None
    if not path.exists():
        raise SeqlabError("no such model", path=path)
    raise SeqlabError("not a seqlab model folder or .zip archive", path=path)


def _json(files: dict[str, bytes], name: str, path: Path) -> dict:
    try:
        value = json.loads(files[name])
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SeqlabError(f"{name}: corrupt JSON: {err}", path=path) from None
    if not isinstance(value, dict):
        raise SeqlabError(f"{name}: expected a JSON object", path=path)
    return value


def parse_model_files(files: dict[str, bytes], path: Path) -> ModelFiles:
    meta = _json(files, "config.json", path)
    vocab = _json(files, "vocab.json", path)
    version = meta.get("format_version")
    if version not in SUPPORTED_VERSIONS:
        raise SeqlabError(f"config.json: model format {version!r}; this seqlab reads formats "
                          f"{', '.join(map(str, SUPPORTED_VERSIONS))}", path=path)
    try:
        weights = st_load(files["model.safetensors"])
    except Exception as err:  # safetensors raises its own error types
        raise SeqlabError(f"model.safetensors: corrupt weights: {str(err).splitlines()[0]}", path=path) from None
    if not isinstance(meta.get("config"), dict):
        raise SeqlabError("config.json: 'config' must be an object", path=path)
    if version == 1:
        meta, vocab, weights = migrate_v1(meta, vocab, weights)
    scheme = meta.get("scheme")
    if scheme not in ("IOB1", "BIO", "BIOES", "BMES", "none"):
        raise SeqlabError(f"config.json: 'scheme' must be IOB1, BIO, BIOES, BMES or none, got {scheme!r}", path=path)
    config = config_from_dict(meta["config"], f"{path}/config.json")
    tags = vocab.get("tags")
    if not isinstance(tags, list) or not tags or not all(isinstance(t, str) for t in tags) \
            or len(set(tags)) != len(tags):
        raise SeqlabError("vocab.json: 'tags' must be a list of distinct strings", path=path)
    bad = next((t for t in tags if split_tag(t) is None), None) if scheme != "none" else None
    if bad is not None:
        raise SeqlabError(f"vocab.json: tag {bad!r} is not a tag of a chunk scheme (O, or a B-, I-, M-, E-, S- "
                          f"prefix and a type)", path=path)
    features = vocab.get("features")
    if not isinstance(features, dict):
        raise SeqlabError("vocab.json: 'features' must be an object", path=path)
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise SeqlabError(f"model.safetensors: tensor '{name}' holds NaN or infinite values", path=path)
    return ModelFiles(config, scheme, features, tags, weights)


# weight names of format 1 that moved when inputs became featurizers
_V1_RENAMES = {"embedder.word.weight": "embedder.word.embed.weight",
               "embedder.casing.weight": "embedder.casing.embed.weight"}


def migrate_v1(meta: dict, vocab: dict, weights: dict[str, torch.Tensor]) -> tuple[dict, dict, dict]:
    """Format 1 -> 2: the fixed word / char / casing inputs become featurizers named word, char, casing."""
    config = json.loads(json.dumps(meta["config"]))  # a deep copy
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    old = model.get("embedder") if isinstance(model.get("embedder"), dict) else {}
    features: dict[str, Any] = {"word": {"type": "words", **old.get("word", {})}}
    char = dict(old.get("char", {}))
    if char.get("type", "cnn") != "none":
        char["encoder"] = char.pop("type", "cnn")
        features["char"] = {"type": "chars", **char}
    if old.get("casing_dim", 8):
        features["casing"] = {"type": "casing", "dim": old.get("casing_dim", 8)}
    model["embedder"] = {"features": features, "dropout": old.get("dropout", 0.5)}
    config["model"] = model
    states = {"word": {"itos": vocab.get("words")}, "char": {"itos": vocab.get("chars")}}
    states["casing"] = {"classes": list(CASING_CLASSES)}
    new_vocab = {"features": {name: states[name] for name in features}, "tags": vocab.get("tags")}
    renamed = {}
    for name, tensor in weights.items():
        if name.startswith("embedder.char."):  # CharCNN / CharLSTM moved under CharFeatures.encoder
            name = "embedder.char.encoder." + name[len("embedder.char."):]
            name = name.replace(".encoder.embed.", ".encoder.chars.embed.")  # inside CharEmbedding
            name = name.replace(".encoder.window.", ".encoder.windows.0.")  # one width of a CNN
        renamed[_V1_RENAMES.get(name, name)] = tensor
    return {**meta, "format_version": FORMAT_VERSION, "config": config}, new_vocab, renamed
