"""Tag schemes: conlleval chunk rules, lossless conversion, detection, CRF constraints."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqlab.data import schemes
from seqlab.data.schemes import (
    IndexConverter,
    allowed_transitions,
    convert,
    detect_scheme,
    get_spans,
    normalize_scheme,
    spans_to_tags,
)
from seqlab.errors import SeqlabError

SCHEMES = ["IOB1", "BIO", "BIOES", "BMES"]


@pytest.mark.parametrize(
    "name, expected",
    [("bio", "BIO"), ("IOB2", "BIO"), ("iob1", "IOB1"), ("iobes", "BIOES"), ("BIOES", "BIOES"), ("Bmes", "BMES")],
)
def test_normalize_scheme_aliases(name, expected):
    assert normalize_scheme(name) == expected


def test_unknown_scheme_message():
    with pytest.raises(SeqlabError) as err:
        normalize_scheme("BILOU")
    assert str(err.value) == "unknown tag scheme 'BILOU' (expected one of IOB1, BIO, BIOES, BMES)"


@pytest.mark.parametrize(
    "tags, spans",
    [
        ("B-PER I-PER O B-LOC", [("PER", 0, 2), ("LOC", 3, 4)]),
        ("O I-PER I-PER", [("PER", 1, 3)]),  # conlleval: I after O starts a chunk
        ("B-PER I-LOC", [("PER", 0, 1), ("LOC", 1, 2)]),
        ("I-PER B-PER", [("PER", 0, 1), ("PER", 1, 2)]),  # IOB1 adjacent chunks
        ("B-PER B-PER", [("PER", 0, 1), ("PER", 1, 2)]),
        ("I-PER I-LOC I-LOC", [("PER", 0, 1), ("LOC", 1, 3)]),
        ("B I O B", [("", 0, 2), ("", 3, 4)]),  # untyped tags
        ("B-PER-NAM I-PER-NAM", [("PER-NAM", 0, 2)]),  # type split on the first dash
        ("B-X I-X E-X S-X O", [("X", 0, 3), ("X", 3, 4)]),
        ("B-X M-X E-X S-Y", [("X", 0, 3), ("Y", 3, 4)]),
        ("E-X E-X", [("X", 0, 1), ("X", 1, 2)]),
        ("S-X I-X", [("X", 0, 1), ("X", 1, 2)]),
        ("O E-X", [("X", 1, 2)]),
        ("", []),
    ],
)
def test_get_spans_conlleval_rules(tags, spans):
    assert get_spans(tags.split(), "BIO") == spans


def test_get_spans_rejects_unknown_prefix():
    with pytest.raises(SeqlabError, match="'PER'"):
        get_spans(["PER"], "BIO")


def _random_spans(rng: random.Random, length: int) -> list[tuple[str, int, int]]:
    spans, i = [], 0
    while i < length:
        if rng.random() < 0.4:
            size = rng.randint(1, min(4, length - i))
            spans.append((rng.choice(["PER", "LOC", ""]), i, i + size))
            i += size
        else:
            i += 1
    return spans


@given(st.randoms(use_true_random=False), st.integers(0, 12), st.sampled_from(SCHEMES), st.sampled_from(SCHEMES))
def test_convert_round_trip(rng, length, src, dst):
    spans = _random_spans(rng, length)
    tags = spans_to_tags(spans, length, src)
    assert get_spans(tags, src) == spans
    there = convert(tags, src, dst)
    assert get_spans(there, dst) == spans
    assert convert(there, dst, src) == tags


def test_convert_examples():
    bio = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-LOC"]
    assert convert(bio, "BIO", "BIOES") == ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "I-LOC", "E-LOC"]
    assert convert(bio, "BIO", "BMES") == ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "M-LOC", "E-LOC"]
    assert convert(bio, "BIO", "IOB1") == ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-LOC"]
    assert convert(["O", "I-PER"], "IOB1", "BIO") == ["O", "B-PER"]


@pytest.mark.parametrize(
    "corpus, scheme",
    [
        ([["B-PER", "I-PER", "O"], ["O", "B-LOC"]], "BIO"),
        ([["I-PER", "I-PER", "O"], ["O", "I-LOC", "B-LOC"]], "IOB1"),
        ([["I-PER", "O"], ["B-LOC"]], "BIO"),  # a B- after O rules out IOB1
        ([["B-PER", "E-PER", "O", "S-LOC"]], "BIOES"),
        ([["B-PER", "M-PER", "E-PER"]], "BMES"),
        ([["S-PER", "O"]], "BIOES"),
        ([["O"]], "BIO"),
    ],
)
def test_detect_scheme(corpus, scheme):
    assert detect_scheme(corpus) == scheme


def test_detect_scheme_on_converted_corpus():
    rng = random.Random(5)
    corpus = [spans_to_tags(_random_spans(rng, 10), 10, "BIO") for _ in range(50)]
    for scheme in ["IOB1", "BIO", "BIOES", "BMES"]:
        assert detect_scheme([convert(t, "BIO", scheme) for t in corpus]) == scheme


def _tag_vocab(scheme: str) -> list[str]:
    prefixes = {"IOB1": "BI", "BIO": "BI", "BIOES": "BIES", "BMES": "BMES"}[scheme]
    return ["<pad>", "O"] + [f"{p}-{t}" for p in prefixes for t in ("PER", "LOC")]


def _well_formed(tags: list[str], scheme: str) -> bool:
    return convert(tags, scheme, scheme) == tags


@pytest.mark.parametrize("scheme", SCHEMES)
def test_allowed_transitions_match_well_formedness(scheme):
    """A sequence is well-formed iff every step, its start and its end are allowed."""
    vocab = _tag_vocab(scheme)
    allowed, start, end = allowed_transitions(vocab, scheme)
    index = {t: i for i, t in enumerate(vocab)}
    rng = random.Random(0)
    scheme_tags = vocab[1:]
    seen_ok = 0
    for _ in range(3000):
        tags = [rng.choice(scheme_tags) for _ in range(rng.randint(1, 4))]
        ids = [index[t] for t in tags]
        ok = start[ids[0]] and end[ids[-1]] and all(allowed[a][b] for a, b in zip(ids, ids[1:]))
        assert ok == _well_formed(tags, scheme), tags
        seen_ok += ok
    assert seen_ok > 50


@pytest.mark.parametrize("scheme", SCHEMES)
def test_allowed_transitions_special_tags_isolated(scheme):
    vocab = _tag_vocab(scheme) + ["<start>"]
    allowed, start, end = allowed_transitions(vocab, scheme)
    for special in (0, len(vocab) - 1):
        assert not any(allowed[special]) and not any(row[special] for row in allowed)
        assert not start[special] and not end[special]
    assert len(allowed) == len(vocab) and all(len(row) == len(vocab) for row in allowed)


def test_allowed_transitions_examples():
    vocab = ["O", "B-PER", "I-PER", "I-LOC", "E-PER"]
    allowed, start, _end = allowed_transitions(vocab, "BIO")
    assert allowed[1][2] and not allowed[0][2] and not allowed[1][3]
    assert not start[2] and start[1]
    assert not any(allowed[4]) and not start[4]  # E- is not a BIO tag


@pytest.mark.parametrize("src", SCHEMES)
@pytest.mark.parametrize("dst", SCHEMES)
def test_index_converter_equals_convert(src, dst):
    """Fast tag-by-tag conversion == conversion through chunks, on well-formed and random sequences
    (the same scheme on both sides passes the labels through untouched, malformed or not)."""
    vocab = _tag_vocab(src)
    to_labels = IndexConverter(vocab, src, dst)
    index = {t: i for i, t in enumerate(vocab)}
    rng = random.Random(1)
    for k in range(2000):
        length = rng.randint(1, 8)
        if k % 2:  # well-formed: rendered from chunks
            tags = spans_to_tags(_random_spans(rng, length), length, src)
            tags = [t if t in index else "O" for t in tags]  # type "" may be outside a tiny vocab
        else:  # anything, malformed included
            tags = [rng.choice(vocab[1:]) for _ in range(length)]
        expected = tags if src == dst else convert(tags, src, dst)
        assert to_labels([index[t] for t in tags]) == expected, tags


@pytest.mark.parametrize("src", SCHEMES)
@pytest.mark.parametrize("dst", SCHEMES)
def test_index_converter_rows_equal_the_call_on_each_row(src, dst):
    """A batch converted at once (padded rows of any length, well-formed or not, padding of any value) gives
    each row what converting it alone gives."""
    vocab = _tag_vocab(src)
    to_labels = IndexConverter(vocab, src, dst)
    index = {t: i for i, t in enumerate(vocab)}
    rng = random.Random(2)
    for _ in range(200):
        rows = []
        for k in range(rng.randint(1, 9)):
            length = rng.randint(1, 8)
            if k % 2:
                tags = spans_to_tags(_random_spans(rng, length), length, src)
                rows.append([index.get(t, index["O"]) for t in tags])
            else:
                rows.append([rng.randrange(1, len(vocab)) for _ in range(length)])  # malformed too
        lengths = np.array([len(r) for r in rows])
        tags = np.array([r + [rng.randrange(len(vocab))] * (lengths.max() - len(r)) for r in rows])
        assert to_labels.rows(tags, lengths) == [to_labels(r) for r in rows]


def test_index_converter_takes_the_table_for_well_formed_input(monkeypatch):
    vocab = _tag_vocab("BIOES")
    to_labels = IndexConverter(vocab, "BIOES", "BIO")
    calls = []
    monkeypatch.setattr(schemes, "convert", lambda *a: calls.append(a) or [])
    ids = [vocab.index(t) for t in ["B-PER", "E-PER", "O", "S-LOC"]]
    assert to_labels(ids) == ["B-PER", "I-PER", "O", "B-LOC"]
    assert calls == []
    to_labels([vocab.index("E-PER")])  # malformed: falls back to the chunk route
    assert len(calls) == 1


def test_index_converter_same_scheme_is_a_lookup():
    assert IndexConverter(["<pad>", "NN", "VB"], "none", "none")([2, 1]) == ["VB", "NN"]


# ----- a file's tags against its declared scheme -----------------------------------------------------------

_SCHEME_PREFIXES = {"IOB1": set("BIO"), "BIO": set("BIO"), "BIOES": set("BIOES"), "BMES": set("BMES") | {"O"}}


def _typed_corpus(rng: random.Random, sentences: int, scheme: str, types: tuple[str, ...]) -> list[list[str]]:
    """Well-formed sentences of ``scheme`` whose chunks all take one of ``types`` ("" alone: no types)."""
    corpus = []
    for _ in range(sentences):
        length = rng.randint(1, 8)
        spans = [(rng.choice(types), s, e) for _, s, e in _random_spans(rng, length)]
        corpus.append(spans_to_tags(spans, length, scheme))
    return corpus


def _located(corpus: list[list[str]]) -> list[tuple[int, list[str]]]:
    """(first line, tags) as a file lays them out: one tag per line, a blank line after each sentence."""
    out, line = [], 1
    for tags in corpus:
        out.append((line, tags))
        line += len(tags) + 1
    return out


def _line_of(corpus: list[list[str]], wanted) -> tuple[int, str] | None:
    """(line, tag) of the first tag for which ``wanted(tag)`` holds."""
    for line, tags in _located(corpus):
        for k, tag in enumerate(tags):
            if wanted(tag):
                return line + k, tag
    return None


CORPORA = st.builds(
    lambda rng, n, scheme, types: (scheme, _typed_corpus(rng, n, scheme, types)),
    st.randoms(use_true_random=False),
    st.integers(1, 12),
    st.sampled_from(SCHEMES),
    st.sampled_from([("PER", "LOC"), ("",)]),
)


@given(CORPORA)
def test_auto_picks_a_scheme_that_the_file_fits(case):
    scheme, corpus = case
    schemes.check_scheme(_located(corpus), scheme, "f.txt", "data.scheme")  # declared right: accepted
    schemes.check_scheme(_located(corpus), detect_scheme(corpus), "f.txt", None)  # auto's pick: accepted


@given(CORPORA, st.sampled_from(SCHEMES))
def test_converted_files_fit_their_new_scheme(case, dst):
    scheme, corpus = case
    schemes.check_scheme(_located([convert(t, scheme, dst) for t in corpus]), dst, "f.txt", "data.scheme")


@given(CORPORA, st.sampled_from(SCHEMES))
def test_tags_outside_the_declared_scheme_are_refused_at_their_line(case, declared):
    _, corpus = case
    foreign = _line_of(corpus, lambda tag: tag.partition("-")[0] not in _SCHEME_PREFIXES[declared])
    in_chunks = {t.partition("-")[0] for tags in corpus for t in tags} - {"O"}
    if foreign is None and declared in ("BIOES", "BMES") and in_chunks and not in_chunks & {"E", "S"}:
        foreign = _line_of(corpus, lambda tag: tag != "O")  # no chunk ends: BIO or IOB1 data
    if foreign is None:
        schemes.check_scheme(_located(corpus), declared, "f.txt", "data.scheme")
        return
    line, tag = foreign
    with pytest.raises(SeqlabError) as err:
        schemes.check_scheme(_located(corpus), declared, "f.txt", "data.scheme")
    message = str(err.value)
    assert err.value.line == line and message.startswith(f"f.txt:{line}: tag {tag!r}") and "\n" not in message
    fit = schemes.fitting_scheme(corpus)
    assert f"fit {fit}: set data.scheme to {fit}" in message and f"convert(tags, '{fit}', '{declared}')" in message


@pytest.mark.parametrize(
    "tags, declared, line, needles",
    [
        ("B-LOC I-LOC O S-LOC", "BIO", 4, ["'S-LOC' is not a BIO tag", "fit BIOES", "S- becomes B-, E- becomes I-"]),
        ("B-ORG M-ORG E-ORG", "IOB1", 2, ["'M-ORG' is not an IOB1 tag", "fit BMES"]),
        ("B-PER I-PER O", "BMES", 2, ["'I-PER' is not a BMES tag", "fit BIO", "last I- becomes E-"]),
        ("B-PER I-PER O", "BIOES", 1, ["no E- or S- tag", "fit BIO"]),
        ("B-PER I-PER M-PER E-PER", "BMES", 2, ["'I-PER'", "mixes I- and M-"]),
        ("B-PER I-PER O I", "BIO", 4, ["'I' has no type", "'B-PER' on line 1"]),
        ("B I B-X", "BIO", 3, ["'B-X' has a type"]),
        ("O B- I-X", "BIO", 2, ["'B-' has an empty type"]),
        ("O-X", "BIO", 1, ["O takes no type"]),
        ("X-NP", "BIO", 1, ["'X-NP' is not a chunk tag"]),
    ],
)
def test_check_scheme_messages(tags, declared, line, needles):
    with pytest.raises(SeqlabError) as err:
        schemes.check_scheme([(1, tags.split())], declared, "f.txt", "data.scheme")
    assert err.value.line == line, str(err.value)
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_a_model_fixes_the_scheme():
    with pytest.raises(SeqlabError, match=r"fit BIOES but the model reads BIO: convert the file"):
        schemes.check_scheme([(3, ["S-LOC"])], "BIO", "f.txt")
