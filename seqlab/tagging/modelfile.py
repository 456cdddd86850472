"""Model folders and ``.zip`` archives: reading, validating and migrating their three files.

    config.json        {"seqlab_version", "format_version", "scheme", "config": <ExperimentConfig>}
    vocab.json         {"features": {<feature name>: <featurizer state>}, "tags": [<label>, ...]}
    model.safetensors  the network's weights

Only JSON and safetensors are read: nothing is unpickled. Every defect is a one-line
:class:`SeqlabError` naming the file. Format 1 (before featurizers) is migrated on load.

What a file costs is known before it is read: each file's size (an archive entry's declared uncompressed size,
which also bounds what extracting it can give) against a limit (:data:`MAX_BYTES`), and the weights against the
network the config describes (:func:`check_weights`): its parameter bytes (at most :data:`MAX_PARAMETER_BYTES`),
then the safetensors header's length, names, dtypes, shapes and offsets, and the file's size, all before a tensor
is read. A 3 GiB sparse ``model.safetensors``, a 1 GiB entry in a small archive or a config asking for hidden
size 16384 are one error line, not gigabytes.

A float32 parameter may be stored in half precision (F16 or BF16: :data:`STORED_AS`; ``Tagger.save(path,
weights_dtype="float16")``, and a named model's ``card.json`` says ``weights_dtype``): it is checked and sized by
the dtype stored, and read back as float32, so the network computes in float32 whatever the file holds.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load

from seqlab.config import ExperimentConfig, config_from_dict
from seqlab.data.schemes import split_tag
from seqlab.data.vocab import CASING_CLASSES
from seqlab.errors import SeqlabError
from seqlab.io import jsonload

FORMAT_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)
NAMES = ("config.json", "vocab.json", "model.safetensors")
WEIGHTS = "model.safetensors"

#: Most parameter bytes of a network a model may describe (4 GiB: a billion float32 parameters).
MAX_PARAMETER_BYTES = 4 << 30
#: Most bytes of a safetensors header per tensor, besides a fixed allowance for its metadata.
HEADER_BYTES_PER_TENSOR, HEADER_BYTES = 1024, 1 << 20
#: Most bytes of each file of a model (an archive's entries: their declared uncompressed size).
MAX_BYTES = {
    "config.json": 16 << 20,
    "vocab.json": 256 << 20,
    WEIGHTS: 8 + HEADER_BYTES + 64 * HEADER_BYTES_PER_TENSOR + MAX_PARAMETER_BYTES,
}
#: safetensors dtype names -> torch dtypes
DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}

#: The dtypes a parameter may be stored as, besides its own: float32 ones in half precision (read back as float32).
STORED_AS = {torch.float32: (torch.float16, torch.bfloat16)}

Shapes = Mapping[str, tuple[tuple[int, ...], torch.dtype]]  # state dict entry -> (shape, dtype)


@dataclass
class ModelFiles:
    """The validated contents of a model folder, in the current format."""

    config: ExperimentConfig
    scheme: str  # the tag scheme of the data the model was trained on
    features: dict[str, Any]  # featurizer name -> state
    tags: list[str]
    weights: dict[str, torch.Tensor]
    format_version: int = FORMAT_VERSION  # of the files read (format 1's weights are renamed when read)


class ModelSource(Mapping):
    """The three files of a model folder or ``.zip`` archive, read when asked for: ``source[name]`` is a file's
    bytes, refused over its limit (:data:`MAX_BYTES`, or ``limits``) before anything of it is read."""

    def __init__(self, path: Path, archive: bool):
        self.path, self.archive = path, archive
        self.limits = dict(MAX_BYTES)

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)

    def size(self, name: str) -> int:
        """Bytes of the file (of an archive's entry: its declared uncompressed size)."""
        try:
            if self.archive:
                with zipfile.ZipFile(self.path) as zf:
                    return zf.getinfo(name).file_size
            return (self.path / name).stat().st_size
        except (zipfile.BadZipFile, OSError, KeyError, ValueError) as err:
            raise SeqlabError(f"cannot read {name}: {err}", path=self.path) from None

    def head(self, name: str, size: int) -> bytes:
        """The first ``size`` bytes of the file (fewer if it is shorter)."""
        try:
            if self.archive:
                with zipfile.ZipFile(self.path) as zf, zf.open(name) as f:
                    return f.read(size)  # decompressed up to ``size`` bytes only
            with open(self.path / name, "rb") as f:
                return f.read(size)
        except (zipfile.BadZipFile, OSError, ValueError) as err:
            where = "corrupt model archive" if self.archive else f"cannot read {name}"
            raise SeqlabError(f"{where}: {getattr(err, 'strerror', None) or err}", path=self.path) from None

    def __getitem__(self, name: str) -> bytes:
        if name not in NAMES:
            raise KeyError(name)
        size, limit = self.size(name), self.limits[name]
        if size > limit:
            declared = " (declared in the archive)" if self.archive else ""
            raise SeqlabError(
                f"{name} is {size:,} bytes{declared}, over the {limit:,} bytes this model may have in it",
                path=self.path,
            )
        data = self.head(name, size + 1)  # an archive gives at most the declared size; a file may have grown
        if len(data) > size:
            raise SeqlabError(f"{name} changed while it was read", path=self.path)
        return data


def read_model_files(path: Path) -> ModelSource:
    """The files of a model folder or ``.zip`` archive, checked to be there; read when asked for
    (:class:`ModelSource`)."""
    if path.is_dir():
        missing = [n for n in NAMES if not (path / n).is_file()]
        if missing:
            raise SeqlabError(f"not a seqlab model folder (missing {', '.join(missing)})", path=path)
        return ModelSource(path, archive=False)
    if path.is_file() and zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                present = set(zf.namelist())
        except (zipfile.BadZipFile, OSError, ValueError) as err:
            raise SeqlabError(f"corrupt model archive: {err}", path=path) from None
        missing = [n for n in NAMES if n not in present]
        if missing:
            raise SeqlabError(f"not a seqlab model archive (missing {', '.join(missing)})", path=path)
        return ModelSource(path, archive=True)
    if not path.exists():
        raise SeqlabError("no such model", path=path)
    raise SeqlabError("not a seqlab model folder or .zip archive", path=path)


def _json(files: dict[str, bytes], name: str, path: Path) -> dict:
    try:
        value = jsonload.loads(files[name])
    except jsonload.NestingError as err:
        raise SeqlabError(f"{name}: JSON {err}", path=path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SeqlabError(f"{name}: corrupt JSON: {err}", path=path) from None
    if not isinstance(value, dict):
        raise SeqlabError(f"{name}: expected a JSON object", path=path)
    return value


def parse_model_files(files: Mapping[str, bytes], path: Path, with_weights: bool = True) -> ModelFiles:
    """The validated contents of ``files``; with ``with_weights`` false, without the weights (``weights`` is
    empty: :func:`read_weights` reads them once their shapes are known)."""
    meta = _json(files, "config.json", path)
    vocab = _json(files, "vocab.json", path)
    version = meta.get("format_version")
    if version not in SUPPORTED_VERSIONS:
        raise SeqlabError(
            f"config.json: model format {version!r}; this seqlab reads formats "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}",
            path=path,
        )
    if not isinstance(meta.get("config"), dict):
        raise SeqlabError("config.json: 'config' must be an object", path=path)
    if version == 1:
        meta, vocab, _ = migrate_v1(meta, vocab, {})
    scheme = meta.get("scheme")
    if scheme not in ("IOB1", "BIO", "BIOES", "BMES", "none"):
        raise SeqlabError(f"config.json: 'scheme' must be IOB1, BIO, BIOES, BMES or none, got {scheme!r}", path=path)
    config = config_from_dict(meta["config"], f"{path}/config.json")
    tags = vocab.get("tags")
    if (
        not isinstance(tags, list)
        or not tags
        or not all(isinstance(t, str) for t in tags)
        or len(set(tags)) != len(tags)
    ):
        raise SeqlabError("vocab.json: 'tags' must be a list of distinct strings", path=path)
    bad = next((t for t in tags if split_tag(t) is None), None) if scheme != "none" else None
    if bad is not None:
        raise SeqlabError(
            f"vocab.json: tag {bad!r} is not a tag of a chunk scheme (O, or a B-, I-, M-, E-, S- prefix and a type)",
            path=path,
        )
    features = vocab.get("features")
    if not isinstance(features, dict):
        raise SeqlabError("vocab.json: 'features' must be an object", path=path)
    weights = read_weights(files, path, version=version) if with_weights else {}
    return ModelFiles(config, scheme, features, tags, weights, version)


def read_weights(
    files: Mapping[str, bytes], path: Path, shapes: Shapes | None = None, version: int = FORMAT_VERSION
) -> dict[str, torch.Tensor]:
    """The tensors of ``model.safetensors`` (format 1's under their current names), each finite. With
    ``shapes`` (what the config's network holds), the file is checked against them first
    (:func:`check_weights`), nothing larger than they need is read, and a tensor stored in half precision for a
    float32 parameter (:data:`STORED_AS`) is returned as float32."""
    if shapes is not None and isinstance(files, ModelSource):
        files.limits[WEIGHTS] = check_weights(files, path, shapes, _v1_name if version == 1 else None)
    try:
        weights = st_load(files[WEIGHTS])
    except SeqlabError:
        raise
    except Exception as err:  # safetensors raises its own error types
        raise SeqlabError(f"model.safetensors: corrupt weights: {str(err).splitlines()[0]}", path=path) from None
    if version == 1:
        weights = {_v1_name(name): tensor for name, tensor in weights.items()}
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise SeqlabError(f"model.safetensors: tensor '{name}' holds NaN or infinite values", path=path)
    if shapes is not None:
        for name, tensor in weights.items():
            needed = shapes[name][1] if name in shapes else tensor.dtype
            if tensor.dtype != needed and tensor.dtype in STORED_AS.get(needed, ()):
                weights[name] = tensor.to(needed)
    return weights


def check_parameters(shapes: Shapes, path: Path) -> int:
    """The parameter bytes of a network of these shapes; an error naming the largest tensor if they are over
    :data:`MAX_PARAMETER_BYTES` (a config asking for sizes no model has)."""
    total = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
    if total > MAX_PARAMETER_BYTES:
        name, (shape, _) = max(shapes.items(), key=lambda kv: math.prod(kv[1][0]))
        raise SeqlabError(
            f"config.json: the network it describes has {total:,} bytes of parameters (the largest: "
            f"'{name}' {list(shape)}), over the {MAX_PARAMETER_BYTES:,} a model may have",
            path=path,
        )
    return total


def check_weights(files: ModelSource, path: Path, shapes: Shapes, rename=None) -> int:
    """``model.safetensors`` against the network of ``shapes``, reading its header only: the file's size, the
    header's length (8 bytes, little-endian) and JSON, each tensor's name, dtype, shape and offsets. Returns
    the file's size, which is then all that may be read."""
    data_bytes = check_parameters(shapes, path)
    header_limit = HEADER_BYTES + HEADER_BYTES_PER_TENSOR * len(shapes)
    size = files.size(WEIGHTS)
    if size > 8 + header_limit + data_bytes:
        raise SeqlabError(
            f"model.safetensors is {size:,} bytes, but the network in config.json has {data_bytes:,} bytes of weights",
            path=path,
        )
    head = files.head(WEIGHTS, 8)
    length = struct.unpack("<Q", head)[0] if len(head) == 8 else None
    if length is None or length > header_limit or 8 + length > size:
        raise SeqlabError(
            f"model.safetensors: corrupt weights: a header of {length} bytes in a file of {size:,} "
            f"bytes (at most {header_limit:,} for {len(shapes)} tensors)",
            path=path,
        )
    try:
        header = jsonload.loads(files.head(WEIGHTS, 8 + length)[8:])
    except (ValueError, UnicodeDecodeError) as err:
        raise SeqlabError(f"model.safetensors: corrupt weights: its header is not JSON ({err})", path=path) from None
    if not isinstance(header, dict):
        raise SeqlabError("model.safetensors: corrupt weights: its header is not a JSON object", path=path)
    header.pop("__metadata__", None)
    entries = {(rename or str)(name): entry for name, entry in header.items()}
    missing, unexpected = sorted(set(shapes) - set(entries)), sorted(set(entries) - set(shapes))
    if missing or unexpected:
        raise SeqlabError(
            f"model.safetensors does not fit the config: {len(missing)} tensors missing "
            f"{missing[:3]}, {len(unexpected)} unexpected {unexpected[:3]}",
            path=path,
        )
    spans = [_check_entry(name, entries[name], *shapes[name], path) for name in shapes]
    end = 0
    for begin, stop in sorted(spans):
        if begin != end:
            raise SeqlabError(
                f"model.safetensors: corrupt weights: tensor data overlaps or has a gap at byte {begin:,}", path=path
            )
        end = stop
    if size != 8 + length + end:
        raise SeqlabError(f"model.safetensors is {size:,} bytes; its header describes {8 + length + end:,}", path=path)
    return size


def _check_entry(name: str, entry: Any, shape: tuple[int, ...], dtype: torch.dtype, path: Path) -> tuple[int, int]:
    """One tensor of a safetensors header against the network's: its (begin, end) offsets in the data."""
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("shape"), list)
        or not isinstance(entry.get("data_offsets"), list)
        or len(entry["data_offsets"]) != 2
        or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in entry["shape"] + entry["data_offsets"]
        )
    ):
        raise SeqlabError(
            f"model.safetensors: corrupt weights: tensor '{name}' has no valid dtype, shape and data_offsets", path=path
        )
    found = DTYPES.get(entry.get("dtype"))
    if found is None:
        raise SeqlabError(f"model.safetensors: tensor '{name}' has dtype {entry.get('dtype')!r}", path=path)
    if found != dtype and found not in STORED_AS.get(dtype, ()):
        raise SeqlabError(f"model.safetensors: tensor '{name}' is {found}, the model needs {dtype}", path=path)
    if tuple(entry["shape"]) != tuple(shape):
        raise SeqlabError(
            f"model.safetensors does not fit the config: tensor '{name}' has shape {entry['shape']}, "
            f"the network needs {list(shape)}",
            path=path,
        )
    begin, end = entry["data_offsets"]
    if end - begin != math.prod(shape) * found.itemsize:
        raise SeqlabError(
            f"model.safetensors: corrupt weights: tensor '{name}' has {end - begin:,} bytes of data "
            f"for its shape {list(shape)}",
            path=path,
        )
    return begin, end


# weight names of format 1 that moved when inputs became featurizers
_V1_RENAMES = {
    "embedder.word.weight": "embedder.word.embed.weight",
    "embedder.casing.weight": "embedder.casing.embed.weight",
}


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
    renamed = {_v1_name(name): tensor for name, tensor in weights.items()}
    return {**meta, "format_version": FORMAT_VERSION, "config": config}, new_vocab, renamed


def _v1_name(name: str) -> str:
    """A format-1 weight's name in the current format."""
    if name.startswith("embedder.char."):  # CharCNN / CharLSTM moved under CharFeatures.encoder
        name = "embedder.char.encoder." + name[len("embedder.char.") :]
        name = name.replace(".encoder.embed.", ".encoder.chars.embed.")  # inside CharEmbedding
        name = name.replace(".encoder.window.", ".encoder.windows.0.")  # one width of a CNN
    return _V1_RENAMES.get(name, name)
