"""Reading the YAML that users write (config files, ``--set`` values): PyYAML's safe loader, plus three refusals.

* A key given twice in one mapping: PyYAML keeps the last one, so a second ``train:`` section would silently
  replace the first. Refused, naming the key and both lines (a ``<<`` merge may still be overridden).
* Sequences and mappings nested deeper than :data:`MAX_DEPTH`: PyYAML composes nodes recursively, so a deep document
  would end in a ``RecursionError``. Refused at the line where it goes too deep.
* Aliases that expand to more than :data:`MAX_NODES` nodes (a "billion laughs" document) or that contain
  themselves: whatever reads the result would walk every copy. Refused before anything is built.

Every refusal is a ``yaml.MarkedYAMLError`` whose ``problem`` is one line and whose ``problem_mark`` is the place
(0-based line), so callers report it as they report any YAML syntax error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_DEPTH = 64  # a config is 6 levels deep; far below Python's recursion limit
MAX_NODES = 100_000  # values (nodes) of the document, every alias expanded; a config has a few hundred
_MERGE = "tag:yaml.org,2002:merge"


class UserYamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicated keys, deep nesting and alias bombs (see the module)."""

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        """Count the nested sequences and mappings on the way down; refuse one below :data:`MAX_DEPTH` others."""
        if not self.check_event(SequenceStartEvent, MappingStartEvent):
            return super().compose_node(parent, index)  # a scalar or an alias: no deeper
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node:
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            self._refuse_duplicates(node)
        return super().construct_mapping(node, deep)

    def _refuse_duplicates(self, node: MappingNode) -> None:
        """Raise at the second occurrence of a scalar key, naming both lines."""
        seen: dict[Any, ScalarNode] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the constructor refuses it itself
                continue
            if first is not key_node:
                lines = f"lines {first.start_mark.line + 1} and {key_node.start_mark.line + 1}"
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicated key {key!r} ({lines}): the second would silently replace the first",
                    key_node.start_mark,
                )


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Node | None) -> None:
    """Refuse a node graph whose aliases expand to more than :data:`MAX_NODES` nodes, or contain themselves.
    Iterative (depth-first, post-order), each node sized once."""
    if root is None:
        return
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the path from the root: meeting one again is a cycle
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_NODES:
                raise ComposerError(
                    None, None, f"more than {MAX_NODES} values once the aliases are expanded", node.start_mark
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise ComposerError(None, None, "an alias refers to a node that contains it", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def load_yaml(text: str) -> Any:
    """Parse one YAML document as :func:`yaml.safe_load` does, with the refusals of :class:`UserYamlLoader`
    (raised as ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=UserYamlLoader)  # a SafeLoader subclass
