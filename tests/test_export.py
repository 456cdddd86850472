"""Exported ONNX models give the tags the eager model gives (BiLSTM-CRF and FLAT), run by onnxruntime."""

from __future__ import annotations

import pytest

from seqlab.cli import main
from seqlab.data.readers import read_bmes, read_conll

pytest.importorskip("onnx", reason="export needs the extra seqlab[export] (onnx, onnxruntime)")
pytest.importorskip("onnxruntime", reason="export needs the extra seqlab[export] (onnx, onnxruntime)")

from seqlab import Tagger  # noqa: E402
from seqlab.export import OnnxTagger  # noqa: E402


def test_exported_bilstm_crf_tags_like_the_model(shared_tiny_model, tmp_path, capsys):
    path, model = shared_tiny_model
    assert main(["-q", "export", str(model), "--format", "onnx", "--out", str(tmp_path / "m.onnx")]) == 0
    sentences = read_conll(path, label_column=None)
    expected = Tagger.load(model).predict_tags(sentences)
    onnx_tagger = OnnxTagger(model, tmp_path / "m.onnx")
    assert onnx_tagger.predict_tags(sentences) == expected
    assert onnx_tagger.predict_tags(sentences, batch_size=1) == expected


def test_exported_flat_tags_like_the_model(tmp_path_factory, tmp_path):
    from seqlab.config import config_from_dict
    from seqlab.training import train
    from tests.test_flat import ORGS, make_corpus, raw_config
    root = tmp_path_factory.mktemp("flatx")
    corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
    make_corpus(corpus)
    lexicon.write_text("\n".join(ORGS + ["北京", "大学", "华为", "工程师"]) + "\n", encoding="utf-8")
    raw = raw_config(corpus, lexicon)
    raw["train"]["max_epochs"] = 3
    train(config_from_dict(raw), root / "run", progress=False)
    from seqlab.export import export_onnx
    export_onnx(root / "run" / "model", tmp_path / "f.onnx")
    sentences = read_bmes(corpus)
    expected = Tagger.load(root / "run" / "model").predict_tags(sentences)
    assert OnnxTagger(root / "run" / "model", tmp_path / "f.onnx").predict_tags(sentences, batch_size=4) == expected


def test_export_of_a_missing_model_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "x.onnx"
    assert main(["-q", "export", str(tmp_path / "missing"), "--out", str(bad)]) == 2
    assert "missing" in capsys.readouterr().err
