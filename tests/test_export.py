"""Exported models give the tags the eager model gives (BiLSTM-CRF and FLAT): ONNX run by onnxruntime,
TorchScript run by torch.jit."""

from __future__ import annotations

import pytest

from seqlab import Tagger
from seqlab.cli import main
from seqlab.data.readers import read_bmes, read_conll
from seqlab.serving.export import EXPORTERS, OnnxTagger, TorchScriptTagger

FORMATS = ["onnx", "torchscript"]


def _runner(fmt: str, model, file):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="ONNX export needs the extra seqlab[export] (onnx, onnxruntime)")
        pytest.importorskip("onnxruntime", reason="ONNX export needs the extra seqlab[export] (onnx, onnxruntime)")
        return OnnxTagger(model, file)
    return TorchScriptTagger(model, file)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_bilstm_crf_tags_like_the_model(fmt, shared_tiny_model, tmp_path, capsys):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="ONNX export needs the extra seqlab[export] (onnx, onnxruntime)")
    path, model = shared_tiny_model
    out = tmp_path / f"m.{fmt}"
    assert main(["-q", "export", str(model), "--format", fmt, "--out", str(out)]) == 0
    sentences = read_conll(path, label_column=None)
    expected = Tagger.load(model).predict_tags(sentences)
    runner = _runner(fmt, model, out)
    assert runner.predict_tags(sentences) == expected
    assert runner.predict_tags(sentences, batch_size=1) == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_flat_tags_like_the_model(fmt, tmp_path_factory, tmp_path):
    from seqlab.config import config_from_dict
    from seqlab.training import train
    from tests.test_flat import ORGS, make_corpus, raw_config

    root = tmp_path_factory.mktemp("flatx")
    corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
    make_corpus(corpus)
    tagged = [f"{w} 9 nt" for w in ORGS] + ["北京 300 ns", "大学 40 n", "华为 7 nz", "工程师"]
    lexicon.write_text("\n".join(tagged) + "\n", encoding="utf-8")
    raw = raw_config(corpus, lexicon)
    raw["model"]["embedder"]["features"]["lexicon"].update(word_tags=True, frequency_bins=8, lac=True)  # inputs too
    raw["train"]["max_epochs"] = 3
    train(config_from_dict(raw), root / "run", progress=False)
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="ONNX export needs the extra seqlab[export] (onnx, onnxruntime)")
    EXPORTERS[fmt](root / "run" / "model", tmp_path / "f.x")
    sentences = read_bmes(corpus)
    expected = Tagger.load(root / "run" / "model").predict_tags(sentences)
    assert _runner(fmt, root / "run" / "model", tmp_path / "f.x").predict_tags(sentences, batch_size=4) == expected


def test_export_of_a_missing_model_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "x.onnx"
    assert main(["-q", "export", str(tmp_path / "missing"), "--out", str(bad)]) == 2
    assert "missing" in capsys.readouterr().err


def test_a_file_that_is_not_a_torchscript_export_is_one_error(shared_tiny_model, tmp_path):
    from seqlab.errors import SeqlabError

    _, model = shared_tiny_model
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip archive")
    with pytest.raises(SeqlabError, match="not a seqlab TorchScript export"):
        TorchScriptTagger(model, bad)
