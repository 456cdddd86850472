"""conlleval-compatible scoring, checked against seqeval and hand-computed conlleval output."""

from __future__ import annotations

import random
import warnings

import pytest

from seqlab.data.schemes import convert, spans_to_tags
from seqlab.errors import SeqlabError
from seqlab.evaluation.metrics import format_report, score_file, span_f1, token_accuracy

seqeval_metrics = pytest.importorskip("seqeval.metrics")

# Three sentences with conlleval's malformed cases: I- after O, type changes inside a chunk, IOB1 B-.
CONLLEVAL_FILE = """\
w1 O I-PER
w2 I-PER I-PER
w3 O O
w4 B-LOC B-LOC
w5 I-LOC I-ORG

x1 B-ORG B-ORG
x2 I-ORG I-ORG
x3 O O
x4 O I-PER
x5 I-PER I-PER

y1 I-MISC I-MISC
y2 B-MISC B-MISC
"""

# Worked out by hand with conlleval's rules: gold chunks PER(w2) LOC(w4-5) ORG(x1-2) PER(x5) MISC(y1) MISC(y2);
# predicted PER(w1-2) LOC(w4) ORG(w5) ORG(x1-2) PER(x4-5) MISC(y1) MISC(y2); 9 of 12 tags equal.
CONLLEVAL_REPORT = """\
processed 12 tokens with 6 phrases; found: 7 phrases; correct: 3.
accuracy:  75.00%; precision:  42.86%; recall:  50.00%; FB1:  46.15
              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  1
             MISC: precision: 100.00%; recall: 100.00%; FB1: 100.00  2
              ORG: precision:  50.00%; recall: 100.00%; FB1:  66.67  2
              PER: precision:   0.00%; recall:   0.00%; FB1:   0.00  2
"""


def test_score_file_matches_hand_computed_conlleval(tmp_path):
    path = tmp_path / "eval.txt"
    path.write_text(CONLLEVAL_FILE, encoding="utf-8")
    scores = score_file(path, "BIO")
    assert (scores.found_gold, scores.found_pred, scores.correct, scores.tokens) == (6, 7, 3, 12)
    assert scores.precision == pytest.approx(300 / 7)
    assert scores.recall == pytest.approx(50.0)
    assert scores.f1 == pytest.approx(2 * (300 / 7) * 50 / (300 / 7 + 50))
    assert scores.accuracy == pytest.approx(75.0)
    assert scores.per_type["ORG"].found_pred == 2 and scores.per_type["ORG"].correct == 1
    assert format_report(scores) == CONLLEVAL_REPORT
    assert score_file(path, "IOB1").f1 == pytest.approx(scores.f1)  # extraction does not depend on the scheme


def test_nothing_predicted_or_nothing_to_find():
    scores = span_f1([["B-X", "O"]], [["O", "O"]])
    assert (scores.precision, scores.recall, scores.f1) == (0.0, 0.0, 0.0)
    assert scores.accuracy == 50.0
    empty = span_f1([["O"]], [["O"]])
    assert (empty.precision, empty.recall, empty.f1, empty.accuracy) == (0.0, 0.0, 0.0, 100.0)
    assert empty.per_type == {}
    assert span_f1([], []).tokens == 0
    assert format_report(span_f1([], [])) == "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"


def test_counts_property():
    scores = span_f1([["B-X", "I-X", "B-Y"]], [["B-X", "I-X", "O"]])
    assert scores.counts == {"found_gold": 2, "found_pred": 1, "correct": 1, "tokens": 3}
    assert scores.per_type["Y"].recall == 0.0 and scores.per_type["X"].f1 == 100.0


def test_token_accuracy():
    assert token_accuracy([["NN", "DT"], ["VB"]], [["NN", "NN"], ["VB"]]) == pytest.approx(200 / 3)
    assert token_accuracy([], []) == 0.0


def test_length_mismatch_is_an_error():
    with pytest.raises(SeqlabError, match="sentence 2"):
        span_f1([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(SeqlabError):
        token_accuracy([["O"]], [])


def _random_tags(rng: random.Random, length: int) -> list[str]:
    """Arbitrary, often malformed, BIO/IOB1 tags."""
    return [rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]) for _ in range(length)]


@pytest.mark.parametrize("scheme", ["BIO", "IOB1"])
def test_agrees_with_seqeval_on_random_malformed_sequences(scheme):
    rng = random.Random(1234 if scheme == "BIO" else 4321)
    for _ in range(300):
        n = rng.randint(1, 4)
        gold = [_random_tags(rng, rng.randint(1, 8)) for _ in range(n)]
        pred = [_random_tags(rng, len(g)) for g in gold]
        scores = span_f1(gold, pred, scheme)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert scores.precision == pytest.approx(100 * seqeval_metrics.precision_score(gold, pred))
            assert scores.recall == pytest.approx(100 * seqeval_metrics.recall_score(gold, pred))
            assert scores.f1 == pytest.approx(100 * seqeval_metrics.f1_score(gold, pred))
            assert scores.accuracy == pytest.approx(100 * seqeval_metrics.accuracy_score(gold, pred))
            report = seqeval_metrics.classification_report(gold, pred, output_dict=True)
        for chunk_type, ts in scores.per_type.items():
            if ts.found_gold:
                assert report[chunk_type]["support"] == ts.found_gold
                assert report[chunk_type]["precision"] * 100 == pytest.approx(ts.precision)
                assert report[chunk_type]["recall"] * 100 == pytest.approx(ts.recall)
                assert report[chunk_type]["f1-score"] * 100 == pytest.approx(ts.f1)


def _random_well_formed(rng: random.Random, length: int) -> list[str]:
    spans, i = [], 0
    while i < length:
        size = rng.randint(1, 3)
        if rng.random() < 0.5 and i + size <= length:
            spans.append((rng.choice(["PER", "LOC"]), i, i + size))
            i += size
        else:
            i += 1
    return spans_to_tags(spans, length, "BIO")


@pytest.mark.parametrize("scheme", ["BIOES", "BMES", "IOB1"])
def test_other_schemes_score_like_bio(scheme):
    rng = random.Random(7)
    gold = [_random_well_formed(rng, rng.randint(1, 10)) for _ in range(200)]
    pred = [_random_well_formed(rng, len(g)) for g in gold]
    bio = span_f1(gold, pred, "BIO")
    other = span_f1([convert(g, "BIO", scheme) for g in gold], [convert(p, "BIO", scheme) for p in pred], scheme)
    assert bio.counts == other.counts
    assert (bio.precision, bio.recall, bio.f1) == (other.precision, other.recall, other.f1)
    assert bio.per_type == other.per_type
    assert 0 < bio.f1 < 100


@pytest.mark.parametrize(
    "content, message, line",
    [
        ("a B-X B-X\nb I-X\n", "expected 3 columns", 2),
        ("a B-X PER\n", "tag 'PER' is not a chunk tag", 1),
        ("B-X\n", "at least 2 columns", 1),
    ],
)
def test_score_file_errors(tmp_path, content, message, line):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SeqlabError, match=message) as err:
        score_file(path, "BIO")
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_score_file_missing(tmp_path):
    with pytest.raises(SeqlabError, match="no such file"):
        score_file(tmp_path / "missing.txt", "BIO")
