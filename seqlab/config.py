"""Typed, validated configuration.

A YAML file maps one-to-one onto :class:`ExperimentConfig`. Unknown keys and wrong types are
errors that name the offending key. Every default carries a one-line reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import Field, ValidationError

from seqlab.encoders.base import LayerConfig
from seqlab.encoders.bilstm import BiLSTMConfig
from seqlab.errors import SeqlabError

try:  # encoder families register their configs here
    from seqlab.encoders.psa import CONFIGS as _PSA_CONFIGS
except ImportError:  # pragma: no cover - during partial installs
    _PSA_CONFIGS = []

_ENCODERS = (BiLSTMConfig, *_PSA_CONFIGS)
EncoderConfig = Annotated[Union[_ENCODERS], Field(discriminator="type")]  # type: ignore[valid-type]


class DataConfig(LayerConfig):
    format: Literal["conll", "bmes"] = Field("conll", description="column file; bmes = one char per line")
    train: str = Field(..., description="training file, relative to the data root")
    dev: str | None = Field(None, description="dev file; None holds out dev_from_train sentences")
    test: str | None = Field(None, description="test file, scored after training with the best checkpoint")
    token_column: int = Field(0, description="CoNLL files keep the token first")
    label_column: int = Field(-1, description="CoNLL files keep the label last")
    scheme: Literal["auto", "IOB1", "BIO", "BIOES", "BMES", "none"] = Field(
        "auto", description="scheme of the files; 'none' for plain labels such as POS; auto detects it")
    train_scheme: Literal["BIOES", "BIO", "IOB1", "BMES", "same"] = Field(
        "BIOES", description="the papers train in BIOES; predictions are written back in the input scheme")
    dev_from_train: int = Field(1000, ge=0, description="CoNLL-2000 has no dev set; the papers hold out 1000")
    dev_seed: int = Field(1, description="fixed so every model sees the same held-out sentences")
    strip_seg_digit: bool = Field(False, description="Weibo NER characters carry a segmentation digit")
    max_train_sentences: int | None = Field(None, gt=0, description="cap for quick runs and demos")


class WordConfig(LayerConfig):
    dim: int = Field(50, gt=0, description="GloVe 6B 50d is the vector set available offline")
    pretrained: str | None = Field(
        "glove-6b-50d", description="'glove-6b-50d' (PyPI package), a GloVe/word2vec text file (.gz ok), or None")
    freeze: bool = Field(False, description="the papers fine-tune the word embeddings")
    lowercase: bool = Field(True, description="GloVe 6B is uncased; casing is kept by the casing feature")
    min_count: int = Field(1, ge=1, description="keep every training word; rare ones still get trained")
    replace_digits: bool = Field(False, description="map digits to 0 before lookup (NCRF++ option)")


class CharConfig(LayerConfig):
    type: Literal["cnn", "lstm", "none"] = Field("cnn", description="Ma and Hovy's char CNN by default")
    dim: int = Field(30, gt=0, description="30d character embeddings (Ma and Hovy; PSA paper)")
    hidden: int = Field(50, gt=0, description="CNN filters, or BiLSTM total size (PSA paper: 100)")
    kernel: int = Field(3, gt=0, description="CNN window of Ma and Hovy")


class EmbedderConfig(LayerConfig):
    word: WordConfig = Field(default_factory=WordConfig, description="word lookup table")
    char: CharConfig = Field(default_factory=CharConfig, description="character features")
    casing_dim: int = Field(8, ge=0, description="small embedding of the word's casing class; 0 disables it")
    dropout: float = Field(0.5, ge=0.0, lt=1.0, description="on the concatenated input representation")


class CRFDecoderConfig(LayerConfig):
    type: Literal["crf"] = "crf"
    constrained: bool = Field(True, description="forbid transitions invalid in the training scheme")


class SoftmaxDecoderConfig(LayerConfig):
    type: Literal["softmax"] = "softmax"


DecoderConfig = Annotated[Union[CRFDecoderConfig, SoftmaxDecoderConfig], Field(discriminator="type")]


class ModelConfig(LayerConfig):
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig, description="word + char + casing")
    encoders: list[EncoderConfig] = Field(  # type: ignore[valid-type]
        default_factory=lambda: [BiLSTMConfig()], description="the BiLSTM-CRF baseline")
    decoder: DecoderConfig = Field(default_factory=CRFDecoderConfig, description="linear-chain CRF")  # type: ignore[valid-type]


class TrainConfig(LayerConfig):
    optimizer: Literal["sgd", "adam", "nadam"] = Field("sgd", description="SGD with momentum, as the papers")
    lr: float = Field(0.015, gt=0, description="PSA paper: 0.015 for NER and chunking")
    momentum: float = Field(0.9, ge=0, lt=1, description="PSA paper")
    lr_decay: float = Field(0.05, ge=0, description="rho in lr_t = lr_0 / (1 + rho * t)")
    weight_decay: float = Field(0.0, ge=0, description="off, as the papers")
    clip: float | None = Field(5.0, description="gradient norm threshold of the PSA paper")
    batch_size: int = Field(10, gt=0, description="the papers' batch of 10 sentences")
    batch_tokens: int | None = Field(None, gt=0, description="if set, batches hold about this many tokens")
    eval_batch_size: int = Field(128, gt=0, description="inference is cheap; large batches are fastest")
    max_epochs: int = Field(50, gt=0, description="long enough for early stopping to decide")
    patience: int = Field(10, ge=1, description="epochs without dev improvement before stopping")
    ema_decay: float | None = Field(
        None, gt=0, lt=1, description="if set, dev scoring and the saved model use an exponential moving "
                                      "average of the weights with this per-step decay (e.g. 0.999)")
    loss_reduction: Literal["sum", "mean"] = Field(
        "mean", description="Ma and Hovy average the batch loss; with momentum 0.9, a sum is a 10x larger step")
    seed: int = Field(1, description="one seed makes a run repeatable")
    threads: int | None = Field(None, gt=0, description="torch intra-op threads; None = all cores")


class ExperimentConfig(LayerConfig):
    task: Literal["ner", "chunking", "pos", "tagging"] = Field("tagging", description="picks the dev metric")
    data: DataConfig
    model: ModelConfig = Field(default_factory=ModelConfig, description="embedder -> encoders -> decoder")
    train: TrainConfig = Field(default_factory=TrainConfig, description="PSA paper's optimisation setting")

    @property
    def metric(self) -> str:
        """Span F1 for span tasks, token accuracy for POS and plain labels."""
        return "accuracy" if self.task == "pos" or self.data.scheme == "none" else "f1"


def _format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"] if not (isinstance(p, str) and p in ("bilstm", "crf", "softmax"))
                   and not str(p).startswith("function-"))
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown config key"
    return f"{source}: config key '{key}': {msg}"


def _set_dotted(raw: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node: Any = raw
    for part in parts[:-1]:
        if isinstance(node, list):
            node = node[int(part)]
        else:
            node = node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def parse_overrides(pairs: list[str]) -> list[tuple[str, Any]]:
    """``["train.lr=0.01", "model.encoders.0.hidden=400"]`` -> typed (key, value) pairs (YAML scalars)."""
    out = []
    for pair in pairs:
        if "=" not in pair:
            raise SeqlabError(f"--set expects key=value, got '{pair}'")
        key, value = pair.split("=", 1)
        out.append((key.strip(), yaml.safe_load(value)))
    return out


def config_from_dict(raw: dict, source: str = "<dict>") -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as err:
        raise SeqlabError(_format_validation_error(err, source)) from None


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read and validate a YAML config; ``overrides`` are ``key=value`` strings with dotted keys."""
    path = Path(path)
    if not path.is_file():
        raise SeqlabError("no such config file", path=path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SeqlabError("config is not UTF-8 text", path=path) from None
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        raise SeqlabError(f"invalid YAML: {getattr(err, 'problem', err)}", path=path,
                          line=None if line is None else line + 1) from None
    if not isinstance(raw, dict):
        raise SeqlabError("a config file must be a YAML mapping", path=path)
    for key, value in parse_overrides(overrides or []):
        try:
            _set_dotted(raw, key, value)
        except (ValueError, IndexError, TypeError, AttributeError):
            raise SeqlabError(f"--set: cannot set config key '{key}'") from None
    return config_from_dict(raw, str(path))


def resolve_data_path(relative: str, data_root: str | os.PathLike | None) -> Path:
    """Data paths in configs are relative to --data-root, else $SEQLAB_DATA, else ./data.
    The prefix ``package:`` points into the bundled resources."""
    if relative.startswith("package:"):
        return Path(__file__).parent / "resources" / relative[len("package:"):]
    p = Path(relative)
    if p.is_absolute():
        return p
    root = data_root or os.environ.get("SEQLAB_DATA") or "data"
    return Path(root) / p
