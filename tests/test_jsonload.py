"""User JSON (a model's config.json and vocab.json) is read with a nesting limit: a deep document is a one-line
error, never a RecursionError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlab.io import jsonload
from seqlab.io.jsonload import MAX_DEPTH, NestingError

JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=5), kids, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=100, deadline=None)
@given(JSON)
def test_documents_within_the_limit_load_as_json_loads(doc):
    text = json.dumps(doc)
    assert jsonload.loads(text) == json.loads(text)
    assert jsonload.loads(text.encode("utf-8")) == json.loads(text)


@pytest.mark.parametrize("depth", [1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 5000, 200_000])
@pytest.mark.parametrize("open_, close", [("[", "]"), ('{"a": ', "}")])
def test_nesting_limit(depth, open_, close):
    text = open_ * depth + "1" + close * depth
    if depth <= MAX_DEPTH:
        assert jsonload.depth(jsonload.loads(text)) == depth
    else:
        with pytest.raises(NestingError, match=f"nested deeper than {MAX_DEPTH} levels"):
            jsonload.loads(text)


def test_depth_of_scalars_and_flat_containers():
    assert jsonload.depth(3) == 0 and jsonload.depth([]) == 1 and jsonload.depth({"a": [1, {"b": []}]}) == 4
