"""Span scores split by entities seen in a reference (``seqlab analyze --seen-in``): against conlleval's totals
and a brute-force count, and through the command line."""

from __future__ import annotations

import json
import random

import pytest

from seqlab.data.schemes import get_spans
from seqlab.data.sentence import Sentence
from seqlab.evaluation.metrics import span_f1
from seqlab.evaluation.seen import entity_keys, format_seen_split, seen_split
from tests.test_cli import assert_user_error, run


def _random_tags(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC"]) for _ in range(n)]


def _corpus(seed: int, sentences: int = 40):
    rng = random.Random(seed)
    tokens = [[rng.choice("abcd") for _ in range(rng.randint(1, 8))] for _ in range(sentences)]
    return tokens, [_random_tags(rng, len(t)) for t in tokens], [_random_tags(rng, len(t)) for t in tokens]


def _brute_force(tokens, gold, pred, known, scheme="BIO"):
    """Each group's (found_gold, found_pred, correct), span by span."""
    out = {True: [0, 0, 0], False: [0, 0, 0]}
    for words, g, p in zip(tokens, gold, pred):
        gs, ps = get_spans(g, scheme), get_spans(p, scheme)
        for t, a, b in gs:
            key = (" ".join(words[a:b]), t)
            out[key in known][0] += 1
            out[key in known][2] += (t, a, b) in ps
        for t, a, b in ps:
            out[(" ".join(words[a:b]), t) in known][1] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_groups_match_brute_force_and_add_up_to_conlleval(seed):
    tokens, gold, pred = _corpus(seed)
    reference = [Sentence(t, g) for t, g in zip(*_corpus(seed + 100)[:2])]
    known = entity_keys(reference, "BIO", " ")
    split = seen_split(tokens, gold, pred, known, "BIO", " ")
    expected = _brute_force(tokens, gold, pred, known)
    for group, scores in ((True, split.seen), (False, split.unseen)):
        assert [scores.found_gold, scores.found_pred, scores.correct] == expected[group]
    total = span_f1(gold, pred, "BIO")
    assert split.seen.found_gold + split.unseen.found_gold == total.found_gold
    assert split.seen.found_pred + split.unseen.found_pred == total.found_pred
    assert split.seen.correct + split.unseen.correct == total.correct
    assert 0 < split.seen.found_gold < total.found_gold  # both groups are exercised


def test_an_empty_reference_leaves_every_span_unseen_and_a_full_one_every_span_seen():
    tokens, gold, pred = _corpus(7)
    total = span_f1(gold, pred, "BIO")
    none = seen_split(tokens, gold, pred, set(), "BIO", " ")
    assert none.seen.found_gold == none.seen.found_pred == 0
    assert (none.unseen.precision, none.unseen.recall, none.unseen.f1) == pytest.approx(
        (total.precision, total.recall, total.f1)
    )
    everything = {k for seqs in (gold, pred) for k in entity_keys(map(Sentence, tokens, seqs), "BIO", " ")}
    full = seen_split(tokens, gold, pred, everything, "BIO", " ")
    assert full.unseen.found_gold == full.unseen.found_pred == 0
    assert full.seen.f1 == pytest.approx(total.f1)


def test_keys_join_tokens_by_the_corpus_kind_and_keep_the_type():
    chars = Sentence(list("张三在北京"), ["B-PER", "E-PER", "O", "B-LOC", "E-LOC"])
    assert entity_keys([chars], "BMES", "") == {("张三", "PER"), ("北京", "LOC")}
    words = Sentence(["New", "York", "is"], ["B-LOC", "I-LOC", "O"])
    assert entity_keys([words, Sentence(["x"], None)], "BIO", " ") == {("New York", "LOC")}
    # the same text with another type is not seen
    split = seen_split([["New", "York"]], [["B-ORG", "I-ORG"]], [["B-ORG", "I-ORG"]], {("New York", "LOC")}, "BIO", " ")
    assert split.unseen.correct == 1 and split.seen.found_gold == 0
    assert "unseen: gold      1" in format_seen_split(split, "train.txt")


def test_analyze_seen_in_on_the_command_line(shared_tiny_model, tmp_path):
    data, model = shared_tiny_model
    proc = run("analyze", model, data, "--seen-in", data, "--json")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)[0]["seen"]
    assert seen["unseen"]["found_gold"] == 0 and seen["seen"]["found_gold"] > 0  # the reference is the data itself
    text = run("analyze", model, data, "--seen-in", data)
    assert text.returncode == 0 and f"among the {seen['reference_entities']} of {data}" in text.stdout
    assert json.loads(run("analyze", model, data, "--json").stdout)[0]["seen"] is None
    unlabeled = tmp_path / "raw.txt"
    unlabeled.write_text("The\ndollar\n", encoding="utf-8")
    assert_user_error(run("analyze", model, data, "--seen-in", unlabeled), "raw.txt:1: label_column")
    assert_user_error(run("analyze", model, data, "--seen-in", tmp_path / "missing.txt"), "missing.txt")
