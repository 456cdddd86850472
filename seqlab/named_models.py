"""Deprecated import path, kept for one release: use :mod:`seqlab.tagging.named_models`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.tagging.named_models import (
    CARD_KEYS,
    ENV,
    MODEL_FILES,
    NAME,
    NamedModel,
    as_json,
    available,
    find,
    listing,
    read_card,
    repository_models,
    resolve_model,
    search_path,
)

__all__ = [
    "CARD_KEYS",
    "ENV",
    "MODEL_FILES",
    "NAME",
    "NamedModel",
    "as_json",
    "available",
    "find",
    "listing",
    "read_card",
    "repository_models",
    "resolve_model",
    "search_path",
]
