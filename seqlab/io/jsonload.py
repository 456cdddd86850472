"""Reading JSON that users hand over (the JSON files of a model folder or archive) with a nesting limit.

``json.loads`` recurses once per level and ends a deep document in a ``RecursionError``; whatever walks the
result afterwards (validation, migration, deep copies) recurses too. :func:`loads` refuses a document nested
deeper than :data:`MAX_DEPTH` levels with a :class:`NestingError`, a ``ValueError`` with a one-line message.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # a model's config.json is 7 levels deep


class NestingError(ValueError):
    """A JSON document nested deeper than the limit."""


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Levels of arrays and objects in ``value`` (a scalar: 0), counted without recursion; the count stops
    early at ``limit + 1``."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    stack: list[tuple[dict | list, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            break
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def loads(data: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)``, refusing a document nested deeper than ``max_depth`` levels with a
    :class:`NestingError` (other defects raise ``json.JSONDecodeError`` / ``UnicodeDecodeError`` as before)."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise NestingError(f"nested deeper than {max_depth} levels") from None
    if depth(value, max_depth) > max_depth:
        raise NestingError(f"nested deeper than {max_depth} levels")
    return value
