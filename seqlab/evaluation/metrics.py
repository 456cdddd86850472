"""conlleval-compatible scoring: chunk precision / recall / F1 and token accuracy.

A predicted chunk is correct only when a gold chunk has the same type, start and end. Chunks are
extracted with :func:`seqlab.data.schemes.get_spans`, which follows conlleval's rules, so malformed
sequences (``O I-PER``) are scored as conlleval scores them. All numbers are percentages; precision
is 0 when nothing is predicted, recall 0 when there is nothing to find, F1 0 when both are 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from seqlab.data.readers import PathLike, read_column_blocks
from seqlab.data.schemes import check_scheme, detect_scheme, get_spans, normalize_scheme
from seqlab.errors import SeqlabError


@dataclass
class TypeScore:
    """Scores of one chunk type."""

    precision: float
    recall: float
    f1: float
    found_gold: int
    found_pred: int
    correct: int

    @classmethod
    def of(cls, found_gold: int, found_pred: int, correct: int) -> TypeScore:
        """conlleval's precision, recall and FB1 of these counts."""
        return cls(*_prf(found_gold, found_pred, correct), found_gold, found_pred, correct)


@dataclass
class Scores:
    """Overall scores (percent) with the conlleval counts and a breakdown per chunk type.

    ``kind`` is "spans" for chunk scores (conlleval) and "tokens" for plain labels such as POS, where
    only ``accuracy`` and ``tokens`` carry information."""

    precision: float
    recall: float
    f1: float
    accuracy: float
    found_gold: int
    found_pred: int
    correct: int
    tokens: int
    per_type: dict[str, TypeScore] = field(default_factory=dict)
    kind: str = "spans"
    untyped_f1: float = 0.0  # F1 of span boundaries, types ignored (FLAT paper, Section 4.5)
    type_accuracy: float = 0.0  # % of boundary-correct predicted spans that also have the right type

    def headline(self) -> dict[str, float]:
        """The numbers worth logging: accuracy alone for plain labels, else F1, precision, recall, accuracy."""
        if self.kind == "tokens":
            return {"accuracy": self.accuracy}
        return {
            "f1": self.f1,
            "precision": self.precision,
            "recall": self.recall,
            "accuracy": self.accuracy,
            "untyped_f1": self.untyped_f1,
            "type_accuracy": self.type_accuracy,
        }

    @property
    def counts(self) -> dict[str, int]:
        """The raw counts: found_gold, found_pred, correct, tokens."""
        return {
            "found_gold": self.found_gold,
            "found_pred": self.found_pred,
            "correct": self.correct,
            "tokens": self.tokens,
        }


def _prf(found_gold: int, found_pred: int, correct: int) -> tuple[float, float, float]:
    """conlleval's precision, recall and FB1 (beta 1), in percent."""
    precision = 100.0 * correct / found_pred if found_pred else 0.0
    recall = 100.0 * correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _check_lengths(gold_sequences: Sequence[Sequence[str]], pred_sequences: Sequence[Sequence[str]]) -> None:
    if len(gold_sequences) != len(pred_sequences):
        raise SeqlabError(f"{len(gold_sequences)} gold sentences but {len(pred_sequences)} predicted")
    for number, (gold, pred) in enumerate(zip(gold_sequences, pred_sequences), start=1):
        if len(gold) != len(pred):
            raise SeqlabError(f"sentence {number}: {len(gold)} gold tags but {len(pred)} predicted")


def token_accuracy(gold_sequences: Sequence[Sequence[str]], pred_sequences: Sequence[Sequence[str]]) -> float:
    """Percentage of tokens whose predicted tag equals the gold tag (0 when there are no tokens)."""
    _check_lengths(gold_sequences, pred_sequences)
    total = sum(len(gold) for gold in gold_sequences)
    right = sum(g == p for gold, pred in zip(gold_sequences, pred_sequences) for g, p in zip(gold, pred))
    return 100.0 * right / total if total else 0.0


def token_scores(gold_sequences: Sequence[Sequence[str]], pred_sequences: Sequence[Sequence[str]]) -> Scores:
    """Token accuracy as a :class:`Scores` of kind "tokens" (plain labels: no chunks to count)."""
    tokens = sum(len(gold) for gold in gold_sequences)
    return Scores(0.0, 0.0, 0.0, token_accuracy(gold_sequences, pred_sequences), 0, 0, 0, tokens, kind="tokens")


def span_f1(
    gold_sequences: Sequence[Sequence[str]], pred_sequences: Sequence[Sequence[str]], scheme: str = "BIO"
) -> Scores:
    """Score predicted tag sequences against gold ones, chunk by chunk, as conlleval does."""
    scheme = normalize_scheme(scheme)
    accuracy = token_accuracy(gold_sequences, pred_sequences)
    gold_counts: Counter[str] = Counter()
    pred_counts: Counter[str] = Counter()
    correct_counts: Counter[str] = Counter()
    boundary_correct = 0  # predicted spans whose boundaries match a gold span, whatever the types
    for gold, pred in zip(gold_sequences, pred_sequences):
        gold_spans = get_spans(gold, scheme)
        pred_spans = get_spans(pred, scheme)
        gold_counts.update(t for t, _, _ in gold_spans)
        pred_counts.update(t for t, _, _ in pred_spans)
        correct_counts.update(t for t, _, _ in set(gold_spans) & set(pred_spans))
        boundary_correct += len({(a, b) for _, a, b in gold_spans} & {(a, b) for _, a, b in pred_spans})
    per_type = {}
    for chunk_type in sorted(gold_counts.keys() | pred_counts.keys()):
        counts = (gold_counts[chunk_type], pred_counts[chunk_type], correct_counts[chunk_type])
        per_type[chunk_type] = TypeScore.of(*counts)
    totals = (sum(gold_counts.values()), sum(pred_counts.values()), sum(correct_counts.values()))
    tokens = sum(len(gold) for gold in gold_sequences)
    untyped_f1 = _prf(totals[0], totals[1], boundary_correct)[2]
    type_accuracy = 100.0 * totals[2] / boundary_correct if boundary_correct else 0.0
    return Scores(*_prf(*totals), accuracy, *totals, tokens, per_type, "spans", untyped_f1, type_accuracy)


def format_report(scores: Scores) -> str:
    """conlleval's text report: totals, overall line and one line per chunk type (token accuracy alone
    for plain labels)."""
    if scores.kind == "tokens":
        return f"processed {scores.tokens} tokens; accuracy: {scores.accuracy:6.2f}%\n"
    lines = [
        f"processed {scores.tokens} tokens with {scores.found_gold} phrases; "
        f"found: {scores.found_pred} phrases; correct: {scores.correct}."
    ]
    if scores.tokens:
        lines.append(
            f"accuracy: {scores.accuracy:6.2f}%; precision: {scores.precision:6.2f}%; "
            f"recall: {scores.recall:6.2f}%; FB1: {scores.f1:6.2f}"
        )
    for chunk_type, ts in scores.per_type.items():
        lines.append(
            f"{chunk_type:>17}: precision: {ts.precision:6.2f}%; recall: {ts.recall:6.2f}%; "
            f"FB1: {ts.f1:6.2f}  {ts.found_pred}"
        )
    return "\n".join(lines) + "\n"


def format_span_analysis(scores: Scores) -> str:
    """The line ``seqlab evaluate`` adds after conlleval's report: span-only F1 and type accuracy."""
    if scores.kind == "tokens" or not scores.tokens:
        return ""
    return f"span-only FB1: {scores.untyped_f1:6.2f}; type accuracy: {scores.type_accuracy:6.2f}%\n"


def score_file(path: PathLike, scheme: str = "auto", encoding: str = "utf-8") -> Scores:
    """Score a conlleval-format file: the last two columns of each line are gold and predicted tags.

    ``scheme`` is the file's tag scheme, or "auto" to detect it from both columns; a tag outside it is an error
    naming its line (:func:`seqlab.data.schemes.check_scheme`)."""
    declared = str(scheme).strip().lower() != "auto"
    if declared:
        scheme = normalize_scheme(scheme)
    blocks = read_column_blocks(path, encoding)
    first_line, first_fields = blocks[0][0]
    if len(first_fields) < 2:
        raise SeqlabError("expected at least 2 columns (gold and predicted tag)", path=path, line=first_line)
    gold = [[fields[-2] for _, fields in block] for block in blocks]
    pred = [[fields[-1] for _, fields in block] for block in blocks]
    if not declared:
        scheme = detect_scheme(gold + pred)
    starts = [block[0][0] for block in blocks]
    located = [pair for pairs in zip(zip(starts, gold), zip(starts, pred)) for pair in pairs]  # in line order
    check_scheme(located, scheme, path, "--scheme" if declared else None, "the detected scheme")
    return span_f1(gold, pred, scheme)
