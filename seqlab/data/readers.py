r"""Readers for column files (CoNLL, BMES) and raw text, and a CoNLL writer.

Column files hold one token per line, fields separated by spaces or tabs, and a blank line between
sentences. A line ends at ``\n``, ``\r\n`` or a lone ``\r`` (:func:`numbered_lines`). ``-DOCSTART-`` lines
are document breaks and are skipped. A line whose first field is ``#`` is a token (the pound sign in
CoNLL-2000), never a comment. Runs of blank lines (empty sentences, as in OntoNotes 4) are skipped, counted
and logged.

Every problem with the input raises :class:`SeqlabError` naming the file and 1-based line.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError

logger = logging.getLogger("seqlab")

PathLike = str | os.PathLike
Row = tuple[int, list[str]]  # (1-based line number, fields)

FIELD_SEP = re.compile(r"[ \t]+")  # between the fields of a column file's line
BLANK = " \t\r\n"  # stripped from both ends of a line
DOCSTART = "-DOCSTART-"
_UNDECODABLE = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of bytes it cannot decode


def numbered_lines(path: PathLike | IO[bytes], encoding: str, source: str | None = None) -> Iterator[tuple[int, str]]:
    r"""Yield (line number, text without line ending) for each line of ``path`` (or of an open binary
    file, named ``source`` in errors), lazily.

    ``\n``, ``\r\n`` and a lone ``\r`` each end a line (a file written on any system reads the same); the other
    characters that ``str.splitlines`` splits on (``\x0b``, ``\x0c``, ``\x1c``-``\x1e``, ``\x85``, ``\u2028``,
    ``\u2029``) are text. Bytes that are not ``encoding`` are an error naming their line."""
    if isinstance(path, (str, os.PathLike)):
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by the TextIOWrapper below
        except FileNotFoundError:
            raise SeqlabError("no such file", path=path) from None
        except IsADirectoryError:
            raise SeqlabError("is a directory, expected a file", path=path) from None
        except OSError as err:
            raise SeqlabError(f"cannot open file ({err.strerror})", path=path) from None
        source = str(path)
    else:
        handle = path
    # universal newlines (newline=None) split at \n, \r\n and \r only, and turn each into \n; undecodable bytes
    # become lone surrogates, found line by line so that the error can name the line
    with io.TextIOWrapper(handle, encoding=encoding, errors="surrogateescape", newline=None) as lines:
        try:
            for number, text in enumerate(lines, start=1):
                if _UNDECODABLE.search(text):
                    raise SeqlabError(f"not valid {encoding} text", path=source, line=number)
                if number == 1:
                    text = text.lstrip("\ufeff")
                yield number, text.removesuffix("\n")
        except OSError as err:  # e.g. a read error on a device or a file that vanished
            raise SeqlabError(f"cannot read ({err.strerror})", path=source) from None


def iter_column_blocks(
    numbered: Iterable[tuple[int, str]], path: PathLike, stats: dict | None = None, width: int | None = None
) -> Iterator[list[Row]]:
    """Split numbered lines of a column file into sentences, lazily: blocks of (line, fields); see
    :func:`iter_documented_blocks`."""
    return (block for _, block in iter_documented_blocks(numbered, path, stats, width))


def iter_documented_blocks(
    numbered: Iterable[tuple[int, str]], path: PathLike, stats: dict | None = None, width: int | None = None
) -> Iterator[tuple[int, list[Row]]]:
    """Split numbered lines of a column file into sentences, lazily: (document, block of (line, fields)), where
    ``document`` counts the ``-DOCSTART-`` lines before the block.

    Checks that every token line has ``width`` fields (those of most lines, when a format guess counted
    them), by default as many as the file's first token line. Counts the empty sentences (extra blank
    lines) skipped in ``stats["empty_skipped"]`` and logs them at the end."""
    block: list[Row] = []
    known = "as on most lines" if width else "as on the first line"
    empty = document = 0
    after_break = True  # at file start or right after a -DOCSTART- line
    for number, text in numbered:
        stripped = text.strip(BLANK)
        if not stripped:
            if block:
                yield document, block
                block = []
            elif not after_break:
                empty += 1
            after_break = False
            continue
        fields = FIELD_SEP.split(stripped)
        if fields[0] == DOCSTART:
            if block:
                yield document, block
                block = []
            document += 1
            after_break = True
            continue
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise SeqlabError(f"expected {width} columns ({known}), got {len(fields)}", path=path, line=number)
        block.append((number, fields))
        after_break = False
    if block:
        yield document, block
    if empty:
        logger.warning("%s: skipped %d empty sentence(s) (consecutive blank lines)", path, empty)
    if stats is not None:
        stats["empty_skipped"] = empty


def read_column_blocks(path: PathLike, encoding: str = "utf-8", stats: dict | None = None) -> list[list[Row]]:
    """All sentences of a column file as blocks of (line, fields); see :func:`iter_column_blocks`."""
    return [block for _, block in _read_documented_blocks(path, encoding, stats)]


def _read_documented_blocks(path: PathLike, encoding: str, stats: dict | None) -> list[tuple[int, list[Row]]]:
    """All (document, block) of a column file (:func:`iter_documented_blocks`); none is an error."""
    blocks = list(iter_documented_blocks(numbered_lines(path, encoding), path, stats))
    if not blocks:
        raise SeqlabError("no sentences found (empty file?)", path=path)
    return blocks


def _column_index(column: int, width: int, what: str, path: PathLike, line: int) -> int:
    """Normalize a possibly negative column index, or raise naming the file and line."""
    if not -width <= column < width:
        raise SeqlabError(f"{what} {column} is out of range: the file has {width} columns", path=path, line=line)
    return column % width


def _strip_seg_digit(token: str, path: PathLike, line: int) -> str:
    """Remove the trailing segmentation digit of a Weibo-style character (``科0`` -> ``科``)."""
    if len(token) < 2 or not token[-1].isdigit():
        raise SeqlabError(f"expected a character followed by a segmentation digit, got '{token}'", path=path, line=line)
    return token[:-1]


def read_conll(
    path: PathLike,
    token_column: int = 0,
    label_column: int | None = -1,
    encoding: str = "utf-8",
    stats: dict | None = None,
    strip_seg_digit: bool = False,
) -> list[Sentence]:
    """Read a whitespace-separated column file into sentences.

    ``label_column=None`` reads unlabeled text. The remaining columns (all but token and label) are
    kept per token in ``Sentence.extra["columns"]`` so that :func:`write_conll` can write them back.
    ``strip_seg_digit`` removes the segmentation digit that Weibo NER appends to each character.
    ``stats``, when given, receives ``"empty_skipped"``: the number of empty sentences skipped.
    """
    blocks = _read_documented_blocks(path, encoding, stats)
    return list(_blocks_to_sentences(blocks, path, token_column, label_column, strip_seg_digit))


def iter_conll(
    numbered: Iterable[tuple[int, str]],
    source: str,
    token_column: int = 0,
    label_column: int | None = None,
    width: int | None = None,
) -> Iterator[Sentence]:
    """Sentences of a column file from numbered lines, lazily (bulk tagging: constant memory); ``width``: the
    columns every line must have (default: those of the first line)."""
    return _blocks_to_sentences(
        iter_documented_blocks(numbered, source, width=width), source, token_column, label_column, False
    )


def _blocks_to_sentences(
    blocks: Iterable[tuple[int, list[Row]]],
    path: PathLike,
    token_column: int,
    label_column: int | None,
    strip_seg_digit: bool,
) -> Iterator[Sentence]:
    token_at = label_at = others = None
    previous = 0  # the document of the sentence before
    for document, block in blocks:
        if token_at is None:  # the first block fixes the columns
            first_line, first_fields = block[0]
            width = len(first_fields)
            token_at = _column_index(token_column, width, "token_column", path, first_line)
            if label_column is not None:
                label_at = _column_index(label_column, width, "label_column", path, first_line)
                if label_at == token_at:
                    raise SeqlabError(f"label_column {label_column} is the token column", path=path, line=first_line)
            others = [i for i in range(width) if i not in (token_at, label_at)]
        sentence = _block_to_sentence(block, document, token_at, label_at, others, path, strip_seg_digit)
        sentence.breaks, previous = document - previous, document
        yield sentence


def _block_to_sentence(
    block: list[Row],
    document: int,
    token_at: int,
    label_at: int | None,
    others: list[int],
    path: PathLike,
    strip: bool,
) -> Sentence:
    tokens = [fields[token_at] for _, fields in block]
    if strip:
        tokens = [_strip_seg_digit(tok, path, number) for tok, (number, _) in zip(tokens, block)]
    labels = None if label_at is None else [fields[label_at] for _, fields in block]
    columns = [[fields[i] for i in others] for _, fields in block]
    return Sentence(tokens, labels, source=str(path), line=block[0][0], extra={"columns": columns}, document=document)


def read_bmes(
    path: PathLike, encoding: str = "utf-8", stats: dict | None = None, strip_seg_digit: bool = False
) -> list[Sentence]:
    """Read a Chinese character file, ``char tag`` per line (Resume, OntoNotes 4, MSRA)."""
    return read_conll(path, 0, -1, encoding=encoding, stats=stats, strip_seg_digit=strip_seg_digit)


def read_chars_with_seg_digits(
    path: PathLike, strip_digit: bool = True, encoding: str = "utf-8", stats: dict | None = None
) -> list[Sentence]:
    """Read a Weibo NER file (``科0 B-PER.NAM``), removing each character's segmentation digit."""
    return read_conll(path, 0, -1, encoding=encoding, stats=stats, strip_seg_digit=strip_digit)


def read_raw(path_or_lines: PathLike | Iterable[str], chars: bool = False, encoding: str = "utf-8") -> list[Sentence]:
    """Read raw text for prediction: one sentence per non-blank line.

    Tokens are whitespace-separated words, or single characters (whitespace dropped) when ``chars``.
    ``path_or_lines`` is a file path or an iterable of strings (e.g. ``sys.stdin``).
    """
    if isinstance(path_or_lines, (str, os.PathLike)):
        source, numbered = str(path_or_lines), numbered_lines(path_or_lines, encoding)
    else:
        source, numbered = "<stdin>", enumerate(path_or_lines, start=1)
    return list(iter_raw(numbered, source, chars))


def iter_raw(numbered: Iterable[tuple[int, str]], source: str, chars: bool = False) -> Iterator[Sentence]:
    """Raw-text sentences from numbered lines, lazily (see :func:`read_raw`)."""
    for number, text in numbered:
        tokens = [c for c in text if not c.isspace()] if chars else text.split()
        if tokens:
            yield Sentence(tokens, None, source=source, line=number)


def _conll_lines(sentence: Sentence, prediction: Sequence[str]) -> list[str]:
    """The output lines of one sentence: token, other columns, gold (if any), prediction. The document breaks
    just before it come first, each as CoNLL-2003 writes them (other columns ``-X-``, tags ``O``) and a blank
    line: ``-DOCSTART- -X- -X- O O``."""
    if len(prediction) != len(sentence.tokens):
        raise ValueError(
            f"{sentence.source}:{sentence.line}: {len(sentence.tokens)} tokens but {len(prediction)} predicted tags"
        )
    columns = sentence.extra.get("columns") or [[] for _ in sentence.tokens]
    gold = sentence.labels if sentence.labels is not None else [None] * len(sentence.tokens)
    lines = []
    if sentence.breaks:
        docstart = [DOCSTART, *["-X-"] * len(columns[0])] + ["O"] * (1 + (sentence.labels is not None))
        lines = [" ".join(docstart) + "\n"] * sentence.breaks
    for token, other, label, pred in zip(sentence.tokens, columns, gold, prediction):
        fields = [token, *other] + ([label] if label is not None else []) + [pred]
        lines.append(" ".join(fields))
    return lines


def write_conll(
    sentences: Sequence[Sentence], predictions: Sequence[Sequence[str]], path_or_file: PathLike | IO[str]
) -> None:
    """Write sentences with their predicted tags in conlleval format, a blank line after each sentence."""
    if len(sentences) != len(predictions):
        raise ValueError(f"{len(sentences)} sentences but {len(predictions)} predictions")
    text = "".join("\n".join(_conll_lines(s, p)) + "\n\n" for s, p in zip(sentences, predictions))
    if isinstance(path_or_file, (str, os.PathLike)):
        write_output(path_or_file, text)
    else:
        path_or_file.write(text)


def write_output(path: PathLike, text: str) -> None:
    """Write a user-named output file atomically (temp file + rename); a bad destination is a one-line error."""
    from seqlab.io.files import atomic_write_text

    path = Path(path)
    if path.is_dir():
        raise SeqlabError("is a folder, not a file to write", path=path)
    if not path.parent.is_dir():
        raise SeqlabError(f"cannot write: no such folder {path.parent}", path=path)
    try:
        atomic_write_text(path, text)
    except OSError as err:
        raise SeqlabError(f"cannot write: {err.strerror}", path=path) from None


def chunked(items: Iterable, size: int) -> Iterator[list]:
    """Lists of ``size`` consecutive items (the last one shorter), read lazily."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
