"""The ``column`` feature: a column of the input file (CoNLL-2000's part of speech) as an embedding. It carries
what the column says (a tagger that sees only it learns a tag that depends on it alone), unseen values share
<unk>, a tagger with it overfits 20 sentences and reloads identically, and input without the column is refused
in one line naming the file and line, never tagged without it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from seqlab import Tagger, train
from seqlab.config import config_from_dict
from seqlab.data.readers import read_conll
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features.columns import ColumnConfig
from tests.conftest import assert_save_load_identical, tiny_config, train_tiny

POS = {"type": "column", "column": 0, "dim": 8}


def with_pos(path, **features):
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"] = {**raw["model"]["embedder"]["features"], "pos": POS, **features}
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tiny(tmp_path_factory, "columns", with_pos)


def test_a_tagger_with_the_pos_column_overfits_20_sentences(trained):
    _, _, result = trained
    assert result.dev["f1"] > 99.0


def test_save_load_predict_identical_and_batch_independent(trained, tmp_path):
    path, run, _ = trained
    assert_save_load_identical(run / "model", path, tmp_path)  # reads token, POS, chunk: POS is still column 0


def test_the_vocabulary_is_the_training_values_most_frequent_first(trained):
    path, run, _ = trained
    itos = json.loads((run / "model" / "vocab.json").read_text())["features"]["pos"]["itos"]
    tags = [line.split()[1] for line in path.read_text().splitlines() if line.strip()]
    assert itos[:2] == ["<pad>", "<unk>"] and sorted(itos[2:]) == sorted(set(tags))
    assert itos[2] == max(set(tags), key=lambda t: (tags.count(t), -ord(t[0])))


def test_the_feature_carries_the_column(tmp_path):
    """Every token is 'x'; the tag is B-A where the column says a, B-B where it says b: only the column tells."""
    lines = []
    for i in range(20):
        for j in range(6):
            value = "a" if (i * 7 + j * 3) % 5 < 2 else "b"
            lines.append(f"x {value} B-{value.upper()}")
        lines.append("")
    path = tmp_path / "blind.txt"
    path.write_text("\n".join(lines) + "\n")
    without = tiny_config(path)
    raw = without.model_dump(mode="json")
    raw["model"]["embedder"]["features"] = {"word": raw["model"]["embedder"]["features"]["word"], "pos": POS}
    scores = {}
    for name, config in (("with", config_from_dict(raw)), ("without", without)):
        scores[name] = train(config, tmp_path / name, progress=False).dev["f1"]
    assert scores["with"] == 100.0
    assert scores["without"] < 80.0  # B-A on 2 tokens of 5: the words alone cannot say which


def test_unseen_values_and_rare_values_share_unk(tiny_corpus):
    config = ColumnConfig(column=0, min_count=3)
    featurizer = config.build("pos")
    train_sentences = read_conll(tiny_corpus, label_column=-1)
    featurizer.fit(train_sentences, [], seed=1)
    unk = featurizer.vocab.stoi["<unk>"]
    sentence = Sentence(["a", "b"], extra={"columns": [["NEVER-SEEN"], ["NN"]]})
    ids = featurizer.encode(sentence)
    assert ids[0] == unk and ids[1] == featurizer.vocab.stoi["NN"]
    counts = {}
    for s in train_sentences:
        for row in s.extra["columns"]:
            counts[row[0]] = counts.get(row[0], 0) + 1
    assert set(featurizer.vocab.itos[2:]) == {v for v, c in counts.items() if c >= 3}
    capped = ColumnConfig(column=0, max_values=2).build("pos")
    capped.fit(train_sentences, [], seed=1)
    assert capped.vocab.itos[2:] == sorted(counts, key=lambda v: (-counts[v], v))[:2]


@pytest.mark.parametrize(
    "sentence",
    [
        Sentence(["a", "b"], source="in.txt", line=7),  # raw text: no columns
        Sentence(["a", "b"], source="in.txt", line=7, extra={"columns": [["NN"], []]}),  # one token without it
    ],
)
def test_input_without_the_column_is_refused_naming_file_and_line(trained, sentence):
    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    with pytest.raises(SeqlabError) as err:
        tagger.predict_tags([sentence])
    message = str(err.value)
    assert "in.txt:7" in message and "'pos' reads column 0" in message and "\n" not in message


def test_the_cli_refuses_raw_text_with_exit_code_2(trained, tmp_path):
    _, run, _ = trained
    text = tmp_path / "raw.txt"
    text.write_text("Confidence in the pound\n")
    done = subprocess.run(
        [sys.executable, "-m", "seqlab", "predict", str(run / "model"), str(text)], capture_output=True, text=True
    )
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and f"{text}:1" in error[0] and "'pos' reads column 0" in error[0]
    assert "Traceback" not in done.stderr


def test_the_server_refuses_to_start_since_requests_carry_tokens_only(trained):
    pytest.importorskip("fastapi", reason="the server needs seqlab[serve] (installed by make test)")
    from seqlab.serving.app import create_app

    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    assert tagger.columns() == {"pos": 1}
    with pytest.raises(SeqlabError, match="feature 'pos' reads 1 column of the input besides the token"):
        create_app(tagger)


def test_a_vocabulary_without_its_specials_is_refused(trained, tmp_path):
    import shutil

    _, run, _ = trained
    copy = tmp_path / "model"
    shutil.copytree(run / "model", copy)
    vocab = json.loads((copy / "vocab.json").read_text())
    itos = vocab["features"]["pos"]["itos"]
    vocab["features"]["pos"]["itos"] = [*itos[2:], *itos[:2]]  # the same strings, the specials last
    (copy / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(SeqlabError, match="pos.itos: expected '<pad>' and '<unk>' first"):
        Tagger.load(copy)


@pytest.mark.parametrize("key, value", [("column", -1), ("column", 64), ("dim", 0), ("min_count", 0)])
def test_out_of_range_settings_name_the_key(tiny_corpus, key, value):
    raw = with_pos(tiny_corpus).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["pos"][key] = value
    with pytest.raises(SeqlabError, match=f"model.embedder.features.pos.{key}"):
        config_from_dict(raw)
