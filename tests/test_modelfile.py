"""Model folders: format-1 folders (before featurizers) load and predict the same tags; defects in any of
the three files are one-line errors naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from seqlab import Tagger
from seqlab.data.readers import read_conll
from seqlab.errors import SeqlabError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
V1 = ["model-v1-crf", "model-v1-psa-softmax"]


@pytest.mark.parametrize("name", V1)
def test_format_1_model_predicts_what_it_predicted_when_saved(name, tmp_path):
    """The fixtures were trained and saved by seqlab before Stack v2 (commit 4a1fcf5), with the tags
    that code predicted; the migrated model must predict exactly those."""
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    tagger = Tagger.load(FIXTURES / name)
    sentences = read_conll(FIXTURES / "tiny-chunking.txt", label_column=None)
    assert tagger.predict_tags(sentences) == expected["tiny-chunking"]
    raw = "He reckons the current account deficit will narrow to only 1.8 billion ."
    assert tagger.predict([raw])[0].tags == expected["raw"]
    tagger.save(tmp_path / "v2")  # re-saved in the current format, still the same tags
    assert json.loads((tmp_path / "v2" / "config.json").read_text())["format_version"] == 2
    assert Tagger.load(tmp_path / "v2").predict_tags(sentences) == expected["tiny-chunking"]


@pytest.fixture
def model_copy(tmp_path) -> Path:
    dst = tmp_path / "model"
    shutil.copytree(FIXTURES / "model-v1-crf", dst)
    Tagger.load(dst).save(dst)  # format 2
    return dst


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(edit(data)))


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda m: {**m, "format_version": 99}, "model format 99; this seqlab reads formats 1, 2"),
        (lambda m: [m], "config.json: expected a JSON object"),
        (lambda m: {k: v for k, v in m.items() if k != "scheme"}, "'scheme' must be"),
        (lambda m: {**m, "config": "x"}, "'config' must be an object"),
        (
            lambda m: {**m, "config": {**m["config"], "model": {**m["config"]["model"], "decoder": {"type": "gcdt"}}}},
            "config key 'model.decoder': unknown decoder type 'gcdt'",
        ),
    ],
)
def test_bad_config_json(model_copy, edit, needle):
    _edit_json(model_copy / "config.json", edit)
    with pytest.raises(SeqlabError, match=needle.replace("(", r"\(").replace(")", r"\)")) as err:
        Tagger.load(model_copy)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda v: {**v, "tags": [1, 2]}, "'tags' must be a list of distinct strings"),
        (lambda v: {**v, "features": None}, "'features' must be an object"),
        (
            lambda v: {**v, "features": {k: s for k, s in v["features"].items() if k != "char"}},
            "no state for feature 'char'",
        ),
        (lambda v: {**v, "features": {**v["features"], "word": {"itos": None}}}, "features.word.itos: expected a list"),
        (lambda v: {**v, "features": {**v["features"], "casing": {"classes": ["x"]}}}, "casing classes differ"),
    ],
)
def test_bad_vocab_json(model_copy, edit, needle):
    _edit_json(model_copy / "vocab.json", edit)
    with pytest.raises(SeqlabError, match=needle):
        Tagger.load(model_copy)


def test_bad_weights(model_copy):
    path = model_copy / "model.safetensors"
    weights = load_file(str(path))
    weights["decoder.crf.transitions"][0, 0] = float("nan")
    save_file(weights, str(path))
    with pytest.raises(SeqlabError, match="'decoder.crf.transitions' holds NaN"):
        Tagger.load(model_copy)
    weights["decoder.crf.transitions"] = torch.zeros(3, 3)
    save_file(weights, str(path))
    with pytest.raises(SeqlabError, match="does not fit the config"):
        Tagger.load(model_copy)
    path.write_bytes(b"\x00" * 20)
    with pytest.raises(SeqlabError, match="model.safetensors: corrupt weights"):
        Tagger.load(model_copy)


def test_cuda_asked_for_without_a_gpu(model_copy):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(SeqlabError, match="sees no CUDA GPU"):
        Tagger.load(model_copy, device="cuda")
    assert Tagger.load(model_copy, device="auto").device.type == "cpu"
