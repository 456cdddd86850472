"""A tagger scored against gold labels: conlleval span F1, or token accuracy for plain labels."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Literal

from seqlab.data.corpus import check_labels
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.evaluation.metrics import span_f1, token_scores
from seqlab.tagging.encoding import tag_ids
from seqlab.tagging.results import Evaluation

log = logging.getLogger("seqlab")


def unseen_labels(tagger, sentences: Sequence[Sentence]) -> Counter:
    """Gold labels (in the input scheme) that the model cannot predict, with their counts."""
    known = tagger.tags.stoi
    return Counter(
        s.labels[k] for s in sentences for k, t in enumerate(tagger.to_train_scheme(s.labels)) if t not in known
    )


def evaluate(
    tagger,
    sentences: Sequence[Sentence],
    batch_size: int | None = None,
    unseen: Literal["warn", "error", "score"] = "warn",
    ablate: Collection[str] = (),
) -> Evaluation:
    """:meth:`seqlab.tagger.Tagger.evaluate`: the scores of ``tagger``'s predictions on ``sentences``."""
    if not sentences:
        raise SeqlabError("no sentences to evaluate")
    check_labels(sentences, tagger.scheme)
    if unseen == "error":
        for s in sentences:
            tag_ids(s, tagger.to_train_scheme(s.labels), tagger.tags.stoi)  # the first unseen label: its file, line
    elif unseen == "warn":
        missing = unseen_labels(tagger, sentences)
        if missing:
            log.warning("labels unseen in training, scored as misses: %s", dict(missing))
    pred = tagger.predict_tags(sentences, batch_size, ablate)
    gold = [s.labels for s in sentences]
    if tagger.scheme == "none":
        return Evaluation(token_scores(gold, pred), pred)
    return Evaluation(span_f1(gold, pred, scheme=tagger.scheme), pred)
