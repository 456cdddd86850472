"""The YAML loader of configs and ``--set`` values: what ``yaml.safe_load`` reads, less duplicated keys, deep
nesting and alias bombs, each refused as a YAML error with its line (one ``error:`` line on the command line)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from seqlab.config import load_config
from seqlab.errors import SeqlabError
from seqlab.io.yamlload import MAX_DEPTH, MAX_NODES, load_yaml

KEY = st.from_regex(r"[a-z][a-z_]{0,5}", fullmatch=True)
LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=False), st.text(max_size=10)
)
TREE = st.recursive(
    LEAF, lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(KEY, kids, max_size=4)), max_leaves=20
)
PLAIN_KEY = st.from_regex(r"k[a-z_]{0,5}", fullmatch=True)  # never read as a bool or null when unquoted
MAPPINGS = st.recursive(
    st.integers(0, 9), lambda kids: st.dictionaries(PLAIN_KEY, kids, min_size=1, max_size=4), max_leaves=15
).filter(lambda tree: isinstance(tree, dict))


@settings(max_examples=150, deadline=None)
@given(TREE, st.sampled_from([False, True]))
def test_valid_documents_load_as_safe_load(tree, flow):
    text = yaml.safe_dump(tree, default_flow_style=flow, allow_unicode=True)
    assert load_yaml(text) == yaml.safe_load(text)


def render(
    tree: dict, duplicate: tuple[str, ...], path: tuple[str, ...] = (), indent: int = 0, lines: list[str] | None = None
) -> tuple[list[str], tuple[int, int] | None]:
    """``tree`` as block YAML; the mapping at ``duplicate`` gets its first key once more at its end. Returns the
    lines and the (1-based) lines of that key's two occurrences."""
    lines = [] if lines is None else lines
    where = None
    first_line = len(lines) + 1
    for key, value in tree.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"{key}:")
            _, inner = render(value, duplicate, (*path, key), indent + 2, lines)
            where = where or inner
        else:
            lines.append(" " * indent + f"{key}: {value}")
    if path == duplicate:
        lines.append(" " * indent + f"{next(iter(tree))}: 0")
        where = (first_line, len(lines))
    return lines, where


def mapping_paths(tree: dict, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    return [path] + [
        p for key, value in tree.items() if isinstance(value, dict) for p in mapping_paths(value, (*path, key))
    ]


@settings(max_examples=150, deadline=None)
@given(MAPPINGS, st.data())
def test_a_duplicated_key_at_any_depth_is_refused_naming_both_lines(tree, data):
    target = data.draw(st.sampled_from(mapping_paths(tree)))
    lines, (first, second) = render(tree, target)
    node = tree
    for key in target:
        node = node[key]
    with pytest.raises(yaml.YAMLError) as err:
        load_yaml("\n".join(lines) + "\n")
    assert f"duplicated key {next(iter(node))!r} (lines {first} and {second})" in err.value.problem
    assert err.value.problem_mark.line + 1 == second


STYLES = ["flow-list", "flow-map", "block-map", "block-list"]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3 * MAX_DEPTH), st.sampled_from(STYLES))
@example(MAX_DEPTH, "flow-map")
@example(MAX_DEPTH + 1, "flow-map")
@example(MAX_DEPTH, "block-map")
@example(MAX_DEPTH + 1, "block-map")
@example(MAX_DEPTH, "block-list")
@example(MAX_DEPTH + 1, "flow-list")
def test_nesting_beyond_the_limit_is_refused(depth, style):
    """``depth`` sequences or mappings, one inside the other: at most MAX_DEPTH load as safe_load loads them."""
    if style == "flow-list":
        text = "[" * depth + "]" * depth
    elif style == "flow-map":
        text = "{a: " * depth + "1" + "}" * depth
    elif style == "block-map":
        text = "".join(" " * i + "a:\n" for i in range(depth - 1)) + " " * (depth - 1) + "a: 1\n"
    else:
        text = "".join(" " * (2 * i) + "-\n" for i in range(depth - 1)) + " " * (2 * depth - 2) + "- 1\n"
    if depth <= MAX_DEPTH:
        assert load_yaml(text) == yaml.safe_load(text)
    else:
        with pytest.raises(yaml.YAMLError, match=f"nested deeper than {MAX_DEPTH} levels"):
            load_yaml(text)


def test_very_deep_nesting_is_refused_without_a_recursion_error():
    with pytest.raises(yaml.YAMLError, match="nested deeper"):
        load_yaml("a: " + "[" * 100_000 + "]" * 100_000)


def test_alias_bomb_and_recursive_alias_are_refused_and_small_aliases_load():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    with pytest.raises(yaml.YAMLError, match=f"more than {MAX_NODES} values once the aliases are expanded"):
        load_yaml(bomb)
    with pytest.raises(yaml.YAMLError, match="contains it"):
        load_yaml("a: &a [1, *a]\n")
    text = "base: &b {lr: 0.1, clip: 5}\ntrain:\n  <<: *b\n  lr: 0.2\nother: [*b, *b]\n"
    assert load_yaml(text) == yaml.safe_load(text)  # a merge key may be overridden: not a duplicate


def test_load_config_names_the_file_key_and_lines(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: ner\ntrain:\n  lr: 0.1\ndata:\n  train: a.txt\ntrain:\n  optimizer: adam\n")
    with pytest.raises(SeqlabError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:6: invalid YAML: duplicated key 'train' (lines 2 and 6)")
    deep = tmp_path / "deep.yaml"
    deep.write_text("data: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SeqlabError, match=f"{deep}:1: invalid YAML: nested deeper than {MAX_DEPTH} levels"):
        load_config(deep)
    ok = tmp_path / "ok.yaml"
    ok.write_text("data:\n  train: a.txt\n")
    with pytest.raises(SeqlabError, match="--set train.lr: the value is not valid YAML"):
        load_config(ok, ["train.lr=" + "[" * 1000 + "]" * 1000])
