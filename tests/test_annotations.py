"""Annotation formats (seqlab.data.annotations) and tokenizers (seqlab.data.tokenization): reading doccano, Label
Studio, spaCy JSONL and DocBin; the alignment rule; round trips through every format; convert and predict on the command
line; training from JSONL."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqlab.cli import main
from seqlab.data.annotations import (
    align_spans,
    char_spans,
    convert,
    iter_annotations,
    read_annotations,
    records_to_sentences,
    render_record,
)
from seqlab.data.schemes import get_spans, spans_to_tags
from seqlab.data.tokenization import TOKENIZERS, tokenize, tokens_of
from seqlab.errors import SeqlabError
from tests.conftest import SAMPLE, first_sentences, tiny_config


def _has_spacy() -> bool:
    try:
        import spacy  # noqa: F401
    except ImportError:
        return False
    return True


needs_spacy = pytest.mark.skipif(not _has_spacy(), reason="spaCy is not installed (pip install 'seqlab[spacy]')")


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# ----- tokenizers ------------------------------------------------------------------------------------------------
def test_tokenizers():
    text = "Michael Jordan isn't here, e.g. U.S. costs $1,000.50 (3.5%)... don't"
    assert tokens_of(text, tokenize(text, "whitespace")) == text.split()
    assert tokens_of(text, tokenize(text, "english")) == [
        "Michael",
        "Jordan",
        "is",
        "n't",
        "here",
        ",",
        "e.g.",
        "U.S.",
        "costs",
        "$",
        "1,000.50",
        "(",
        "3.5",
        "%",
        ")",
        "...",
        "do",
        "n't",
    ]
    decomposed = "cafe\u0301 na\u0308ive"  # combining acute and diaeresis: one word each
    assert tokens_of(decomposed, tokenize(decomposed, "english")) == ["cafe\u0301", "na\u0308ive"]
    chars = tokenize("Michael Jordan", "chars")
    assert len(chars) == 13 and chars[6] == (6, 7) and chars[7] == (8, 9)  # the space is no token, offsets kept
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tokenize("x", "nltk")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "ab",
                "Z",
                ".",
                ",",
                "'",
                "-",
                "$",
                "9",
                " ",
                "\n",
                "\t",
                "中",
                "文",
                "😀",
                "é",
                "n't",
                "U.S.",
                "3.5",
                "  ",
                "'s",
            ]
        ),
        max_size=40,
    ).map("".join),
    st.sampled_from(TOKENIZERS),
)
def test_tokens_cover_every_character_once(text, tokenizer):
    offsets = tokenize(text, tokenizer)
    assert all(a < b for a, b in offsets)
    assert all(b <= c for (_, b), (c, _) in pairwise(offsets))  # in order, no overlaps
    assert all(not any(ch.isspace() for ch in text[a:b]) for a, b in offsets)
    assert "".join(tokens_of(text, offsets)) == "".join(ch for ch in text if not ch.isspace())


@st.composite
def text_and_spans(draw):
    words = draw(
        st.lists(
            st.sampled_from(["Michael", "Jordan", "中", "文", "x", "'s", ",", "3.5", "😀"]), min_size=1, max_size=12
        )
    )
    seps = draw(st.lists(st.sampled_from([" ", "  ", "\n", " \t "]), min_size=len(words), max_size=len(words)))
    text = draw(st.sampled_from(["", " "])) + "".join(w + s for w, s in zip(words, seps))
    tokenizer = draw(st.sampled_from(TOKENIZERS))
    offsets = tokenize(text, tokenizer)
    cuts = sorted(set(draw(st.lists(st.integers(0, len(offsets)), max_size=8))))
    spans = []
    for a, b in pairwise(cuts):
        if draw(st.booleans()):
            spans.append((offsets[a][0], offsets[b - 1][1], draw(st.sampled_from(["PER", "LOC"]))))
    return text, tokenizer, spans


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text_and_spans(),
    st.sampled_from(["doccano", "labelstudio", "spacy-jsonl"]),
    st.sampled_from(["BIO", "BIOES", "IOB1"]),
)
def test_spans_keep_their_characters_through_tags_and_every_format(case, flavour, scheme):
    text, tokenizer, spans = case
    offsets = tokenize(text, tokenizer)
    where = type("W", (), {"error": staticmethod(lambda m: SeqlabError(m))})()
    tags = spans_to_tags(align_spans(text, offsets, spans, where, tokenizer), len(offsets), scheme)
    assert char_spans(offsets, get_spans(tags, scheme)) == spans
    record = json.loads(json.dumps(render_record(text, offsets, spans, flavour)))
    (s,) = records_to_sentences([(1, record)], "<test>", tokenizer, scheme)
    assert s.extra["text"] == text and s.tokens == tokens_of(text, offsets)
    assert char_spans(s.extra["offsets"], get_spans(s.labels, scheme)) == spans
    for a, b, _ in spans:
        assert text[a:b] == text[a:b].strip()


# ----- reading -----------------------------------------------------------------------------------------------------
TEXT1 = "Michael Jordan visited Paris ."


def test_every_json_flavour_reads_alike(tmp_path):
    records = [
        {"text": TEXT1, "label": [[0, 14, "PER"], [23, 28, "LOC"]], "id": 7},
        {
            "text": TEXT1,
            "entities": [
                {"id": 1, "start_offset": 0, "end_offset": 14, "label": "PER"},
                {"id": 2, "start_offset": 23, "end_offset": 28, "label": "LOC"},
            ],
        },
        {"text": TEXT1, "spans": [{"start": 0, "end": 14, "label": "PER"}, {"start": 23, "end": 28, "label": "LOC"}]},
        {"text": TEXT1, "ents": [{"start": 0, "end": 14, "label": "PER"}, {"start": 23, "end": 28, "label": "LOC"}]},
        {
            "id": 3,
            "data": {"text": TEXT1},
            "annotations": [
                {"was_cancelled": True, "result": []},
                {
                    "result": [
                        {
                            "value": {"start": 0, "end": 14, "text": "Michael Jordan", "labels": ["PER"]},
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                        },
                        {
                            "value": {"start": 23, "end": 28, "labels": ["LOC"]},
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                        },
                    ]
                },
            ],
        },
    ]
    gold = ["B-PER", "I-PER", "O", "B-LOC", "O"]
    sentences = read_annotations(write_lines(tmp_path / "a.jsonl", records))
    assert [s.labels for s in sentences] == [gold] * 5 and [s.line for s in sentences] == [1, 2, 3, 4, 5]
    assert [s.extra["flavour"] for s in iter_annotations(tmp_path / "a.jsonl")] == [
        "doccano",
        "doccano",
        "spacy-jsonl",
        "spacy-jsonl",
        "labelstudio",
    ]
    (tmp_path / "a.json").write_text(json.dumps(records, indent=2), encoding="utf-8")  # a Label Studio JSON export
    again = read_annotations(tmp_path / "a.json")
    assert [s.labels for s in again] == [gold] * 5
    starts = [i for i, line in enumerate((tmp_path / "a.json").read_text().splitlines(), 1) if line == "  {"]
    assert [s.line for s in again] == starts and len(starts) == 5  # where each record starts in the array
    bioes = read_annotations(tmp_path / "a.jsonl", scheme="BIOES")
    assert bioes[0].labels == ["B-PER", "E-PER", "O", "S-LOC", "O"]


def test_labelstudio_utf16_offsets_and_record_tokens(tmp_path):
    text = "😀 Michael Jordan"
    task = {
        "data": {"text": text},
        "annotations": [
            {
                "result": [
                    {"value": {"start": 3, "end": 17, "text": "Michael Jordan", "labels": ["PER"]}, "type": "labels"}
                ]
            }
        ],
    }
    spacy_record = {
        "text": "New York-based",
        "tokens": [
            {"text": "New", "start": 0, "end": 3},
            {"text": "York", "start": 4, "end": 8},
            {"text": "-", "start": 8, "end": 9},
            {"text": "based", "start": 9, "end": 14},
        ],
        "spans": [{"start": 0, "end": 8, "label": "LOC"}],
    }
    a, b = read_annotations(write_lines(tmp_path / "a.jsonl", [task, spacy_record]))
    assert a.labels == ["O", "B-PER", "I-PER"]  # UTF-16 offsets (an old export) recognised by value.text
    assert b.tokens == ["New", "York", "-", "based"] and b.labels == ["B-LOC", "I-LOC", "O", "O"]


def test_errors_name_file_line_and_span(tmp_path):
    def error(records, **kw) -> str:
        with pytest.raises(SeqlabError) as info:
            read_annotations(write_lines(tmp_path / "e.jsonl", records), **kw)
        return str(info.value)

    msg = error([{"text": "ok", "label": []}, {"text": "Jordan's car", "label": [[0, 6, "PER"]]}])
    assert msg.startswith(f"{tmp_path / 'e.jsonl'}:2: span [0, 6) 'PER' ('Jordan') does not align")
    assert '[0, 8) "Jordan\'s"' in msg
    assert read_annotations(
        write_lines(tmp_path / "ok.jsonl", [{"text": "Jordan's car", "label": [[0, 6, "PER"]]}]), "english"
    )[0].labels == ["B-PER", "O", "O"]
    # spaces around a span are dropped; the same span twice is kept once
    assert read_annotations(
        write_lines(tmp_path / "sp.jsonl", [{"text": "a Jordan b", "label": [[1, 9, "PER"], [2, 8, "PER"]]}])
    )[0].labels == ["O", "B-PER", "O"]
    assert "overlaps the span of 'PER'" in error([{"text": "a b c", "label": [[0, 3, "PER"], [2, 5, "LOC"]]}])
    assert ":1: span [0, 9) 'PER': outside the text" in error([{"text": "a b", "label": [[0, 9, "PER"]]}])
    assert "covers only spaces" in error([{"text": "a  b", "label": [[1, 3, "PER"]]}])
    assert ":1: 'label': expected [start, end, label] triples" in error([{"text": "a", "label": ["POS"]}])
    (tmp_path / "bad.jsonl").write_text('{"text": "a", "label": []}\n{"text": \n', encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"bad.jsonl:2: not a JSON record"):
        read_annotations(tmp_path / "bad.jsonl")
    assert "training and evaluation need labeled records" in error([{"text": "no annotations"}])
    assert read_annotations(tmp_path / "e.jsonl", labeled=False)[0].labels is None
    (tmp_path / "arr.json").write_text('[\n{"text": "a", "label": []},\n{"text": "b", "label": []}\n{"x": 1}]')
    with pytest.raises(SeqlabError, match=r"arr.json:4: expected ',' or ']'"):
        read_annotations(tmp_path / "arr.json")


# ----- round trips and convert ------------------------------------------------------------------------------------
@pytest.fixture
def conll(tmp_path) -> Path:
    p = tmp_path / "tiny.conll"
    p.write_text(first_sentences(SAMPLE, 6).rstrip("\n") + "\n\n", encoding="utf-8")  # what the writer writes
    return p


@pytest.mark.parametrize(
    "suffix,to",
    [(".jsonl", None), (".json", None), (".jsonl", "spacy-jsonl"), (".json", "doccano"), (".jsonl", "labelstudio")],
)
def test_conll_to_annotations_and_back_is_the_same_file(conll, tmp_path, suffix, to):
    mid = tmp_path / f"mid{suffix}"
    assert convert(conll, mid, dst_format=to) == 6
    back = tmp_path / "back.conll"
    convert(mid, back)
    assert back.read_bytes() == conll.read_bytes()
    texts = [s.extra["text"] for s in iter_annotations(mid)]
    assert texts[0].startswith("Confidence in the pound is widely expected")


def test_spans_at_the_same_characters_through_every_format(conll, tmp_path):
    ref = read_annotations(convert(conll, tmp_path / "ref.jsonl") and tmp_path / "ref.jsonl")
    spans = [char_spans(s.extra["offsets"], get_spans(s.labels, "BIO")) for s in ref]
    for name in ("a.json", "b.jsonl", "c.jsonl"):
        convert(tmp_path / "ref.jsonl", tmp_path / name, dst_format={"c.jsonl": "spacy-jsonl"}.get(name))
        got = read_annotations(tmp_path / name)
        assert [s.extra["text"] for s in got] == [s.extra["text"] for s in ref]
        assert [char_spans(s.extra["offsets"], get_spans(s.labels, "BIO")) for s in got] == spans


def test_bmes_and_chars(tmp_path):
    bmes = tmp_path / "zh.bmes"
    bmes.write_text("张 B-NAME\n三 E-NAME\n在 O\nA B-ORG\nB E-ORG\n\n", encoding="utf-8")
    convert(bmes, tmp_path / "zh.jsonl")
    record = json.loads((tmp_path / "zh.jsonl").read_text(encoding="utf-8"))
    assert record["text"] == "张三在AB" and record["label"] == [[0, 2, "NAME"], [3, 5, "ORG"]]
    convert(tmp_path / "zh.jsonl", tmp_path / "back.bmes")
    assert (tmp_path / "back.bmes").read_text(encoding="utf-8") == bmes.read_text(encoding="utf-8")
    # raw mixed text in character mode: spaces are no tokens, but spans keep them
    write_lines(tmp_path / "mixed.jsonl", [{"text": "我爱 Michael Jordan", "label": [[3, 17, "PER"]]}])
    (s,) = read_annotations(tmp_path / "mixed.jsonl", "chars", "BMES")
    assert len(s.tokens) == 15 and s.labels[2] == "B-PER" and s.labels[-1] == "E-PER"
    assert char_spans(s.extra["offsets"], get_spans(s.labels, "BMES")) == [(3, 17, "PER")]


@needs_spacy
def test_docbin_round_trip(conll, tmp_path):
    import spacy
    from spacy.tokens import DocBin

    convert(conll, tmp_path / "a.jsonl")
    convert(tmp_path / "a.jsonl", tmp_path / "a.spacy")
    docs = list(DocBin().from_disk(tmp_path / "a.spacy").get_docs(spacy.blank("en").vocab))
    ref = read_annotations(tmp_path / "a.jsonl")
    assert [d.text for d in docs] == [s.extra["text"] for s in ref]
    assert [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs] == [
        char_spans(s.extra["offsets"], get_spans(s.labels, "BIO")) for s in ref
    ]
    convert(tmp_path / "a.spacy", tmp_path / "b.jsonl")
    assert [s.labels for s in read_annotations(tmp_path / "b.jsonl")] == [s.labels for s in ref]
    # a document with runs of spaces and newlines keeps its text exactly
    write_lines(tmp_path / "ws.jsonl", [{"text": "  a  b\n\nc ", "label": [[2, 3, "X"], [8, 9, "Y"]]}])
    convert(tmp_path / "ws.jsonl", tmp_path / "ws.spacy")
    (doc,) = DocBin().from_disk(tmp_path / "ws.spacy").get_docs(spacy.blank("en").vocab)
    assert doc.text == "  a  b\n\nc " and [(e.text, e.label_) for e in doc.ents] == [("a", "X"), ("c", "Y")]
    (s,) = read_annotations(tmp_path / "ws.spacy")
    assert s.tokens == ["a", "b", "c"] and s.labels == ["B-X", "O", "B-Y"]


def test_convert_command(conll, tmp_path, capsys):
    assert main(["-q", "convert", str(conll), str(tmp_path / "o.jsonl"), "--to", "spacy-jsonl"]) == 0
    assert "tokens" in json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])
    assert main(["-q", "convert", str(tmp_path / "o.jsonl"), str(tmp_path / "o.txt"), "--scheme", "BIOES"]) == 0
    assert "E-NP" in (tmp_path / "o.txt").read_text()
    assert main(["-q", "convert", str(conll), str(tmp_path / "o.xyz")]) == 2
    assert "cannot tell the format from the extension '.xyz'" in capsys.readouterr().err
    write_lines(tmp_path / "bad.jsonl", [{"text": "Jordan's", "label": [[0, 6, "PER"]]}])
    assert main(["-q", "convert", str(tmp_path / "bad.jsonl"), str(tmp_path / "o.conll")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.jsonl:1: span [0, 6) 'PER'" in err


# ----- a model on annotation records ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def jsonl_model(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny chunker trained from doccano JSONL (data.format: jsonl): (the JSONL file, the model folder)."""
    from seqlab.training import train

    root = tmp_path_factory.mktemp("jsonl")
    (root / "tiny.txt").write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    data = root / "tiny.jsonl"
    convert(root / "tiny.txt", data)
    base = tiny_config(data)
    config = tiny_config(
        data,
        data={
            "format": "jsonl",
            "tokenizer": "whitespace",
            "train": str(data),
            "dev": str(data),
            "test": str(data),
            "scheme": "BIO",
        },
        train={**base.train.model_dump(), "max_epochs": 8},
    )
    result = train(config, root / "run", progress=False)
    assert result.test["f1"] > 0
    return data, root / "run" / "model"


def test_jsonl_training_and_evaluation(jsonl_model):
    from seqlab.tagger import Tagger
    from seqlab.training import evaluate

    data, model = jsonl_model
    tagger = Tagger.load(model)
    assert tagger.config.data.format == "jsonl" and tagger.scheme == "BIO"
    assert evaluate(model, data).f1 > 0  # gold spans read from the records
    pred = tagger.predict("He  reckons the current account deficit will narrow .")[0]
    text = "He  reckons the current account deficit will narrow ."
    for span in pred.spans:  # raw text keeps its characters: a span's text is the input's, spaces and all
        assert span.text in text


@pytest.mark.parametrize("fmt", ["doccano", "labelstudio", "spacy-jsonl", "jsonl", "conll"])
def test_predict_writes_annotations(jsonl_model, tmp_path, capsys, fmt):
    _, model = jsonl_model
    records = [
        {"text": "He reckons the current account deficit will narrow .", "id": 1, "label": []},
        {"text": "  Confidence in the pound is widely expected to take another sharp dive .  ", "meta": 2},
    ]
    src = write_lines(tmp_path / "in.jsonl", records)
    assert main(["-q", "predict", str(model), str(src), "--output-format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "conll":
        assert len([b for b in out.split("\n\n") if b.strip()]) == 2
        return
    rows = json.loads(out) if fmt == "labelstudio" else [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2
    for row, record in zip(rows, records):
        text = record["text"]
        if fmt == "doccano":
            assert row["text"] == text and all(text[a:b].strip() == text[a:b] for a, b, _ in row["label"])
            assert row.get("id") == record.get("id")
            spans = row["label"]
        elif fmt == "labelstudio":
            (p,) = row["predictions"]
            assert row["data"] == {"text": text} and "annotations" not in row
            spans = [[r["value"]["start"], r["value"]["end"], r["value"]["labels"][0]] for r in p["result"]]
            assert all(
                r["value"]["text"] == text[a:b] and 0 <= r["score"] <= 1 for r, (a, b, _) in zip(p["result"], spans)
            )
        elif fmt == "spacy-jsonl":
            spans = [[s["start"], s["end"], s["label"]] for s in row["spans"]]
            assert [t["text"] for t in row["tokens"]] == text.split()
        else:
            spans = [[s["start_char"], s["end_char"], s["type"]] for s in row["spans"]]
            assert all(s["text"] == text[s["start_char"] : s["end_char"]] for s in row["spans"])
        assert spans and all(text[a:b] and not text[a].isspace() for a, b, _ in spans)
    if fmt != "jsonl":  # the output reads back as annotations, spans at the same characters
        back = tmp_path / ("out.json" if fmt == "labelstudio" else "out.jsonl")
        back.write_text(out, encoding="utf-8")
        # predictions are not gold: a Label Studio task with predictions only is unlabeled
        again = read_annotations(back, labeled=fmt != "labelstudio")
        assert [s.extra["text"] for s in again] == [r["text"] for r in records]


def test_predict_raw_text_with_another_tokenizer(jsonl_model, tmp_path, capsys):
    _, model = jsonl_model
    src = tmp_path / "raw.txt"
    src.write_text("He isn't sure, e.g. about U.S. rates.\n", encoding="utf-8")
    assert main(["-q", "predict", str(model), str(src), "--tokenizer", "english"]) == 0
    lines = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in lines] == [
        "He",
        "is",
        "n't",
        "sure",
        ",",
        "e.g.",
        "about",
        "U.S.",
        "rates",
        ".",
    ]
    assert main(["-q", "predict", str(model), str(src), "--tokenizer", "english", "--nbest", "2"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(row["nbest"]) == 2 and row["text"] == "He isn't sure, e.g. about U.S. rates."


def test_predict_tags_a_column_file_into_records(jsonl_model, conll, capsys):
    _, model = jsonl_model
    assert main(["-q", "predict", str(model), str(conll), "--output-format", "labelstudio"]) == 0
    tasks = json.loads(capsys.readouterr().out)
    assert tasks[0]["data"]["text"].startswith("Confidence in the pound is widely expected")
    assert len(tasks) == 6 and all(r["value"]["text"] for t in tasks for r in t["predictions"][0]["result"])


def test_predict_reads_records_from_stdin(jsonl_model, monkeypatch, capsys):
    import io
    import sys

    _, model = jsonl_model
    for stdin in (
        '[{"text": "The pound fell ."},\n {"text": "He reckons ."}]\n',
        '{"text": "The pound fell ."}\n\n{"text": "He reckons ."}\n',
        "The pound fell .\nHe reckons .\n",
    ):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        assert main(["-q", "predict", str(model), "-", "--output-format", "spacy-jsonl"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [r["text"] for r in rows] == ["The pound fell .", "He reckons ."]


def test_predict_raw_text_to_doccano(jsonl_model, tmp_path, capsys):
    _, model = jsonl_model
    src = tmp_path / "raw.txt"
    src.write_text("He reckons the deficit will narrow .\n\nThe pound is expected to fall .\n", encoding="utf-8")
    assert main(["-q", "predict", str(model), str(src), "--output-format", "doccano"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in rows] == ["He reckons the deficit will narrow .", "The pound is expected to fall ."]
