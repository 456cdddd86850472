r"""Tokenizers for raw text: each token keeps its character offsets, so that a predicted span maps back to the
characters it covers in the input.

``whitespace``
    Runs of non-space characters (``str.split``'s tokens): ``"Jordan's car."`` -> ``Jordan's`` ``car.``.
``english``
    A rule-based English tokenizer in the manner of the Penn Treebank, one regular expression (:data:`ENGLISH`):
    URLs and e-mail addresses; abbreviations with inner periods (``U.S.``, ``e.g.``) and a short list of titles
    (``Mr.``, ``Dr.``, ``Inc.``); numbers with inner separators (``1,000.50``, ``3.5``, ``12:30``); words,
    hyphenated words and words with an inner apostrophe (``state-of-the-art``, ``o'clock``), combining marks
    staying with their letter (a decomposed ``café``); then each other
    character alone (``(``, ``$``, ``%``), except runs of periods or dashes (``...``, ``--``). A word's clitic is
    split off: ``don't`` -> ``do`` ``n't``, ``can't`` -> ``ca`` ``n't``, ``John's`` -> ``John`` ``'s`` (also
    ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m``; a typographic apostrophe too).
``chars``
    Each non-space character is a token (Chinese, as in the BMES corpora). Spaces are not tokens, but offsets
    are kept: ``"Michael Jordan"`` gives 13 tokens and its span covers characters 0-14, space included.

Every tokenizer covers every non-space character of the text with exactly one token and no token holds a space
(checked by the property tests). A model trained on column files tags raw text with ``whitespace`` (``chars``
for ``bmes`` data) unless its config names ``data.tokenizer``.
"""

from __future__ import annotations

import re

TOKENIZERS = ("whitespace", "english", "chars")

Offsets = list[tuple[int, int]]  # (start, end) character offsets of each token, end exclusive

# a word character, or a combining mark (a decomposed "é" is "e" + U+0301 and stays one word)
_W = r"[\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
_TITLES = r"(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|Inc|Ltd|Co|Corp|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|vs|etc)\."
ENGLISH = re.compile(
    r"https?://[^\s<>\"]*[^\s<>\"'.,;:!?)\]}]"  # a URL, without trailing punctuation
    r"|[\w.+-]+@\w+(?:\.\w+)+"  # an e-mail address
    rf"|(?<![^\W\d_])(?:[^\W\d_]\.){{2,}}|\b{_TITLES}"  # U.S., e.g.; Mr., Inc.
    r"|\d+(?:[.,:/]\d+)+(?![^\W_])"  # 1,000.50  3.5  12:30  1/2
    rf"|{_W}+(?:[-'’]{_W}+)*"  # words, hyphenated words, o'clock
    r"|\.{2,}|-{2,}"  # ... --
    r"|\S",  # any other character alone
)
_CLITIC = re.compile(r"(?i)(?<=\w)(n['’]t|['’](?:s|re|ve|ll|d|m))$")
_WHITESPACE = re.compile(r"\S+")
_CHARS = re.compile(r"\S")


def tokenize(text: str, tokenizer: str = "whitespace") -> Offsets:
    """The (start, end) character offsets of the tokens of ``text`` (see the module for each tokenizer)."""
    if tokenizer == "whitespace":
        return [m.span() for m in _WHITESPACE.finditer(text)]
    if tokenizer == "chars":
        return [m.span() for m in _CHARS.finditer(text)]
    if tokenizer == "english":
        out: Offsets = []
        for m in ENGLISH.finditer(text):
            start, end = m.span()
            clitic = _CLITIC.search(m.group()) if end - start > 2 else None
            if clitic is not None and clitic.start() > 0 and not m.group()[0].isdigit():
                cut = start + clitic.start()
                out += [(start, cut), (cut, end)]
            else:
                out.append((start, end))
        return out
    raise ValueError(f"unknown tokenizer {tokenizer!r}: expected one of {', '.join(TOKENIZERS)}")


def tokens_of(text: str, offsets: Offsets) -> list[str]:
    return [text[a:b] for a, b in offsets]


def model_tokenizer(data_config) -> str:
    """The tokenizer a model tags raw text with: ``data.tokenizer``, else ``chars`` for ``bmes`` data and
    ``whitespace`` for the rest (what raw-text prediction always did)."""
    name = getattr(data_config, "tokenizer", None)
    if name:
        return name
    return "chars" if data_config.format == "bmes" else "whitespace"


def text_sentence(text: str, tokenizer: str, source: str = "<memory>", line: int = 0):
    """A :class:`~seqlab.data.sentence.Sentence` of ``text``'s tokens, with ``extra["text"]`` and
    ``extra["offsets"]`` (each token's characters in the text)."""
    from seqlab.data.sentence import Sentence

    offsets = tokenize(text, tokenizer)
    return Sentence(tokens_of(text, offsets), None, source=source, line=line, extra={"text": text, "offsets": offsets})


__all__ = ["ENGLISH", "TOKENIZERS", "model_tokenizer", "text_sentence", "tokenize", "tokens_of"]
