"""Li et al. 2019 (paper 003): deep Bi-LSTM stacking against an LSTM-cell reference, parallel multi-head
self-attention against brute force, the Section 3.1 features, the chunking / typing analyses, and the
XOR property of Section 6.1."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from seqlab import Tagger, train
from seqlab.config import config_from_dict
from seqlab.data.vocab import CHIU_NICHOLS_CLASSES, chiu_nichols_class
from seqlab.encoders import BiLSTMConfig, ParallelAttentionConfig
from seqlab.errors import SeqlabError
from seqlab.evaluation.analysis import chunk_and_type, zeroed_for
from seqlab.evaluation.metrics import span_f1
from seqlab.features.chars import CharCNN, char_type_table
from seqlab.nn.context import Context
from tests.conftest import assert_same_on_two_threads, assert_save_load_identical, tiny_config, train_tiny
from tests.test_cli import assert_user_error, run

# ----- deep Bi-LSTM: cross and per-direction stacking -------------------------------------------------


def _cell_stack(cells: list[nn.LSTMCell], xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """One direction through one layer, step by step, on the real tokens only."""
    h = c = torch.zeros(cells.hidden_size)
    out = []
    for x in xs:
        h, c = cells(x, (h, c))
        out.append(h)
    return out


def _cell_from(lstm: nn.LSTM) -> nn.LSTMCell:
    cell = nn.LSTMCell(lstm.input_size, lstm.hidden_size)
    with torch.no_grad():
        cell.weight_ih.copy_(lstm.weight_ih_l0)
        cell.weight_hh.copy_(lstm.weight_hh_l0)
        cell.bias_ih.copy_(lstm.bias_ih_l0)
        cell.bias_hh.copy_(lstm.bias_hh_l0)
    return cell


def _reference(encoder, x: torch.Tensor, n: int, cross: bool) -> torch.Tensor:
    """The paper's equations with LSTM cells: per-direction H = LSTM2(LSTM1(X)) || <-LSTM4(<-LSTM3(X));
    cross H1 = LSTM1(X) || <-LSTM3(X), H = LSTM2(H1) || <-LSTM4(H1)."""
    lstm = encoder.lstm
    f_in = b_in = [x[t] for t in range(n)]
    for fwd, bwd in zip(lstm.fwd, lstm.bwd):
        f_out = _cell_stack(_cell_from(fwd), f_in)
        b_out = _cell_stack(_cell_from(bwd), b_in[::-1])[::-1]
        if cross:
            f_in = b_in = [torch.cat([f, b]) for f, b in zip(f_out, b_out)]
        else:
            f_in, b_in = f_out, b_out
    return torch.stack([torch.cat([f, b]) for f, b in zip(f_out, b_out)])


@pytest.mark.parametrize("stacking", ["cross", "per_direction"])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_bilstm_stacking_matches_lstm_cells(stacking, layers):
    torch.manual_seed(layers)
    encoder = BiLSTMConfig(hidden=8, layers=layers, dropout=0.0, stacking=stacking).build(5).eval()
    x = torch.randn(3, 6, 5)
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] + [0] * 5], dtype=torch.bool)
    with torch.no_grad():
        out = encoder(x, Context.of(mask))
        for b, n in enumerate(mask.sum(1).tolist()):
            torch.testing.assert_close(
                out[b, :n], _reference(encoder, x[b], n, stacking == "cross"), atol=1e-5, rtol=1e-5
            )


def test_per_direction_layers_read_one_direction():
    enc = BiLSTMConfig(hidden=8, layers=2, stacking="per_direction").build(5)
    assert enc.lstm.fwd[1].input_size == 4 and enc.lstm.bwd[1].input_size == 4
    assert BiLSTMConfig(hidden=8, layers=2).build(5).lstm.fwd[1].input_size == 8


# ----- parallel multi-head self-attention -------------------------------------------------------------


def test_parallel_attention_equals_the_equations_per_head():
    torch.manual_seed(0)
    layer = ParallelAttentionConfig(heads=5).build(20).eval()
    assert layer.output_dim == 40 and layer.columns["C3"] == (28, 32) and layer.columns["C_all"] == (20, 40)
    x = torch.randn(2, 6, 20)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.bool)
    ctx = Context.of(mask)
    with torch.no_grad():
        out = layer(x, ctx)
        w = layer.qkv.weight  # (3 * 5 * 4, 20): W_q heads, W_k heads, W_v heads
        for b, n in enumerate([6, 4]):
            h = x[b, :n]
            assert torch.equal(out[b, :n, :20], h)  # H is passed through
            for i in range(5):
                wq, wk, wv = (w[(j * 5 + i) * 4 : (j * 5 + i + 1) * 4] for j in range(3))
                alpha = torch.softmax((h @ wq.T) @ (h @ wk.T).T / math.sqrt(4), dim=-1)  # (n, n)
                torch.testing.assert_close(ctx.published["attention"][b, i, :n, :n], alpha)
                torch.testing.assert_close(out[b, :n, 20 + 4 * i : 24 + 4 * i], alpha @ (h @ wv.T))


def test_parallel_attention_ignores_padding():
    torch.manual_seed(1)
    layer = ParallelAttentionConfig(heads=2).build(6).eval()
    x = torch.randn(1, 4, 6)
    padded = torch.cat([x, 50 * torch.randn(1, 3, 6)], dim=1)
    with torch.no_grad():
        alone = layer(x, Context.of(torch.ones(1, 4, dtype=torch.bool)))
        inside = layer(padded, Context.of(torch.tensor([[1] * 4 + [0] * 3], dtype=torch.bool)))
    torch.testing.assert_close(alone, inside[:, :4])


def test_heads_must_divide_the_input(tmp_path):
    raw = tiny_config(tmp_path / "x.txt").model_dump(mode="json")
    raw["model"]["encoders"].append({"type": "parallel_attention", "heads": 5})  # BiLSTM 32: 5 does not divide
    with pytest.raises(SeqlabError, match=r"config key 'model\.encoders\.1\.heads': 5 heads do not divide"):
        config_from_dict(raw)
    raw["model"]["encoders"][1]["head_size"] = 4
    assert config_from_dict(raw).model.encoders[1].output_dim(32) == 52


# ----- Section 3.1 features ---------------------------------------------------------------------------


def test_char_cnn_widths_and_char_types():
    types = char_type_table(["<pad>", "<unk>", "A", "b", "7", "-"])
    assert types.tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    torch.manual_seed(0)
    cnn = CharCNN(6, 25, 20, [1, 2, 3], types).eval()
    assert cnn.output_dim == 60 and cnn.chars.output_dim == 29
    chars = torch.tensor([[2, 3, 4, 0, 0], [5, 0, 0, 0, 0]])
    with torch.no_grad():
        out = cnn(chars)
        wide = cnn(torch.cat([chars, torch.zeros(2, 7, dtype=torch.long)], dim=1))
    assert out.shape == (2, 60) and torch.allclose(out, wide)
    assert "chars.types" not in cnn.state_dict()  # derived from the vocabulary, not saved


def test_chiu_nichols_casing():
    names = {
        w: CHIU_NICHOLS_CLASSES[chiu_nichols_class(w)]
        for w in ("EU", "Paris", "paris", "McDonald", "I", "1996", ",", "iPhone")
    }
    assert names == {
        "EU": "upper",
        "Paris": "upper_initial",
        "paris": "lower",
        "McDonald": "mixed",
        "I": "upper_initial",
        "1996": "lower",
        ",": "lower",
        "iPhone": "mixed",
    }


# ----- analyses and span metrics ----------------------------------------------------------------------


def test_chunk_and_type_counts():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O", "B-ORG"]]
    r = chunk_and_type(gold, pred, "BIO")  # in BIOES: gold B E O S | B I E; pred B E O S | S O S
    assert r.chunk_support == {"O": 1, "S": 1, "B": 2, "I": 1, "E": 2}
    assert r.chunk_recall == {"O": 100.0, "S": 100.0, "B": 50.0, "I": 0.0, "E": 50.0}
    assert r.type_support == {"LOC": 1, "ORG": 3, "PER": 2, "NONE": 1}
    assert r.type_accuracy == {"LOC": 0.0, "ORG": pytest.approx(200 / 3), "PER": 100.0, "NONE": 100.0}


def test_span_only_f1_and_type_accuracy():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "I-ORG", "O"]]
    pred = [["B-ORG", "I-ORG", "O", "B-LOC"], ["B-ORG", "O", "O"]]
    s = span_f1(gold, pred, "BIO")
    # boundaries: gold {(0,2),(3,4)} {(0,2)}; pred {(0,2),(3,4)} {(0,1)} -> 2 of 3 each way
    assert s.untyped_f1 == pytest.approx(200 / 3)
    assert s.type_accuracy == pytest.approx(50.0)  # of those 2, one (LOC) has the right type


def test_keep_zeroes_every_part_that_does_not_overlap():
    cols = {"H": (0, 10), "C_all": (10, 20), "C1": (10, 15), "C2": (15, 20)}
    assert zeroed_for(cols, "H") == ["C_all", "C1", "C2"]
    assert zeroed_for(cols, "C_all") == ["H"]
    assert zeroed_for(cols, "C2") == ["H", "C1"]


# ----- the whole self-attentive model -----------------------------------------------------------------


def att_config(path):
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["char"].update(kernel=[1, 2, 3], char_type=True, max_len=20)
    raw["model"]["embedder"]["features"]["casing"] = {"type": "casing", "classes": "chiu_nichols", "one_hot": True}
    raw["model"]["encoders"] = [
        {"type": "bilstm", "hidden": 30, "layers": 2, "stacking": "per_direction", "dropout": 0.0},
        {"type": "parallel_attention", "heads": 5},
    ]
    raw["model"]["decoder"] = {"type": "softmax"}
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def att_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "att", att_config)


def test_att_model_overfits_saves_loads(att_run, tmp_path):
    path, run_dir, result = att_run
    assert result.dev["f1"] > 97.0
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    assert tagger.net.embedder.casing.output_dim == 4 and tagger.net.embedder.char.output_dim == 24


def test_att_batches_side_by_side_predict_what_one_thread_does(att_run):
    from seqlab.data.readers import read_conll

    path, run_dir, _ = att_run
    sentences = read_conll(path, label_column=None)
    assert_same_on_two_threads(Tagger.load(run_dir / "model"), sentences, explain=True, confidence=True, nbest=2)


def test_analyze_cli_with_every_part(att_run):
    path, run_dir, _ = att_run
    proc = run("analyze", run_dir / "model", path, "--all-parts", "--json")
    assert proc.returncode == 0, proc.stderr
    parts = json.loads(proc.stdout)
    assert [p["kept"] for p in parts] == [None, "H", "C_all", "C1", "C2", "C3", "C4", "C5"]
    full = parts[0]["result"]
    assert set(full["chunk_recall"]) == {"O", "S", "B", "I", "E"} and full["chunk_recall"]["O"] > 95
    assert parts[1]["zeroed"] == ["C_all", "C1", "C2", "C3", "C4", "C5"]
    assert any(p["result"] != full for p in parts[1:])  # zeroing parts changes what the model predicts
    text = run("analyze", run_dir / "model", path, "--ablate", "C2")
    assert text.returncode == 0 and "C2 only" in text.stdout and "entity typing" in text.stdout
    assert_user_error(run("analyze", run_dir / "model", path, "--keep", "C9"), "no part named 'C9'")


def test_attention_heat_map_per_head(att_run, tmp_path):
    _, run_dir, _ = att_run
    proc = run("attention", run_dir / "model", "The dollar rose in Tokyo .", "--out", tmp_path / "heat.png")
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in tmp_path.glob("heat-*.png"))
    assert files == [f"heat-layer1-head{i}.png" for i in range(1, 6)]


# ----- Section 6.1: the XOR phrases ------------------------------------------------------------------

XOR = [("Key and Peele", True), ("You and I", True), ("Key and I", False), ("You and Peele", False)]


def _xor_file(tmp_path):
    lines = []
    for phrase, entity in XOR:
        tags = ["B-WOA", "I-WOA", "I-WOA"] if entity else ["O", "O", "O"]
        lines += [f"{w} {t}" for w, t in zip(phrase.split(), tags)] + [""]
    path = tmp_path / "xor.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fits_and(tmp_path, encoders, seed) -> bool:
    """Whether the model labels "and" right in all four phrases after fitting them."""
    path = _xor_file(tmp_path)
    raw = {
        "task": "ner",
        "data": {"train": str(path), "dev": str(path), "test": str(path), "scheme": "BIO", "train_scheme": "BIO"},
        "model": {
            "embedder": {"features": {"word": {"type": "words", "dim": 8, "pretrained": None}}, "dropout": 0.0},
            "encoders": encoders,
            "decoder": {"type": "softmax"},
        },
        "train": {
            "optimizer": "adam",
            "lr": 0.02,
            "lr_decay": 0.0,
            "batch_size": 4,
            "max_epochs": 150,
            "patience": 150,
            "seed": seed,
        },
    }
    train(config_from_dict(raw), tmp_path / f"run{seed}", progress=False)
    tagger = Tagger.load(tmp_path / f"run{seed}" / "model")
    preds = tagger.predict([p for p, _ in XOR])
    return all(pred.tags[1] == ("I-WOA" if entity else "O") for pred, (_, entity) in zip(preds, XOR))


BILSTM = {"type": "bilstm", "hidden": 16, "layers": 2, "dropout": 0.0}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_xor_per_direction_bilstm_cannot_fit_and(tmp_path, seed):
    """Each direction sees one half; a per-token affine-softmax over [forward; backward] adds a term for
    each half, and no such sum separates the XOR: this holds for every seed and depth."""
    assert not _fits_and(tmp_path, [{**BILSTM, "stacking": "per_direction"}], seed)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "encoders",
    [
        [{**BILSTM, "stacking": "cross"}],
        [{**BILSTM, "stacking": "per_direction"}, {"type": "parallel_attention", "heads": 2}],
    ],
    ids=["cross", "attention"],
)
def test_xor_cross_and_attention_fit_and(tmp_path, encoders, seed):
    assert _fits_and(tmp_path, encoders, seed)
