"""Telling a column (CoNLL) file from raw text, for ``predict --input-format auto``.

The guess weighs the evidence of every line it is given, not of the first few, so that a few odd lines do
not flip it:

* a column file has one token per line: most of its lines (``MIN_AGREEMENT``) have the same number of
  fields, and blank lines end sentences of several lines each (``MIN_LINES_PER_SENTENCE`` on average);
* a one-column file holds tokens, so its lines are short (``MAX_TOKEN_CHARS`` characters on average), where
  raw Chinese text, one sentence or paragraph per line and no spaces, has long lines.

Anything else is raw text, one sentence per line. The few lines that break the majority's column count are
then errors naming their line (:func:`seqlab.data.readers.iter_conll` with the guessed ``width``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from seqlab.data.readers import BLANK, DOCSTART, FIELD_SEP

MIN_AGREEMENT = 0.9  # share of the lines with the most common number of fields
MIN_LINES_PER_SENTENCE = 1.5  # raw paragraphs between blank lines are one line each
MAX_TOKEN_CHARS = 8.0  # mean characters of a one-column file's lines (words: ~5, Chinese characters: 1)
HEAD_LINES = 10_000  # lines of a stream (stdin) that the guess reads ahead


@dataclass
class FormatEvidence:
    """Counts over the lines of an input: what :func:`decide` weighs."""

    content: int = 0  # lines with text (document breaks aside)
    sentences: int = 0  # runs of text lines between blank lines
    ended: int = 0  # runs closed by a blank line (a column file's sentence ends)
    widths: Counter = field(default_factory=Counter)  # fields per line -> lines
    one_field_chars: int = 0  # characters of the one-field lines
    _in_run: bool = False

    def add(self, text: str) -> None:
        """Count one line (without its line ending)."""
        stripped = text.strip(BLANK)
        fields = FIELD_SEP.split(stripped) if stripped else []
        if not fields or fields[0] == DOCSTART:  # a blank line or a document break ends a sentence
            self.ended += self._in_run
            self._in_run = False
            return
        self.content += 1
        self.widths[len(fields)] += 1
        if len(fields) == 1:
            self.one_field_chars += len(stripped)
        if not self._in_run:
            self.sentences += 1
            self._in_run = True


@dataclass(frozen=True)
class FormatGuess:
    """``format``: "conll" or "raw"; ``width``: the columns of a column file (its lines' most common count);
    ``reason``: the evidence, for the line that says what was chosen."""

    format: str
    width: int | None
    reason: str


def decide(evidence: FormatEvidence) -> FormatGuess:
    """The format that the evidence supports (see the module)."""
    if not evidence.content:
        return FormatGuess("raw", None, "no text")
    width, agreeing = evidence.widths.most_common(1)[0]
    lines, sentences = evidence.content, evidence.sentences
    if agreeing < MIN_AGREEMENT * lines:
        return FormatGuess(
            "raw",
            None,
            f"lines have varying numbers of fields (the most common, {width}, on {agreeing} of {lines} lines)",
        )
    if not evidence.ended:
        return FormatGuess("raw", None, "no blank line ends a sentence")
    if lines < MIN_LINES_PER_SENTENCE * sentences:
        return FormatGuess(
            "raw",
            None,
            f"{lines} lines in {sentences} blank-line-separated blocks: paragraphs, "
            f"not sentences of one token per line",
        )
    if width == 1 and evidence.one_field_chars > MAX_TOKEN_CHARS * agreeing:
        mean = evidence.one_field_chars / agreeing
        return FormatGuess(
            "raw", None, f"lines without spaces of {mean:.0f} characters on average: text, not one token per line"
        )
    return FormatGuess(
        "conll",
        width,
        f"{width} column(s) on {agreeing} of {lines} lines, {sentences} sentences separated by blank lines",
    )


def guess_format(lines: Iterable[str]) -> FormatGuess:
    """Weigh every line of ``lines`` (texts without line endings) and decide."""
    evidence = FormatEvidence()
    for text in lines:
        evidence.add(text)
    return decide(evidence)
