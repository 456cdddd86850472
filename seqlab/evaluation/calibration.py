"""Temperature scaling of a tagger's probabilities, and the expected calibration error that measures it.

A trained tagger's span and token confidences are often over-confident (BENCHMARKS.md, tenth session: a
BiLSTM-CRF's spans at 0.8 confidence were right less often than that). Temperature scaling (Guo et al.,
2017, "On calibration of modern neural networks") divides every score of the decoder (a CRF's emissions
and transitions, a softmax's logits) by one number T before probabilities are computed. The tags do not
change: dividing the scores of every path by the same T > 0 keeps their order. T is fitted on held-out
labelled sentences by minimising their negative log-likelihood, a convex function of 1/T, here by a
golden-section search over log T; the fitted T goes into the model's config (``model.decoder.temperature``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from seqlab.data.batching import make_batches
from seqlab.data.corpus import check_labels
from seqlab.data.schemes import get_spans
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError

log = logging.getLogger(__name__)

#: Search range of the temperature (the config accepts 0.01-100).
LOWEST, HIGHEST = 0.05, 20.0
GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass
class Bin:
    """One equal-width confidence bin: how many predictions fell in it, their mean confidence and how
    many of them were right (as a fraction)."""

    count: int
    confidence: float
    accuracy: float


@dataclass
class CalibrationError:
    """Expected calibration error: sum over bins of (bin share) x |mean confidence - accuracy|."""

    value: float
    items: int
    bins: list[Bin]


def expected_calibration_error(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> CalibrationError:
    """ECE of (confidence, correct) pairs over ``bins`` equal-width bins (lo, hi]; 0 goes in the first."""
    table: list[Bin] = []
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pairs if lo < c <= hi or (b == 0 and c <= 0)]
        if not inside:
            table.append(Bin(0, 0.0, 0.0))
            continue
        conf = sum(c for c, _ in inside) / len(inside)
        acc = sum(ok for _, ok in inside) / len(inside)
        total += len(inside) / len(pairs) * abs(conf - acc)
        table.append(Bin(len(inside), conf, acc))
    return CalibrationError(total, len(pairs), table)


@dataclass
class Reliability:
    """The calibration of a tagger's confidences on labelled sentences: spans (correct when the gold
    sentence has the same type, start and end; none for plain labels) and tokens (correct label)."""

    spans: CalibrationError
    tokens: CalibrationError


def reliability(tagger, sentences: Sequence[Sentence], bins: int = 10, batch_size: int | None = None) -> Reliability:
    """Tag ``sentences`` with confidences and compare them with the gold labels (tags of the model's scheme)."""
    check_labels(list(sentences), tagger.scheme)
    predictions = tagger.predict(list(sentences), batch_size=batch_size, confidence=True)
    spans: list[tuple[float, bool]] = []
    tokens: list[tuple[float, bool]] = []
    for sentence, pred in zip(sentences, predictions):
        if pred.token_confidence is None:
            raise SeqlabError(f"the model gives no confidences ({pred.confidence_kind})")
        if tagger.scheme != "none":
            gold = set(get_spans(sentence.labels, tagger.scheme))
            spans += [(s.confidence, (s.type, s.start, s.end) in gold) for s in pred.spans]
        tokens += [(c, t == g) for c, t, g in zip(pred.token_confidence, pred.tags, sentence.labels)]
    return Reliability(expected_calibration_error(spans, bins), expected_calibration_error(tokens, bins))


@dataclass
class TemperatureFit:
    """The fitted temperature and the mean negative log-likelihood per sentence before (T = the model's
    temperature when fitting began) and after, on ``sentences`` sentences."""

    temperature: float
    previous: float
    nll_before: float
    nll_after: float
    sentences: int


class Likelihood:
    """The mean negative log-likelihood per sentence of gold labels, as a function of the temperature:
    the network runs once here, and each call only re-runs the decoder's likelihood. Sentences with a gold
    label unseen in training are left out (with a warning)."""

    def __init__(self, tagger, sentences: Sequence[Sentence], batch_size: int | None = None):
        tagger.link(sentences)  # before leaving any out: as predict would see them
        usable = [s for s in sentences if s.tokens and not tagger.unseen_labels([s])]
        if len(usable) < len(sentences):
            log.warning(
                "calibration leaves out %d sentences (empty, or with labels unseen in training)",
                len(sentences) - len(usable),
            )
        if not usable:
            raise SeqlabError("no labelled sentences to calibrate on")
        self.sentences = len(usable)
        self.net = tagger.net.eval()
        self.inputs = []  # per batch: decoder input (batch, seq_len, dim), gold tags and mask (batch, seq_len), context
        with torch.inference_mode():
            for batch in make_batches(
                tagger.encode(usable, with_tags=True),
                tagger.featurizers,
                batch_size or tagger.config.train.eval_batch_size,
            ):
                batch = batch.to(tagger.device)
                features, ctx = self.net.encode(batch)
                self.inputs.append((features, batch.tags, batch.mask, ctx))

    def __call__(self, temperature: float) -> float:
        with torch.inference_mode():
            total = sum(
                float(self.net.decoder.scaled_nll(f, t, m, c, temperature).double().sum()) for f, t, m, c in self.inputs
            )
        return total / self.sentences


def fit_temperature(
    tagger, sentences: Sequence[Sentence], batch_size: int | None = None, iterations: int = 40
) -> TemperatureFit:
    """The T in [LOWEST, HIGHEST] that minimises the gold labels' negative log-likelihood
    (:class:`Likelihood`), by golden-section search over log T."""
    check_labels(list(sentences), tagger.scheme)
    nll = Likelihood(tagger, sentences, batch_size)
    previous = tagger.net.decoder.temperature
    temperature = math.exp(_golden_section(lambda u: nll(math.exp(u)), math.log(LOWEST), math.log(HIGHEST), iterations))
    return TemperatureFit(temperature, previous, nll(previous), nll(temperature), nll.sentences)


def _golden_section(f, lo: float, hi: float, iterations: int) -> float:
    """The minimiser of a unimodal ``f`` on [lo, hi], to (hi - lo) x 0.618^iterations; an end of the
    range when the minimum lies there."""
    a, b = lo, hi
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = f(d)
    inner = (a + b) / 2
    return min((lo, hi, inner), key=f)
