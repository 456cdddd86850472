"""A tagger on disk: its model folder or ``.zip`` archive (``config.json``, ``vocab.json``, ``model.safetensors``;
the format: :mod:`seqlab.tagging.modelfile`), written atomically and read back with every part validated."""

from __future__ import annotations

import io
import json
import logging
import zipfile
from collections.abc import Collection
from pathlib import Path

import torch
from safetensors.torch import save as st_save

from seqlab.config import ExperimentConfig
from seqlab.data.vocab import Vocab
from seqlab.decoders.base import TagSet
from seqlab.errors import SeqlabError
from seqlab.features.base import Featurizer
from seqlab.io.files import atomic_write_bytes, atomic_write_dir, check_folder_kind, check_writable, recover_dir
from seqlab.runtime.cost import parameter_shapes
from seqlab.tagging.encoding import training_scheme
from seqlab.tagging.modelfile import FORMAT_VERSION, NAMES, parse_model_files, read_model_files, read_weights
from seqlab.tagging.named_models import resolve_model
from seqlab.tagging.network import TaggerNet
from seqlab.version import __version__

log = logging.getLogger("seqlab")


#: What :func:`save` may store float32 parameters as (``weights_dtype``); loading reads them back as float32.
WEIGHTS_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def model_files(tagger, weights_dtype: str = "float32", tensors: Collection[str] | None = None) -> dict[str, bytes]:
    """The files of ``tagger``'s model folder, by name: what :func:`save` writes and checkpoints hold. With
    ``weights_dtype`` float16 (or bfloat16) the float32 tensors of ``model.safetensors`` named in ``tensors`` (its
    state dict's names; None: all of them) are stored in that dtype, half their bytes
    (:mod:`seqlab.tagging.modelfile` reads them back as float32). A name the network does not have, or a value the
    dtype cannot hold (beyond float16's 65,504), is a one-line SeqlabError, not an infinity in the file."""
    if weights_dtype not in WEIGHTS_DTYPES:
        raise SeqlabError(f"weights_dtype must be {', '.join(WEIGHTS_DTYPES)}, got {weights_dtype!r}")
    stored = WEIGHTS_DTYPES[weights_dtype]
    state = {k: v.detach().contiguous().cpu() for k, v in tagger.net.state_dict().items()}
    unknown = sorted(set(tensors or ()) - set(state))
    if unknown:
        raise SeqlabError(
            f"no tensor named {', '.join(map(repr, unknown[:3]))} in the network to store as {weights_dtype}"
        )
    for name in state if tensors is None else tensors:
        tensor = state[name]
        if stored != torch.float32 and tensor.dtype == torch.float32:
            state[name] = tensor.to(stored)
            if not torch.isfinite(state[name]).all() and torch.isfinite(tensor).all():
                raise SeqlabError(
                    f"tensor '{name}' holds values beyond {weights_dtype}'s range "
                    f"(largest {tensor.abs().max().item():.4g}): save it as float32"
                )
    meta = {
        "seqlab_version": __version__,
        "format_version": FORMAT_VERSION,
        "scheme": tagger.scheme,
        "config": tagger.config.model_dump(mode="json"),
    }
    vocab = {"features": {name: f.state() for name, f in tagger.featurizers.items()}, "tags": tagger.tags.itos}
    return {
        "config.json": json.dumps(meta, indent=2).encode(),
        "vocab.json": json.dumps(vocab, ensure_ascii=False).encode(),
        "model.safetensors": st_save(state),
    }


def check_save_target(path: str | Path) -> None:
    """:meth:`seqlab.tagger.Tagger.check_save_target`."""
    path = Path(path)
    if path.suffix == ".zip":
        check_writable(path)
        if path.exists() and not is_model_archive(path):
            raise SeqlabError("is a file but not a seqlab model archive: refusing to replace it", path=path)
    else:
        check_folder_kind(path, NAMES)
        check_writable(path, folder=True)


def save(tagger, path: str | Path, weights_dtype: str = "float32", tensors: Collection[str] | None = None) -> None:
    """:meth:`seqlab.tagger.Tagger.save`."""
    path = Path(path)
    check_save_target(path)
    files = model_files(tagger, weights_dtype, tensors)
    if path.suffix == ".zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                zf.writestr(name, data)
        atomic_write_bytes(path, buf.getvalue())
        return

    def fill(tmp: Path) -> None:
        for name, data in files.items():
            (tmp / name).write_bytes(data)

    atomic_write_dir(path, fill, NAMES)


def load(path: str | Path) -> tuple[ExperimentConfig, dict[str, Featurizer], Vocab, str, TaggerNet]:
    """The parts of the tagger saved at ``path`` (a folder, a ``.zip`` archive or a model name): config,
    featurizers, tags, scheme and network (in eval mode, on the CPU), each validated
    (:meth:`seqlab.tagger.Tagger.load`)."""
    path = resolve_model(path)  # a model name -> its folder (seqlab.tagging.named_models); a path as it is
    note = recover_dir(path)
    if note:
        log.warning(note)
    files = read_model_files(path)
    m = parse_model_files(files, path, with_weights=False)
    featurizers = {name: fc.build(name) for name, fc in m.config.model.embedder.features.items()}
    for name, f in featurizers.items():
        if name not in m.features:
            raise SeqlabError(f"vocab.json: no state for feature '{name}'", path=path)
        f.load_state(m.features[name], f"{path}/vocab.json: features.{name}")
    tags = Vocab.from_list(m.tags)
    tag_set = TagSet(tags.itos, training_scheme(m.scheme, m.config.data.train_scheme))

    def build() -> TaggerNet:
        return TaggerNet(m.config.model, featurizers, tag_set)

    # the config's parameter bytes, then the weights file against the shapes, before a tensor is made or read
    m.weights = read_weights(files, path, parameter_shapes(build), m.format_version)
    net = build()
    expected = net.state_dict()
    for name, tensor in m.weights.items():
        if name in expected and tensor.dtype != expected[name].dtype:
            raise SeqlabError(
                f"model.safetensors: tensor '{name}' is {tensor.dtype}, the model needs {expected[name].dtype}",
                path=path,
            )
    try:
        net.load_state_dict(m.weights, strict=True)
    except RuntimeError as err:
        raise SeqlabError(
            f"model.safetensors does not fit the config: {str(err).splitlines()[0]} {' '.join(str(err).split())[:300]}",
            path=path,
        ) from None
    net.eval()
    return m.config, featurizers, tags, m.scheme, net


def is_model_archive(path: Path) -> bool:
    """Whether ``path`` is a ``.zip`` holding a model's files (only the names are read)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return set(NAMES) <= set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
