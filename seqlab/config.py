"""Typed, validated configuration.

A YAML file maps one-to-one onto :class:`ExperimentConfig`. Unknown keys and wrong types are
errors that name the offending key. Every default carries a one-line reason.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from seqlab.data.batching import TOKENS
from seqlab.decoders import DECODERS, CRFDecoderConfig
from seqlab.encoders import ENCODERS, BiLSTMConfig
from seqlab.errors import SeqlabError
from seqlab.features import FEATURES, CasingConfig, CharsConfig, WordsConfig
from seqlab.features.embedder import RESERVED
from seqlab.io.yamlload import load_yaml
from seqlab.registry import ConfigCheckError, LayerConfig, check_error

FEATURE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
RESERVED_FEATURE_NAMES = RESERVED | {TOKENS}  # Embedder attributes, and train.batch_length's default


class DataConfig(LayerConfig):
    format: Literal["conll", "bmes", "jsonl"] = Field(
        "conll",
        description="column file; bmes = one char per line; jsonl = text with character-offset spans "
        "(doccano, Label Studio, spaCy JSONL; a .spacy file is a DocBin): seqlab.data.annotations",
    )
    tokenizer: Literal["whitespace", "english", "chars"] | None = Field(
        None,
        description="how raw text is cut into tokens (jsonl data, and text the model tags; seqlab.data.tokenization); "
        "None: chars for bmes data, whitespace for the rest",
    )
    train: str = Field(..., description="training file, relative to the data root")
    dev: str | None = Field(None, description="dev file; None holds out dev_from_train sentences")
    test: str | None = Field(None, description="test file, scored after training with the best checkpoint")
    token_column: int = Field(0, ge=-64, le=64, description="CoNLL files keep the token first")
    label_column: int = Field(-1, ge=-64, le=64, description="CoNLL files keep the label last")
    scheme: Literal["auto", "IOB1", "BIO", "BIOES", "BMES", "none"] = Field(
        "auto", description="scheme of the files; 'none' for plain labels such as POS; auto detects it"
    )
    train_scheme: Literal["BIOES", "BIO", "IOB1", "BMES", "same"] = Field(
        "BIOES", description="the papers train in BIOES; predictions are written back in the input scheme"
    )
    dev_from_train: int = Field(
        1000, ge=0, le=10_000_000, description="CoNLL-2000 has no dev set; the papers hold out 1000"
    )
    dev_seed: int = Field(1, ge=0, le=2**32 - 1, description="fixed so every model sees the same held-out sentences")
    strip_seg_digit: bool = Field(False, description="Weibo NER characters carry a segmentation digit")
    max_train_sentences: int | None = Field(None, gt=0, le=100_000_000, description="cap for quick runs and demos")


def _default_features() -> dict:
    return {"word": WordsConfig(), "char": CharsConfig(), "casing": CasingConfig()}


class EmbedderConfig(LayerConfig):
    features: dict[str, FEATURES.field] = Field(  # type: ignore[name-defined]
        default_factory=_default_features,
        description="name -> featurizer config, concatenated in this order; a null value drops a feature",
    )
    dropout: float = Field(0.5, ge=0.0, lt=1.0, description="on the concatenated input representation")

    @field_validator("features", mode="before")
    @classmethod
    def _drop_nulls(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value

    @field_validator("features")
    @classmethod
    def _names(cls, value: dict) -> dict:
        if not value:
            raise ValueError("a model needs at least one input feature")
        for name in value:
            if not FEATURE_NAME.match(name) or name in RESERVED_FEATURE_NAMES:
                raise ValueError(
                    f"feature name {name!r}: use lower-case letters, digits and '_' "
                    f"(not {', '.join(sorted(RESERVED_FEATURE_NAMES))})"
                )
        return value

    def output_dim(self) -> int:
        return sum(f.output_dim() for f in self.features.values())

    def published_sizes(self) -> dict[str, int]:
        """Feature name -> last dimension of the tensor its module publishes (lattice word embeddings)."""
        return {name: f.published_dim() for name, f in self.features.items() if f.published_dim() is not None}


class ModelConfig(LayerConfig):
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig, description="word + char + casing")
    encoders: list[ENCODERS.field] = Field(  # type: ignore[name-defined]
        default_factory=lambda: [BiLSTMConfig()], max_length=64, description="the BiLSTM-CRF baseline"
    )
    decoder: DECODERS.field = Field(  # type: ignore[name-defined]
        default_factory=CRFDecoderConfig, description="linear-chain CRF"
    )

    @model_validator(mode="after")
    def _stack_builds(self) -> ModelConfig:
        """Walk the sizes through the stack, so a config that validates also builds."""
        try:
            dim = self.embedder.output_dim()
            if dim <= 0:
                raise ConfigCheckError("embedder.features", "the features give no vector to the encoders")
            published = self.embedder.published_sizes()
            for i, layer in enumerate(self.encoders):
                try:
                    layer.check(dim, published)
                    published.update(layer.published_sizes(dim))
                    dim = layer.output_dim(dim)
                except ConfigCheckError as err:
                    raise err.within(f"encoders.{i}") from None
            try:
                self.decoder.check(dim, published)
            except ConfigCheckError as err:
                raise err.within("decoder") from None
        except ConfigCheckError as err:
            raise check_error(err) from None
        return self


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
#: The longest budget accepted: 30 days.
MAX_BUDGET_S = 30 * 86400.0


def parse_duration(text: str | float | int) -> float:
    """``"45m"`` -> 2700.0 seconds; ``s``, ``m`` or ``h`` after a number, or a bare number of seconds.
    ValueError for anything else, or for a duration outside (0, 30 days]."""
    if isinstance(text, bool):
        raise ValueError("expected a duration such as 90s, 45m or 2.5h")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text))
        if not match:
            raise ValueError(f"'{text}' is not a duration: expected a number with s, m or h, such as 90s, 45m or 2.5h")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
    if not 0 < seconds <= MAX_BUDGET_S:
        raise ValueError(f"a budget must be more than 0 s and at most 30 days, got {text}")
    return seconds


class TrainConfig(LayerConfig):
    optimizer: Literal["sgd", "adam", "adamw", "nadam"] = Field(
        "sgd", description="SGD with momentum, as the papers; adamw: Adam with decoupled weight_decay"
    )
    lr: float = Field(0.015, gt=0, le=100, description="PSA paper: 0.015 for NER and chunking")
    momentum: float = Field(0.9, ge=0, lt=1, description="PSA paper")
    lr_decay: float = Field(0.05, ge=0, le=100, description="inverse_time: rho in lr_t = lr_0 / (1 + rho * t)")
    lr_schedule: Literal["inverse_time", "step_halving", "linear", "cosine"] = Field(
        "inverse_time",
        description="inverse_time: lr_0 / (1 + lr_decay * epochs done), set once per epoch (the "
        "PSA paper); step_halving: lr_0 for lr_hold_steps optimiser steps, then halved "
        "every lr_half_life_steps, never below lr_min, set every step (GCDT's code); "
        "linear / cosine: from lr_0 down to lr_min at the run's end (of the budget, or "
        "of max_epochs), set every step",
    )
    lr_hold_steps: int = Field(1000, ge=0, le=1_000_000_000, description="step_halving: steps at lr_0 first")
    lr_half_life_steps: int = Field(
        3000, gt=0, le=1_000_000_000, description="step_halving: steps over which the rate halves"
    )
    lr_min: float = Field(
        0.0,
        ge=0,
        le=100,
        description="step_halving: the rate's floor (GCDT's code: 5e-6); linear / cosine: the rate at the run's end",
    )
    adam_eps: float = Field(1e-8, gt=0, le=1, description="adam / nadam epsilon (PyTorch's 1e-8; GCDT's code: 1e-6)")
    warmup_epochs: float = Field(
        0.0,
        ge=0,
        le=10_000,
        description="linear warm-up of the learning rate over this many epochs, step by step (FLAT: 10)",
    )
    warmup_fraction: float = Field(
        0.0,
        ge=0,
        le=0.5,
        description="linear warm-up over this share of the run (of the budget, or of max_epochs), step by step",
    )
    budget: str | None = Field(
        None,
        description="wall-clock time of the whole run, such as 90s, 45m or 2.5h: the "
        "schedule's progress is the clock's, dev is scored budget_evals "
        "times, patience is not applied, and training stops in time for "
        "the test scoring to end inside it; max_epochs still bounds it",
    )
    budget_evals: int = Field(
        20,
        ge=1,
        le=10_000,
        description="dev scorings over a budgeted run (fewer where one "
        "would take over a tenth of the time between two)",
    )
    max_length: int | None = Field(
        None,
        gt=0,
        le=10_000_000,
        description="training sentences longer than this "
        "many tokens are split into pieces (at punctuation and chunk boundaries)",
    )
    weight_decay: float = Field(0.0, ge=0, le=10, description="off, as the papers")
    clip: float | None = Field(5.0, gt=0, le=1e6, description="gradient norm threshold of the PSA paper")
    batch_size: int = Field(10, gt=0, le=100_000, description="the papers' batch of 10 sentences")
    batch_tokens: int | None = Field(
        None, gt=0, le=100_000_000, description="if set, batches hold about this many tokens"
    )
    batch_length: str = Field(
        "tokens",
        description="what batch_tokens counts: 'tokens', or the name of a feature that reports a "
        "length of its own (lattice positions, sub-words)",
    )
    eval_batch_size: int = Field(128, gt=0, le=100_000, description="inference is cheap; large batches are fastest")
    max_epochs: int = Field(50, gt=0, le=100_000, description="long enough for early stopping to decide")
    patience: int = Field(10, ge=1, le=100_000, description="epochs without dev improvement before stopping")
    ema_decay: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="if set, dev scoring and the saved model use an exponential moving "
        "average of the weights with this per-step decay (e.g. 0.999)",
    )
    loss_reduction: Literal["sum", "mean"] = Field(
        "mean", description="Ma and Hovy average the batch loss; with momentum 0.9, a sum is a 10x larger step"
    )
    seed: int = Field(1, ge=0, le=2**32 - 1, description="one seed makes a run repeatable")
    threads: int | None = Field(None, gt=0, le=1024, description="torch intra-op threads; None = all cores")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when PyTorch sees a GPU, else CPU")
    deterministic: bool = Field(
        False,
        description="bit-identical runs and resumes on a GPU too: PyTorch's deterministic algorithms "
        "(slower there; an operation without one is an error). On CPU training is "
        "deterministic either way",
    )

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if value is None:
            return None
        parse_duration(value)  # ValueError names what a duration looks like
        return str(value)

    @property
    def budget_seconds(self) -> float | None:
        return None if self.budget is None else parse_duration(self.budget)

    @property
    def per_step_rate(self) -> bool:
        """Whether the learning rate is set at every step (else once per epoch)."""
        return self.lr_schedule != "inverse_time" or bool(self.warmup_fraction)

    @model_validator(mode="after")
    def _schedule_keys(self) -> TrainConfig:
        """A rate key of another schedule, given a value of its own, would be silently ignored: refused."""
        unused = {
            "inverse_time": ("lr_hold_steps", "lr_half_life_steps", "lr_min"),
            "step_halving": ("lr_decay",),
            "linear": ("lr_decay", "lr_hold_steps", "lr_half_life_steps"),
            "cosine": ("lr_decay", "lr_hold_steps", "lr_half_life_steps"),
        }[self.lr_schedule]
        for key in unused:
            default = type(self).model_fields[key].default
            if getattr(self, key) != default:
                raise check_error(
                    ConfigCheckError(
                        key,
                        f"is not used by lr_schedule '{self.lr_schedule}': leave it out of the config "
                        f"(or --set train.{key}={default}, its default)",
                    )
                )
        return self


class ExperimentConfig(LayerConfig):
    task: Literal["ner", "chunking", "pos", "tagging"] = Field("tagging", description="picks the dev metric")
    data: DataConfig
    model: ModelConfig = Field(default_factory=ModelConfig, description="embedder -> encoders -> decoder")
    train: TrainConfig = Field(default_factory=TrainConfig, description="PSA paper's optimisation setting")

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentConfig:
        length = self.train.batch_length
        if length != "tokens" and length not in self.model.embedder.features:
            raise check_error(
                ConfigCheckError(
                    "train.batch_length", f"'{length}' is neither 'tokens' nor a feature of model.embedder.features"
                )
            )
        return self

    @property
    def metric(self) -> str:
        """Span F1 for span tasks, token accuracy for POS and plain labels."""
        return "accuracy" if self.task == "pos" or self.data.scheme == "none" else "f1"


def _format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    parts = [str(p) for p in first["loc"]]
    msg = first["msg"]
    if first["type"] == "config_check":  # raised by a model validator: the key is relative to it
        parts.append(first["ctx"]["key"])
        msg = first["ctx"]["message"]
    elif first["type"] == "extra_forbidden":
        msg = "unknown config key"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return f"{source}: config key '{'.'.join(parts)}': {msg}"


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
        try:
            parsed = load_yaml(value)
        except yaml.YAMLError:
            raise SeqlabError(f"--set {key.strip()}: the value is not valid YAML: '{value}'") from None
        out.append((key.strip(), parsed))
    return out


def config_from_dict(raw: dict, source: str = "<dict>") -> ExperimentConfig:
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as err:
        raise SeqlabError(_format_validation_error(err, source)) from None


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read and validate a YAML config; ``overrides`` are ``key=value`` strings with dotted keys.

    A config may start from another: ``extends: base.yaml`` (relative to the file) takes that file's settings and
    replaces, section by section, those this file gives (mappings merge key by key; lists and values replace). The
    papers' own recipes are such files under ``configs/paper/``."""
    raw = _read_config(Path(path), [])
    for key, value in parse_overrides(overrides or []):
        try:
            _set_dotted(raw, key, value)
        except (ValueError, IndexError, TypeError, AttributeError):
            raise SeqlabError(f"--set: cannot set config key '{key}'") from None
    return config_from_dict(raw, str(path))


#: How many files a chain of ``extends`` may hold.
MAX_EXTENDS = 8


def _read_config(path: Path, chain: list[Path]) -> dict:
    """One config file as a mapping, with what it extends merged under it."""
    if not path.is_file():
        raise SeqlabError(
            "no such config file" if not chain else f"no such config file (extended by {chain[-1]})", path=path
        )
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SeqlabError("config is not UTF-8 text", path=path) from None
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        raise SeqlabError(
            f"invalid YAML: {getattr(err, 'problem', err)}", path=path, line=None if line is None else line + 1
        ) from None
    if not isinstance(raw, dict):
        raise SeqlabError("a config file must be a YAML mapping", path=path)
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise SeqlabError("config key 'extends': expected the path of another config file", path=path)
    chain = [*chain, path.resolve()]
    parent = (path.parent / base).resolve()
    if parent in chain:
        raise SeqlabError(f"config key 'extends': {base} extends this file again (a loop)", path=path)
    if len(chain) >= MAX_EXTENDS:
        raise SeqlabError(f"config key 'extends': more than {MAX_EXTENDS} files in the chain", path=path)
    return _merged(_read_config(parent, chain), raw)


def _merged(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def resolve_data_path(relative: str, data_root: str | os.PathLike | None) -> Path:
    """Data paths in configs are relative to --data-root, else $SEQLAB_DATA, else ./data.
    The prefix ``package:`` points into the bundled resources."""
    if relative.startswith("package:"):
        return Path(__file__).parent / "resources" / relative[len("package:") :]
    p = Path(relative)
    if p.is_absolute():
        return p
    root = data_root or os.environ.get("SEQLAB_DATA") or "data"
    return Path(root) / p
