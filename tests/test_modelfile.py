"""Model folders: format-1 folders (before featurizers) load and predict the same tags; defects in any of
the three files are one-line errors naming the file; weights saved in half precision load as float32 and tag the
same."""

from __future__ import annotations

import json
import math
import shutil
import struct
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


def _header(path: Path) -> tuple[int, dict]:
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8 : 8 + n])


@pytest.mark.parametrize("weights_dtype,stored", [("float16", "F16"), ("bfloat16", "BF16")])
def test_half_precision_weights_load_as_float32_and_tag_the_same(model_copy, tmp_path, weights_dtype, stored):
    """Saved with weights_dtype float16 (or bfloat16): half the bytes in model.safetensors, read back as float32
    parameters equal to the rounded originals, and the same tags as the float32 model on the fixture's sentences."""
    tagger = Tagger.load(model_copy)
    sentences = read_conll(FIXTURES / "tiny-chunking.txt", label_column=None)
    tags = tagger.predict_tags(sentences)
    for target in (tmp_path / "half", tmp_path / "half.zip"):
        tagger.save(target, weights_dtype=weights_dtype)
        half = Tagger.load(target)
        originals, loaded = tagger.net.state_dict(), half.net.state_dict()
        for name, tensor in originals.items():
            assert loaded[name].dtype == tensor.dtype
            if tensor.dtype == torch.float32:
                assert torch.equal(loaded[name], tensor.to(getattr(torch, weights_dtype)).float()), name
        assert half.predict_tags(sentences) == tags
    _, header = _header(tmp_path / "half" / "model.safetensors")
    assert {e["dtype"] for k, e in header.items() if k != "__metadata__"} == {stored}
    full = (model_copy / "model.safetensors").stat().st_size
    assert (tmp_path / "half" / "model.safetensors").stat().st_size < full * 0.55


def test_some_tensors_in_half_precision(model_copy, tmp_path):
    """``tensors``: only those stored in half precision; the others stay float32, byte for byte."""
    tagger = Tagger.load(model_copy)
    one = "decoder.crf.transitions"
    tagger.save(tmp_path / "some", weights_dtype="float16", tensors=[one])
    _, header = _header(tmp_path / "some" / "model.safetensors")
    assert {k for k, e in header.items() if e.get("dtype") == "F16"} == {one}
    loaded, originals = Tagger.load(tmp_path / "some").net.state_dict(), tagger.net.state_dict()
    assert torch.equal(loaded[one], originals[one].half().float())
    assert all(torch.equal(loaded[k], v) for k, v in originals.items() if k != one)


def _rewrite(path: Path, edit) -> None:
    """model.safetensors with ``edit(header, body)`` -> (header, body) applied."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header, body = edit(json.loads(data[8 : 8 + n]), data[8 + n :])
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def _first(header: dict) -> dict:
    return header[min(k for k in header if k != "__metadata__")]


@pytest.mark.parametrize(
    "edit,needle",
    [
        # a float32 file whose header says F16: its data is twice what F16 needs
        ("f32-declared-f16", "bytes of data for its shape"),
        ("truncated", "its header describes"),
        ("wrong-shape", "does not fit the config: tensor"),
        ("infinite", "holds NaN or infinite values"),
        ("f16-as-i16", "is torch.int16, the model needs torch.float32"),
    ],
)
def test_a_corrupt_or_mismatched_half_precision_file_is_one_error(model_copy, tmp_path, edit, needle):
    half = tmp_path / "half"
    Tagger.load(model_copy).save(half, weights_dtype="float16")
    path = half / "model.safetensors"
    if edit == "f32-declared-f16":
        path.write_bytes((model_copy / "model.safetensors").read_bytes())
        _rewrite(path, lambda h, b: ({k: {**e, "dtype": "F16"} if k != "__metadata__" else e for k, e in h.items()}, b))
    elif edit == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    elif edit == "wrong-shape":
        _rewrite(path, lambda h, b: (_first(h).update(shape=[1, math.prod(_first(h)["shape"])]) or h, b))
    elif edit == "infinite":
        weights = load_file(str(path))
        weights["decoder.crf.transitions"][0, 0] = float("inf")
        save_file(weights, str(path))
    else:
        _rewrite(path, lambda h, b: (_first(h).update(dtype="I16") or h, b))
    with pytest.raises(SeqlabError, match="model.safetensors") as err:
        Tagger.load(half)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_half_precision_refuses_weights_it_cannot_hold(model_copy, tmp_path):
    tagger = Tagger.load(model_copy)
    with torch.no_grad():
        tagger.net.decoder.crf.transitions[0, 0] = 1e6  # beyond float16's 65,504 (bfloat16 holds it)
    with pytest.raises(SeqlabError, match="'decoder.crf.transitions' holds values beyond float16's range") as err:
        tagger.save(tmp_path / "half", weights_dtype="float16")
    assert "\n" not in str(err.value) and not (tmp_path / "half").exists()
    with pytest.raises(SeqlabError, match="weights_dtype must be float32, float16, bfloat16, got 'int8'"):
        tagger.save(tmp_path / "half", weights_dtype="int8")
    with pytest.raises(SeqlabError, match="no tensor named 'decoder.crf.transition' in the network"):
        tagger.save(tmp_path / "half", weights_dtype="float16", tensors=["decoder.crf.transition"])
    tagger.save(tmp_path / "bf16", weights_dtype="bfloat16")
    bf16 = torch.tensor(1e6).to(torch.bfloat16).float()
    assert Tagger.load(tmp_path / "bf16").net.state_dict()["decoder.crf.transitions"][0, 0] == bf16
