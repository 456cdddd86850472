"""Property-based fuzzing of everything seqlab reads from disk: data readers, the config loader and the model
loader. Whatever the input, the only exception that may escape is the project's own :class:`SeqlabError`
(one line, exit code 2 on the command line); a model that loads must also tag. Example counts are bounded so
the file runs in seconds."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqlab import Tagger
from seqlab.config import config_from_dict, load_config
from seqlab.data.readers import read_bmes, read_chars_with_seg_digits, read_conll, read_raw
from seqlab.errors import SeqlabError
from tests.conftest import tiny_config

SCALE = float(os.environ.get("SEQLAB_FUZZ_SCALE", "1"))  # e.g. 20 for a deeper search than make test's


def bounded(examples: int) -> settings:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


FAST = bounded(60)

# text that looks like column files: tokens, labels, blank lines, tabs, odd characters
TOKEN = st.sampled_from(
    [
        "the",
        "NN",
        "B-NP",
        "I-NP",
        "O",
        "E-X",
        "S-PER",
        "M-ORG",
        "-DOCSTART-",
        "#",
        "3",
        "北",
        "京",
        "\t",
        " ",
        "",
        "B-",
        "I",
        "x" * 300,
        "\ufeff",
        "\x00",
        "é",
        "\u2028",
    ]
)
LINE = st.lists(TOKEN, max_size=5).map(" ".join)
COLUMN_TEXT = st.lists(LINE, max_size=30).map("\n".join)


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    return path


def only_seqlab_errors(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except SeqlabError as err:
        assert "\n" not in str(err)
        return None


@FAST
@given(text=st.one_of(COLUMN_TEXT, st.text(max_size=400)), raw=st.binary(max_size=200), label_column=st.integers(-4, 4))
def test_readers_raise_only_seqlab_errors(tmp_path, text, raw, label_column):
    for data in (text, raw):
        path = write(tmp_path, "data.txt", data)
        for sentences in (
            only_seqlab_errors(read_conll, path, label_column=label_column),
            only_seqlab_errors(read_conll, path, label_column=None),
            only_seqlab_errors(read_bmes, path),
            only_seqlab_errors(read_chars_with_seg_digits, path),
            only_seqlab_errors(read_raw, path),
            only_seqlab_errors(read_raw, path, chars=True),
        ):
            for s in sentences or []:
                assert s.tokens and all(isinstance(t, str) and t for t in s.tokens)
                assert s.labels is None or len(s.labels) == len(s.tokens)


# YAML documents: random JSON-like trees, and random edits of a real config
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.floats(allow_nan=True), st.text(max_size=12)
)
JSON = st.recursive(
    JSON_LEAF,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
    max_leaves=12,
)
PATHS = [
    "task",
    "data",
    "data.format",
    "data.train",
    "data.scheme",
    "data.label_column",
    "model",
    "model.embedder",
    "model.embedder.features",
    "model.embedder.features.word",
    "model.embedder.features.word.dim",
    "model.embedder.features.char.type",
    "model.encoders",
    "model.encoders.0",
    "model.encoders.0.hidden",
    "model.encoders.0.type",
    "model.decoder",
    "model.decoder.type",
    "train",
    "train.lr",
    "train.batch_size",
    "train.optimizer",
    "train.batch_length",
]


def set_path(tree, dotted: str, value) -> None:
    """Put ``value`` at a dotted path where the path still exists (earlier edits may have replaced it)."""
    node = tree
    keys = dotted.split(".")
    for key in keys[:-1]:
        if isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        elif isinstance(node, dict) and isinstance(node.get(key), (dict, list)):
            node = node[key]
        else:
            return
    last = keys[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value


@FAST
@given(doc=JSON, text=st.text(max_size=300))
def test_config_loader_on_arbitrary_documents(tmp_path, doc, text):
    for content in (yaml.safe_dump(doc, allow_unicode=True), text):
        path = write(tmp_path, "c.yaml", content)
        only_seqlab_errors(load_config, path)
    only_seqlab_errors(config_from_dict, doc)


@FAST
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), JSON), min_size=1, max_size=3))
def test_config_loader_on_edited_real_configs(tmp_path, edits):
    raw = tiny_config(tmp_path / "t.txt").model_dump(mode="json")
    for path, value in edits:
        set_path(raw, path, value)
    cfg = only_seqlab_errors(config_from_dict, raw)
    if cfg is not None:  # a config that validates also builds (sizes walked at load time)
        from seqlab.decoders import TagSet
        from seqlab.tagging.network import TaggerNet

        feats = {name: fc.build(name) for name, fc in cfg.model.embedder.features.items()}
        for f in feats.values():
            if hasattr(f, "vocab"):
                f.load_state({"itos": ["<pad>", "<unk>", "a"]}, "fuzz")
        TaggerNet(cfg.model, feats, TagSet(["O", "B-NP", "I-NP", "E-NP", "S-NP"], "BIOES"))


@pytest.fixture(scope="module")
def tiny_model(shared_tiny_model) -> Path:
    return shared_tiny_model[1]


def json_paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from json_paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            yield from json_paths(v, (*prefix, i))


def replace_at(node, path, value):
    if not path:
        return value
    node[path[0]] = replace_at(node[path[0]], path[1:], value)
    return node


@bounded(80)
@given(data=st.data())
def test_model_loader_on_tampered_json(tiny_model, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("tampered")
    shutil.copytree(tiny_model, folder, dirs_exist_ok=True)
    name = data.draw(st.sampled_from(["config.json", "vocab.json"]))
    doc = json.loads((folder / name).read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(list(json_paths(doc))))
    doc = replace_at(doc, path, data.draw(JSON))
    (folder / name).write_text(json.dumps(doc), encoding="utf-8")
    tagger = only_seqlab_errors(Tagger.load, folder)
    if tagger is not None:
        preds = tagger.predict(["Confidence in the pound is widely expected to take another sharp dive ."])
        assert len(preds[0].tags) == 13


@bounded(40)
@given(cut=st.integers(0, 10_000), flips=st.lists(st.integers(0, 10**7), max_size=4), text=st.binary(max_size=50))
def test_model_loader_on_corrupt_files(tiny_model, tmp_path_factory, cut, flips, text):
    folder = tmp_path_factory.mktemp("corrupt")
    shutil.copytree(tiny_model, folder, dirs_exist_ok=True)
    weights = bytearray((folder / "model.safetensors").read_bytes())
    for pos in flips:  # bit flips anywhere: header, tensor data
        weights[pos % len(weights)] ^= 0xFF
    (folder / "model.safetensors").write_bytes(bytes(weights[: len(weights) - cut % len(weights)]))
    tagger = only_seqlab_errors(Tagger.load, folder)
    if tagger is not None:
        tagger.predict(["The dollar fell ."])
    (folder / "config.json").write_bytes(text)  # a config.json that is not JSON, or not UTF-8
    only_seqlab_errors(Tagger.load, folder)
