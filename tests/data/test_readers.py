"""Column-file and raw-text readers, and the CoNLL writer."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqlab.data.readers import (
    numbered_lines,
    read_bmes,
    read_chars_with_seg_digits,
    read_conll,
    read_raw,
    write_conll,
)
from seqlab.errors import SeqlabError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CONLL2000_TRAIN = SHARED / "conll2000" / "train.txt"
ONTONOTES_DEV = SHARED / "ontonotes4" / "dev.char.bmes"


def write(tmp_path: Path, text: str, name: str = "data.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_read_conll_columns_pound_and_docstart(tmp_path):
    path = write(
        tmp_path,
        "-DOCSTART- -X- O\n\nConfidence NN B-NP\n# #\tB-NP\n\nin IN B-PP\n",
    )
    stats: dict = {}
    sentences = read_conll(path, stats=stats)
    assert [s.tokens for s in sentences] == [["Confidence", "#"], ["in"]]
    assert [s.labels for s in sentences] == [["B-NP", "B-NP"], ["B-PP"]]
    assert sentences[0].extra["columns"] == [["NN"], ["#"]]
    assert [s.line for s in sentences] == [3, 6]
    assert sentences[0].source == str(path)
    assert stats["empty_skipped"] == 0


def test_read_conll_other_label_column_and_unlabeled(tmp_path):
    path = write(tmp_path, "a DT B-NP\nb NN I-NP\n")
    pos = read_conll(path, label_column=1)[0]
    assert pos.labels == ["DT", "NN"] and pos.extra["columns"] == [["B-NP"], ["I-NP"]]
    raw = read_conll(path, label_column=None)[0]
    assert raw.labels is None and raw.extra["columns"] == [["DT", "B-NP"], ["NN", "I-NP"]]


def test_empty_sentences_are_skipped_counted_and_logged(tmp_path, caplog):
    path = write(tmp_path, "a O\n\n\n\nb B-X\n\n\nc O\n")
    stats: dict = {}
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        sentences = read_conll(path, stats=stats)
    assert [s.tokens for s in sentences] == [["a"], ["b"], ["c"]]
    assert stats["empty_skipped"] == 3
    assert "skipped 3 empty" in caplog.text


def test_crlf_and_bom(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes("\ufeffa O\r\nb B-X\r\n\r\nc O\r\n".encode("utf-8"))
    sentences = read_conll(path)
    assert [s.tokens for s in sentences] == [["a", "b"], ["c"]]
    assert sentences[0].labels == ["O", "B-X"]


@pytest.mark.parametrize(
    "content, kwargs, message, line",
    [
        ("a O\nb O X\n", {}, "expected 2 columns (as on the first line), got 3", 2),
        ("a O\n", {"label_column": 2}, "label_column 2 is out of range", 1),
        ("a O\n", {"token_column": -3}, "token_column -3 is out of range", 1),
        ("a O\n", {"label_column": 0}, "is the token column", 1),
        ("", {}, "no sentences", None),
        ("\n\n-DOCSTART- O\n\n", {}, "no sentences", None),
    ],
)
def test_read_conll_errors(tmp_path, content, kwargs, message, line):
    path = write(tmp_path, content)
    with pytest.raises(SeqlabError, match=re.escape(message)) as err:
        read_conll(path, **kwargs)
    assert err.value.path == path and err.value.line == line
    expected_prefix = f"{path}:{line}: " if line else f"{path}: "
    assert str(err.value).startswith(expected_prefix)


def test_missing_file(tmp_path):
    with pytest.raises(SeqlabError, match="no such file"):
        read_conll(tmp_path / "nope.txt")
    with pytest.raises(SeqlabError, match="no such file"):
        read_raw(tmp_path / "nope.txt")


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("a O\n\ncafé O\n".encode("latin-1"))
    with pytest.raises(SeqlabError, match="not valid utf-8") as err:
        read_conll(path)
    assert err.value.line == 3
    assert read_conll(path, encoding="latin-1")[1].tokens == ["café"]


def test_read_bmes(tmp_path):
    path = write(tmp_path, "上 B-GPE\n海 E-GPE\n人 O\n\n\n张 S-PER\n")
    stats: dict = {}
    sentences = read_bmes(path, stats=stats)
    assert [s.tokens for s in sentences] == [["上", "海", "人"], ["张"]]
    assert sentences[0].labels == ["B-GPE", "E-GPE", "O"]
    assert stats["empty_skipped"] == 1


def test_read_chars_with_seg_digits(tmp_path):
    path = write(tmp_path, "科0 B-PER.NAM\n比1 I-PER.NAM\n30 O\n")
    assert read_chars_with_seg_digits(path)[0].tokens == ["科", "比", "3"]
    assert read_chars_with_seg_digits(path, strip_digit=False)[0].tokens == ["科0", "比1", "30"]
    assert read_conll(path, strip_seg_digit=True)[0].labels == ["B-PER.NAM", "I-PER.NAM", "O"]
    bad = write(tmp_path, "科0 O\n比 O\n", "bad.txt")
    with pytest.raises(SeqlabError, match="segmentation digit") as err:
        read_chars_with_seg_digits(bad)
    assert err.value.line == 2


def test_read_raw_path_and_lines(tmp_path):
    path = write(tmp_path, "Hello  world .\n\n  \nSecond\tline\n")
    sentences = read_raw(path)
    assert [s.tokens for s in sentences] == [["Hello", "world", "."], ["Second", "line"]]
    assert [s.line for s in sentences] == [1, 4] and sentences[0].labels is None
    chars = read_raw(["上海 人\n", "\n", "好"], chars=True)
    assert [s.tokens for s in chars] == [["上", "海", "人"], ["好"]]
    assert chars[0].source == "<stdin>" and chars[1].line == 3


def test_write_conll_round_trip(tmp_path):
    path = write(tmp_path, "Confidence NN B-NP\n# # B-NP\n\nin IN B-PP\n")
    sentences = read_conll(path)
    out = tmp_path / "out.txt"
    write_conll(sentences, [["B-NP", "I-NP"], ["O"]], out)
    assert out.read_text(encoding="utf-8") == "Confidence NN B-NP B-NP\n# # B-NP I-NP\n\nin IN B-PP O\n\n"
    buffer = io.StringIO()
    write_conll(read_raw(["a b"]), [["X", "Y"]], buffer)
    assert buffer.getvalue() == "a X\nb Y\n\n"
    again = read_conll(out, label_column=-2)
    assert [s.labels for s in again] == [s.labels for s in sentences]


def test_write_conll_length_mismatch(tmp_path):
    sentences = read_raw(["a b"])
    with pytest.raises(ValueError):
        write_conll(sentences, [["X"]], io.StringIO())


@pytest.mark.skipif(not CONLL2000_TRAIN.exists(), reason="shared CoNLL-2000 data not present")
def test_conll2000_train_keeps_pound_tokens():
    sentences = read_conll(CONLL2000_TRAIN)
    assert len(sentences) == 8936
    lines = CONLL2000_TRAIN.read_text(encoding="utf-8").splitlines()
    pound_lines = sum(1 for line in lines if line.split()[:1] == ["#"])
    assert pound_lines >= 32
    assert sum(s.tokens.count("#") for s in sentences) == pound_lines
    assert sum(len(s) for s in sentences) == sum(1 for line in lines if line.strip())
    assert all(len(s.extra["columns"][0]) == 1 for s in sentences)


@pytest.mark.skipif(not ONTONOTES_DEV.exists(), reason="shared OntoNotes 4 data not present")
def test_ontonotes_dev_reads():
    stats: dict = {}
    sentences = read_bmes(ONTONOTES_DEV, stats=stats)
    assert len(sentences) == 4301
    assert all(len(s) > 0 and len(s.labels) == len(s) for s in sentences)
    assert stats["empty_skipped"] >= 0


# ----- line endings: \n, \r\n and a lone \r all end a line, nothing else does ---------------------------------

ENDINGS = ("\n", "\r\n", "\r")
# token characters include those that str.splitlines would split on (\x0b, \x0c, \x1c-\x1e, \x85, \u2028,
# \u2029): inside a token they are text
TOKEN = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\r\n\ufeff"), min_size=1, max_size=4
)
SENTENCES = st.lists(
    st.lists(st.tuples(TOKEN, st.sampled_from(["O", "B-X", "I-X"])), min_size=1, max_size=5), min_size=1, max_size=6
)


def render(lines: list[str], endings: list[str], final: bool) -> str:
    """``lines`` joined with the given endings (cycled); ``final``: the last line has one too. A lone \\r
    directly followed by an empty line's \\n would read as one \\r\\n: that empty line ends with \\r instead."""
    out, previous = [], ""
    for i, line in enumerate(lines):
        ending = endings[i % len(endings)]
        if previous == "\r" and not line and ending == "\n":
            ending = "\r"
        out.append(line + (ending if final or i < len(lines) - 1 else ""))
        previous = ending
    return "".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sentences=SENTENCES,
    endings=st.lists(st.sampled_from(ENDINGS), min_size=1, max_size=6),
    final=st.booleans(),
    blanks=st.integers(1, 2),
)
def test_any_mix_of_line_endings_reads_as_newlines(tmp_path, sentences, endings, final, blanks):
    lines: list[str] = []
    for sentence in sentences:
        lines += [f"{token} {label}" for token, label in sentence] + [""] * blanks
    plain = write(tmp_path, render(lines, ["\n"], final), "plain.txt")
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(render(lines, endings, final).encode("utf-8"))
    want, got = read_conll(plain), read_conll(mixed)
    assert [(s.tokens, s.labels, s.line) for s in got] == [(s.tokens, s.labels, s.line) for s in want]
    assert [s.tokens for s in got] == [[token for token, _ in sentence] for sentence in sentences]
    assert [(s.tokens, s.line) for s in read_raw(mixed)] == [(s.tokens, s.line) for s in read_raw(plain)]
    stream = io.BytesIO(mixed.read_bytes())  # stdin: an open binary stream
    assert list(numbered_lines(stream, "utf-8", "<stdin>")) == list(numbered_lines(plain, "utf-8"))


def test_cr_only_file_has_its_lines(tmp_path):
    path = tmp_path / "cr.txt"
    path.write_bytes(b"a O\rb B-X\r\rc O\r")
    sentences = read_conll(path)
    assert [(s.tokens, s.line) for s in sentences] == [(["a", "b"], 1), (["c"], 4)]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a O\rb B-X\rc\r")
    with pytest.raises(SeqlabError, match="expected 2 columns") as err:
        read_conll(bad)
    assert err.value.line == 3


def test_other_unicode_line_breaks_are_text(tmp_path):
    path = tmp_path / "seps.txt"
    path.write_bytes("a\x85b O\nc\u2028d\x0be\x0c B-X\n".encode("utf-8"))
    assert read_conll(path)[0].tokens == ["a\x85b", "c\u2028d\x0be\x0c"]


def test_undecodable_bytes_after_a_cr_name_their_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"a O\rb O\r\nc\xff O\r")
    with pytest.raises(SeqlabError, match="not valid utf-8") as err:
        read_conll(path)
    assert err.value.line == 3
