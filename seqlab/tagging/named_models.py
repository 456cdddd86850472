"""Named models: ``seqlab predict en-ner FILE``, ``Tagger.load("en-ner")``.

A model argument that is not an existing file or folder, and looks like a name (letters, digits, ``.``, ``_``,
``-``; no path separator), is looked up as a folder of that name in each folder of ``$SEQLAB_MODELS`` (several
separated by ``os.pathsep``), then in the repository's ``models/`` folder (beside the ``seqlab`` package); the
first found wins. A name that is not found is one error line listing the known names (exit status 2). Nothing
is downloaded: a named model is a folder on this machine. :func:`resolve_model` is the one place this happens;
:meth:`seqlab.tagger.Tagger.load` calls it first, so every command that takes a model folder takes a name too.

A named model's folder holds the usual model files plus a model card: ``card.md`` (for people) and ``card.json``
(for ``seqlab models``), whose keys are (all optional; :data:`CARD_KEYS`)::

    {"name": "en-ner", "language": "en", "task": "ner",
     "description": "English NER, CoNLL-2003 types (PER, LOC, ORG, MISC)",
     "data": {"name": "CoNLL-2003 English", "terms": "..."},
     "recipe": {"config": "configs/ner-conll2003-bilstm-crf.yaml", "command": "seqlab train ..."},
     "scores": {"test": {"metric": "f1", "value": 91.0, "paper": 91.2, "paper_source": "..."}, "dev": {...}},
     "speed": {"batch_64_sentences_per_s": 2000.0, "batch_1_sentences_per_s": 600.0, "threads": 1, "machine": "...",
               "measured": "2026-11-26 12:00 UTC"},
     "size_bytes": 12345678, "weights_dtype": "float16",
     "weights_check": {"sentences": 4346, "tokens": 208066, "differ": 0, ...}}

``weights_dtype`` is float32, float16, or float16+float32 with ``float16_tensors`` naming those in float16 (they are
read back as float32); ``weights_check``: the test set on which the half-precision model's tags were checked against
the float32 model's (models/build.py).

``seqlab models`` lists each name with its language, task, test score (and the paper's) and size on disk (the
model files measured, not the card's word).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from seqlab.errors import SeqlabError

log = logging.getLogger("seqlab")

ENV = "SEQLAB_MODELS"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MODEL_FILES = ("config.json", "vocab.json", "model.safetensors")
CARD_KEYS = (
    "name",
    "language",
    "task",
    "description",
    "data",
    "recipe",
    "scores",
    "speed",
    "size_bytes",
    "weights_dtype",
    "float16_tensors",
    "weights_check",
)


def repository_models() -> Path:
    """The repository's ``models/`` folder (beside the package)."""
    return Path(__file__).resolve().parents[2] / "models"


def search_path() -> list[Path]:
    """Where names are looked up, in order: each folder of ``$SEQLAB_MODELS``, then the repository's models/."""
    env = os.environ.get(ENV, "")
    return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()] + [repository_models()]


def _is_model_folder(path: Path) -> bool:
    return path.is_dir() and all((path / n).is_file() for n in MODEL_FILES)


def find(name: str) -> Path | None:
    """The folder of the named model, or None."""
    if not NAME.fullmatch(name) or name in (".", ".."):
        return None
    for root in search_path():
        candidate = root / name
        if _is_model_folder(candidate):
            return candidate
    return None


@dataclass
class NamedModel:
    name: str
    path: Path
    card: dict  # card.json's contents ({} when missing)
    size_bytes: int  # the model files on disk
    card_error: str | None = None


def available() -> list[NamedModel]:
    """Every named model, the first of each name in search order, sorted by name."""
    seen: dict[str, NamedModel] = {}
    for root in search_path():
        if not root.is_dir():
            continue
        try:
            entries = sorted(root.iterdir())
        except OSError:
            continue
        for folder in entries:
            if folder.name in seen or not NAME.fullmatch(folder.name) or not _is_model_folder(folder):
                continue
            card, error = read_card(folder)
            size = sum((folder / n).stat().st_size for n in MODEL_FILES)
            seen[folder.name] = NamedModel(folder.name, folder, card, size, error)
    return [seen[k] for k in sorted(seen)]


def read_card(folder: Path) -> tuple[dict, str | None]:
    """(card.json's object, None), or ({}, why it could not be read); a missing card is ({}, None)."""
    path = folder / "card.json"
    if not path.is_file():
        return {}, None
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        return {}, f"card.json unreadable: {str(err).splitlines()[0][:120]}"
    if not isinstance(card, dict):
        return {}, "card.json is not a JSON object"
    return card, None


def resolve_model(model: str | os.PathLike) -> Path:
    """The path of a model argument: an existing file or folder as it is; else a model name's folder (see the
    module); else, for a path that a killed folder swap left aside, the path once put back
    (:func:`seqlab.io.files.recover_dir`). A name not found is a one-line :class:`SeqlabError` listing the known names;
    anything else that does not exist is returned as it is (the loader says so)."""
    path = Path(model)
    if path.exists():
        return path
    text = os.fspath(model)
    named = find(text)
    if named is not None:
        return named
    from seqlab.io.files import recover_dir

    note = recover_dir(path)
    if note:
        log.warning(note)
        return path
    if NAME.fullmatch(text) and not text.endswith(".zip"):
        names = [m.name for m in available()]
        where = " or ".join([f"${ENV}"] + [str(repository_models())])
        known = f"known names: {', '.join(names)}" if names else f"no named models are installed (in {where})"
        raise SeqlabError(f"no such model folder or model name '{text}' ({known})")
    return path


def _score(card: dict) -> str:
    test = (card.get("scores") or {}).get("test") if isinstance(card.get("scores"), dict) else None
    if not isinstance(test, dict) or not isinstance(test.get("value"), (int, float)):
        return "-"
    out = f"{test.get('metric', 'score')} {test['value']:.2f}"
    if isinstance(test.get("paper"), (int, float)):
        out += f" (paper {test['paper']:.2f})"
    return out


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def listing(models: list[NamedModel]) -> str:
    """``seqlab models``: one line per named model."""
    if not models:
        return (
            f"no named models (looked in {', '.join(str(p) for p in search_path())}; set ${ENV} to a folder "
            f"of model folders)\n"
        )
    rows = [("NAME", "LANGUAGE", "TASK", "TEST", "SIZE", "FOLDER")]
    for m in models:
        rows.append(
            (
                m.name,
                str(m.card.get("language", "-")),
                str(m.card.get("task", "-")),
                m.card_error or _score(m.card),
                _size(m.size_bytes),
                str(m.path),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n" for r in rows)


def as_json(models: list[NamedModel]) -> list[dict]:
    return [
        {
            "name": m.name,
            "path": str(m.path),
            "size_bytes": m.size_bytes,
            "card": m.card,
            **({"card_error": m.card_error} if m.card_error else {}),
        }
        for m in models
    ]


__all__ = ["ENV", "available", "find", "listing", "read_card", "repository_models", "resolve_model", "search_path"]
