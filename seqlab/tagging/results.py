"""What tagging returns: a :class:`Prediction` per input (tags, spans, n-best paths, explanations,
confidences), an :class:`Evaluation` against gold labels, and the :class:`Row` each sentence's inference fills
before its tags become labels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from seqlab.crf.crf import TagPath
from seqlab.data.schemes import get_spans
from seqlab.data.sentence import Sentence
from seqlab.evaluation.metrics import Scores
from seqlab.tagging.explanations import LayerExplanation


@dataclass
class Span:
    type: str
    start: int  # first token
    end: int  # one past the last token
    text: str
    confidence: float | None = None  # p(the span's tags | x): exact for the CRF and softmax decoders


@dataclass
class ScoredTags:
    """One of the n best tag sequences, in the input's scheme, with the decoder's score."""

    tags: list[str]
    score: float


@dataclass
class Prediction:
    tokens: list[str]
    tags: list[str]
    spans: list[Span]
    nbest: list[ScoredTags] | None = None
    explanation: list[LayerExplanation] | None = field(default=None, repr=False)
    split_at: list[int] | None = None  # token offsets where a sentence over max_length was cut for tagging
    token_confidence: list[float] | None = None  # p(y_t = the predicted tag | x) per token
    confidence_kind: str | None = None  # what the confidences are ("crf-marginal"), or why there are none
    document: int = 0  # the document breaks (-DOCSTART- lines) before the sentence in its file; 0 without any

    def to_dict(self) -> dict:
        """What ``dataclasses.asdict`` gives, built directly: its recursive deep copy took 13% of a busy
        server's CPU (16 clients x 16 sentences)."""
        out = {k: list(v) if isinstance(v, list) else v for k, v in self.__dict__.items()}
        out["spans"] = [dict(s.__dict__) for s in self.spans]
        for key in ("nbest", "explanation"):
            if out[key] is not None:
                out[key] = [dict(x.__dict__) for x in out[key]]
        return out


@dataclass
class Evaluation:
    """Scores against gold labels, and the predicted labels (input scheme) per sentence."""

    scores: Scores
    predictions: list[list[str]]


@dataclass
class Row:
    """Inference result of one sentence, before conversion to labels."""

    tags: list[int] = field(default_factory=list)
    labels: list[str] | None = None  # ``tags`` in the input's scheme; None: not converted yet
    nbest: list[TagPath] | None = None
    explanation: list[LayerExplanation] | None = None
    split_at: list[int] | None = None
    token_conf: list[float] | None = None
    span_conf: dict[tuple[int, int], float] | None = None  # (start, end) -> probability
    confidence_kind: str | None = None


def prediction(
    sentence: Sentence, row: Row, tags: list[str], scheme: str, joiner: str, to_labels: Callable[[list[int]], list[str]]
) -> Prediction:
    """The :class:`Prediction` of ``sentence`` from its row and its ``tags`` (the input's scheme): spans of
    ``scheme`` with their text (the characters of a raw string, else the tokens joined by ``joiner``) and
    confidences, and the n-best paths as labels (``to_labels``)."""
    s, r = sentence, row
    at, text = s.extra.get("offsets"), s.extra.get("text")  # raw text: a span is its characters
    spans = (
        []
        if scheme == "none"
        else [
            Span(
                typ,
                a,
                b,
                text[at[a][0] : at[b - 1][1]] if at else joiner.join(s.tokens[a:b]),
                None if r.span_conf is None else r.span_conf.get((a, b)),
            )
            for typ, a, b in get_spans(tags, scheme)
        ]
    )
    paths = None if r.nbest is None else [ScoredTags(to_labels(p.tags), p.score) for p in r.nbest]
    return Prediction(
        s.tokens, tags, spans, paths, r.explanation, r.split_at, r.token_conf, r.confidence_kind, document=s.document
    )
