"""Scores split by whether each entity was seen in a reference corpus (usually the training file): how much of a
model's error lies in entities it could have memorised, and how much in new ones, which only better features or
more data reach.

A span (gold or predicted) is *seen* when its text and type together are an entity of the reference; each group
is scored as conlleval scores the whole (a predicted span is correct when a gold span has its boundaries and type),
so the two groups' counts add up to the overall ones. A span's text is its tokens joined by ``joiner`` ("" for
character corpora, " " for words).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from seqlab.data.schemes import get_spans
from seqlab.data.sentence import Sentence
from seqlab.evaluation.metrics import TypeScore

EntityKey = tuple[str, str]  # (text, type)


@dataclass
class SeenSplit:
    """Scores of the spans seen in the reference and of the others, and how many distinct entities it has."""

    seen: TypeScore
    unseen: TypeScore
    reference_entities: int


def entity_keys(sentences: Iterable[Sentence], scheme: str, joiner: str) -> set[EntityKey]:
    """The distinct (text, type) entities labelled in ``sentences``."""
    return {(joiner.join(s.tokens[a:b]), t) for s in sentences if s.labels for t, a, b in get_spans(s.labels, scheme)}


def seen_split(
    tokens: Sequence[Sequence[str]],
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    known: Collection[EntityKey],
    scheme: str,
    joiner: str,
) -> SeenSplit:
    """Span scores of ``pred`` against ``gold`` (tag sequences of the sentences ``tokens``), split by whether
    each span's (text, type) is in ``known`` (:func:`entity_keys` of the reference)."""
    counts = {True: [0, 0, 0], False: [0, 0, 0]}  # seen? -> found_gold, found_pred, correct
    for words, g, p in zip(tokens, gold, pred):
        gold_spans, pred_spans = set(get_spans(g, scheme)), set(get_spans(p, scheme))
        for column, spans in ((0, gold_spans), (1, pred_spans), (2, gold_spans & pred_spans)):
            for t, a, b in spans:
                counts[(joiner.join(words[a:b]), t) in known][column] += 1
    return SeenSplit(TypeScore.of(*counts[True]), TypeScore.of(*counts[False]), len(known))


def format_seen_split(split: SeenSplit, reference: str) -> str:
    """Two lines: precision, recall and FB1 of the entities seen in ``reference`` and of the unseen ones."""
    lines = [f"entities by whether their text and type are among the {split.reference_entities} of {reference}:"]
    for name, s in (("seen", split.seen), ("unseen", split.unseen)):
        lines.append(
            f"{name:>8}: gold {s.found_gold:>6}; found {s.found_pred:>6}; correct {s.correct:>6}; "
            f"precision: {s.precision:6.2f}%; recall: {s.recall:6.2f}%; FB1: {s.f1:6.2f}"
        )
    return "\n".join(lines) + "\n"
