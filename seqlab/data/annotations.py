"""Annotation formats: text with character-offset spans, in (training, evaluation, tagging) and out (pre-annotations).

Formats (``--from`` / ``--to`` of ``seqlab convert``; the flavour of a JSON record is told from its keys when
reading, so any ``.jsonl`` / ``.json`` file of the three is read alike):

``doccano``
    ``{"text": ..., "label": [[start, end, "TYPE"], ...]}``, or the newer ``"entities": [{"start_offset",
    "end_offset", "label"}, ...]``. Written with ``"label"`` (what doccano imports), other keys of the input
    record kept.
``labelstudio``
    A Label Studio task: ``{"data": {"text": ...}, "annotations": [{"result": [{"value": {"start", "end",
    "labels": ["TYPE"]}, "from_name", "to_name", "type": "labels"}]}]}``. The text is ``data.text`` (or the
    task's only string); the gold spans are those of the first annotation not cancelled. Written with
    ``"annotations"`` by ``convert`` and ``"predictions"`` (with scores) by ``predict``, ready to import;
    ``from_name`` / ``to_name`` are the input's, else ``label`` / ``text``. Offsets are in characters (code
    points); an old export whose offsets count UTF-16 units (text after an emoji) is recognised by ``value.text``
    and read right.
``spacy-jsonl``
    spaCy's / Prodigy's ``{"text": ..., "spans": [{"start", "end", "label"}, ...]}`` (or ``"ents"``); a record's
    ``"tokens": [{"start", "end"}, ...]`` are used as its tokens. Written with ``tokens`` and ``spans`` (with
    ``token_start`` / ``token_end``, inclusive, as Prodigy).
``spacy``
    A spaCy ``DocBin`` file (``.spacy``; needs spaCy installed): its documents' own tokens (space tokens left
    out) and ``doc.ents`` (or the spans of its only ``doc.spans`` key). Written with ``doc.ents``.
``conll`` / ``bmes``
    Column files (token first, tag last); converting to spans joins the tokens with one space (nothing for
    ``bmes`` or the ``chars`` tokenizer), so the spans keep their characters in that text.

A ``.jsonl`` file holds one record a line, a ``.json`` file a JSON array of records (or one record). Errors
name the file and the line of the record (for a DocBin, the document's number).

**Spans and tokens.** Raw text is cut into tokens by a tokenizer of :mod:`seqlab.data.tokenization` (``whitespace``,
``english``, ``chars``: ``data.tokenizer`` or ``--tokenizer``), each token keeping its character offsets, and
each gold span becomes the tags of the tokens it covers. The alignment rule: a span's leading and trailing
spaces are dropped; then it must start at a token's first character and end at a token's last one. A span that
does not (``"Jordan"`` inside the token ``"Jordan's"`` of the whitespace tokenizer) is an error naming the
file, the line and the span, and the tokens it cuts: fix the span or choose a tokenizer that splits there;
nothing is moved silently. Overlapping spans are an error too (a tag sequence holds one span per token); the
same span given twice is kept once. A record without annotations (no ``label`` / ``entities`` / ``spans`` /
``ents`` key, a Label Studio task with no annotation) is unlabeled: fine for tagging, an error in training or
evaluation data. Every span written back maps to the characters it covers in the record's text.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from seqlab.data.schemes import SCHEMES, detect_scheme, get_spans, normalize_scheme, spans_to_tags, split_tag
from seqlab.data.sentence import Sentence, linked_chunks
from seqlab.data.tokenization import TOKENIZERS, Offsets, tokenize
from seqlab.errors import SeqlabError

log = logging.getLogger("seqlab")

JSON_FLAVOURS = ("doccano", "labelstudio", "spacy-jsonl")
FORMATS = ("conll", "bmes", *JSON_FLAVOURS, "spacy")
ANNOTATION_SUFFIXES = (".jsonl", ".json", ".spacy")
_SUFFIXES = {
    ".conll": "conll",
    ".txt": "conll",
    ".tsv": "conll",
    ".bmes": "bmes",
    ".jsonl": "jsonl",
    ".json": "json",
    ".spacy": "spacy",
}

CharSpan = tuple[int, int, str]  # (start, end, type): character offsets, end exclusive


# ----- formats ---------------------------------------------------------------------------------------------------
def format_of(path: str | Path, given: str | None, writing: bool) -> str:
    """A file's format: ``given`` (a name of :data:`FORMATS`), else from its extension; a ``.jsonl`` / ``.json``
    file is read in whichever flavour each record has ("jsonl" / "json") and written as doccano / Label Studio."""
    if given:
        if given not in FORMATS:
            raise SeqlabError(f"unknown format '{given}': expected one of {', '.join(FORMATS)}")
        return given
    suffix = Path(str(path)).suffix.lower()
    fmt = _SUFFIXES.get(suffix)
    if fmt is None:
        raise SeqlabError(
            f"cannot tell the format from the extension '{suffix}' (.conll, .txt, .bmes, .jsonl, "
            f".json, .spacy): name it with --{'to' if writing else 'from'}",
            path=path,
        )
    if writing and fmt in ("jsonl", "json"):
        return "doccano" if fmt == "jsonl" else "labelstudio"
    return fmt


def _layout(path: str | Path) -> str:
    """How JSON records are laid out in a file: "array" for ``.json``, "lines" otherwise."""
    return "array" if Path(str(path)).suffix.lower() == ".json" else "lines"


# ----- reading records -------------------------------------------------------------------------------------------
def iter_json_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line, record) of a ``.jsonl`` file (one JSON value a line, blank lines skipped; read lazily) or of a
    ``.json`` file (a JSON array of records, or one record)."""
    path = Path(path)
    if not path.is_file():
        raise SeqlabError("no such file", path=path)
    if _layout(path) == "lines":
        from seqlab.data.readers import numbered_lines

        return _lines_records(numbered_lines(path, "utf-8"), str(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise SeqlabError("not valid utf-8 text", path=path) from None
    except OSError as err:
        raise SeqlabError(f"cannot read ({err.strerror})", path=path) from None
    return _array_records(text, str(path))


def _lines_records(numbered: Iterable[tuple[int, str]], source: str) -> Iterator[tuple[int, Any]]:
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise SeqlabError(f"not a JSON record: {err.msg} (column {err.colno})", path=source, line=number) from None
        except RecursionError:
            raise SeqlabError("JSON nested too deeply", path=source, line=number) from None


def _array_records(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array (or one JSON value) with the line each starts on."""
    decoder = json.JSONDecoder()
    line, counted = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    def skip(pos: int) -> int:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        return pos

    def decode(pos: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise SeqlabError(f"not valid JSON: {err.msg} (column {err.colno})", path=source, line=err.lineno) from None
        except RecursionError:
            raise SeqlabError("JSON nested too deeply", path=source, line=line_at(pos)) from None

    pos = skip(0)
    if pos == len(text):
        return
    if text[pos] != "[":
        value, end = decode(pos)
        if skip(end) != len(text):
            raise SeqlabError(
                "extra data after the JSON value (a file of one record a line is .jsonl)",
                path=source,
                line=line_at(skip(end)),
            )
        yield line_at(pos), value
        return
    pos = skip(pos + 1)
    if pos < len(text) and text[pos] == "]":
        return
    while True:
        value, end = decode(pos)
        yield line_at(pos), value
        pos = skip(end)
        if pos < len(text) and text[pos] == ",":
            pos = skip(pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            if skip(pos + 1) != len(text):
                raise SeqlabError("extra data after the JSON array", path=source, line=line_at(skip(pos + 1)))
            return
        raise SeqlabError(
            "expected ',' or ']' between the records of a JSON array", path=source, line=line_at(min(pos, len(text)))
        )


def flavour_of(record: dict) -> str:
    """The flavour of one JSON record, from its keys."""
    if isinstance(record.get("data"), dict):
        return "labelstudio"
    if "label" in record or "entities" in record:
        return "doccano"
    return "spacy-jsonl"


class _Where:
    """File and line of a record, for errors."""

    def __init__(self, source: str, line: int):
        self.source, self.line = source, line

    def error(self, message: str) -> SeqlabError:
        return SeqlabError(message, path=self.source, line=self.line)


def _int(value: Any, what: str, where: _Where) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"{what}: expected an integer character offset, got {value!r}")
    return value


def _label(value: Any, where: _Where) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise where.error(f"span label: expected a non-empty string without surrounding spaces, got {value!r}")
    return value


def _utf16_to_chars(text: str, offset: int) -> int:
    """The character (code point) offset of a UTF-16 code-unit offset into ``text``."""
    units = 0
    for i, ch in enumerate(text):
        if units >= offset:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def parse_record(record: Any, flavour: str | None, where: _Where) -> tuple[str, list[CharSpan] | None, str]:
    """(text, gold character spans or None for an unlabeled record, the record's flavour)."""
    if not isinstance(record, dict):
        raise where.error(f"expected a JSON object (a record), got {type(record).__name__}")
    flavour = flavour or flavour_of(record)
    if flavour == "labelstudio":
        return (*_labelstudio(record, where), flavour)
    text = record.get("text")
    if not isinstance(text, str):
        raise where.error(f"{flavour} record: expected a string 'text'")
    spans: list[CharSpan] | None = None
    if flavour == "doccano":
        if "label" in record:
            items = record["label"]
            if not isinstance(items, list):
                raise where.error("'label': expected a list of [start, end, label] triples")
            spans = []
            for item in items:
                if not (isinstance(item, list) and len(item) == 3):
                    raise where.error(
                        f"'label': expected [start, end, label] triples (a sequence-labeling project), got {item!r}"
                    )
                spans.append((_int(item[0], "start", where), _int(item[1], "end", where), _label(item[2], where)))
        elif "entities" in record:
            items = record["entities"]
            if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
                raise where.error("'entities': expected a list of objects with start_offset, end_offset and label")
            spans = [
                (
                    _int(e.get("start_offset"), "start_offset", where),
                    _int(e.get("end_offset"), "end_offset", where),
                    _label(e.get("label"), where),
                )
                for e in items
            ]
    else:
        key = "spans" if "spans" in record else "ents" if "ents" in record else None
        if key is not None:
            items = record[key]
            if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
                raise where.error(f"'{key}': expected a list of objects with start, end and label")
            spans = [
                (_int(e.get("start"), "start", where), _int(e.get("end"), "end", where), _label(e.get("label"), where))
                for e in items
            ]
    return text, spans, flavour


def _labelstudio_text(data: dict, where: _Where) -> str:
    text = data.get("text")
    if isinstance(text, str):
        return text
    strings = [v for v in data.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    raise where.error("Label Studio task: 'data' has no 'text' (and not exactly one string to tag)")


def _labelstudio(record: dict, where: _Where) -> tuple[str, list[CharSpan] | None]:
    text = _labelstudio_text(record["data"], where)
    annotations = record.get("annotations", record.get("completions"))
    if annotations is None:
        return text, None
    if not isinstance(annotations, list):
        raise where.error("Label Studio task: 'annotations' must be a list")
    kept = [a for a in annotations if isinstance(a, dict) and not a.get("was_cancelled")]
    if not kept:
        return text, None
    result = kept[0].get("result", [])
    if not isinstance(result, list):
        raise where.error("Label Studio annotation: 'result' must be a list")
    spans = []
    for item in result:
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(value, dict) or "start" not in value or not isinstance(value.get("labels"), list):
            continue  # another control's result (a choice, a relation)
        labels = value["labels"]
        if len(labels) != 1:
            raise where.error(
                f"Label Studio region {value.get('start')}-{value.get('end')}: expected one label, got {labels!r}"
            )
        start, end = _int(value["start"], "value.start", where), _int(value["end"], "value.end", where)
        shown = value.get("text")
        if isinstance(shown, str) and text[start:end] != shown:  # offsets counted in UTF-16 units (old exports)
            a, b = _utf16_to_chars(text, start), _utf16_to_chars(text, end)
            if text[a:b] == shown:
                start, end = a, b
        spans.append((start, end, _label(labels[0], where)))
    return text, spans


def _record_tokens(record: dict, text: str, where: _Where) -> Offsets | None:
    """A record's own tokens ("tokens": [{"start", "end"}, ...], spaCy / Prodigy), space tokens left out."""
    tokens = record.get("tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, dict) for t in tokens):
        return None
    out: Offsets = []
    for t in tokens:
        a, b = _int(t.get("start"), "token start", where), _int(t.get("end"), "token end", where)
        if not 0 <= a < b <= len(text) or (out and a < out[-1][1]):
            raise where.error(f"token [{a}, {b}): outside the text or overlapping the one before")
        if "text" in t and text[a:b] != t["text"]:
            raise where.error(f"token [{a}, {b}) is {text[a:b]!r} in the text but says {t['text']!r}")
        if text[a:b].strip():
            out.append((a, b))
    return out


# ----- spans <-> tags --------------------------------------------------------------------------------------------
def align_spans(
    text: str, offsets: Offsets, spans: Iterable[CharSpan], where: _Where, tokenizer: str = "whitespace"
) -> list[tuple[str, int, int]]:
    """Character spans -> token spans (type, first token, one past the last), by the alignment rule of the module
    (spaces around a span dropped; a span must start and end at token boundaries; no overlaps)."""
    starts = {a: i for i, (a, _) in enumerate(offsets)}
    ends = {b: i for i, (_, b) in enumerate(offsets)}
    out: list[tuple[str, int, int]] = []
    seen: set[CharSpan] = set()
    for start, end, label in sorted(spans, key=lambda s: (s[0], s[1])):
        if not 0 <= start < end <= len(text):
            raise where.error(f"span [{start}, {end}) {label!r}: outside the text ({len(text)} characters) or empty")
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a == b:
            raise where.error(f"span [{start}, {end}) {label!r} covers only spaces")
        if (a, b, label) in seen:
            continue
        seen.add((a, b, label))
        if a not in starts or b not in ends:
            cut = [(x, y) for x, y in offsets if x < b and y > a]
            near = f"[{cut[0][0]}, {cut[-1][1]}) {text[cut[0][0] : cut[-1][1]]!r}" if cut else "no token"
            raise where.error(
                f"span [{start}, {end}) {label!r} ({text[a:b]!r}) does not align with the tokens of the "
                f"{tokenizer} tokenizer (the tokens it touches: {near}): fix the span, or choose a "
                f"tokenizer that splits there (data.tokenizer / --tokenizer)"
            )
        first, last = starts[a], ends[b] + 1
        if out and first < out[-1][2]:
            prev = out[-1]
            raise where.error(
                f"span [{start}, {end}) {label!r} overlaps the span of {prev[0]!r} at "
                f"[{offsets[prev[1]][0]}, {offsets[prev[2] - 1][1]}): a tag sequence holds one span "
                f"per token"
            )
        out.append((label, first, last))
    return out


def char_spans(offsets: Offsets, token_spans: Iterable[tuple[str, int, int]]) -> list[CharSpan]:
    """Token spans (type, first, one past the last) -> character spans (start, end, type)."""
    return [(offsets[a][0], offsets[b - 1][1], t) for t, a, b in token_spans]


def read_annotations(
    path: str | Path,
    tokenizer: str = "whitespace",
    scheme: str = "BIO",
    flavour: str | None = None,
    labeled: bool = True,
    keep_records: bool = False,
) -> list[Sentence]:
    """The records of a JSONL / JSON / DocBin file as sentences: tokens by ``tokenizer`` (a DocBin's or a record's
    own tokens where it has them), labels in ``scheme`` (None for an unlabeled record; with ``labeled``, an
    unlabeled record is an error), ``extra["text"]`` and ``extra["offsets"]`` (each token's characters), and with
    ``keep_records`` the input record (``extra["record"]``, its flavour in ``extra["flavour"]``) for writing back.
    Records without tokens are skipped (and counted in a log line)."""
    sentences, empty = [], 0
    for s in iter_annotations(path, tokenizer, scheme, flavour, keep_records):
        if labeled and s.labels is None:
            raise SeqlabError(
                "this record has no annotations (no label / entities / spans / ents key, or a Label "
                "Studio task without an annotation): training and evaluation need labeled records",
                path=s.source,
                line=s.line,
            )
        if not labeled:
            s.labels = None
        if not s.tokens:
            empty += 1
            continue
        sentences.append(s)
    if empty:
        log.warning("%s: skipped %d record(s) without tokens", path, empty)
    if not sentences:
        raise SeqlabError("no records with text found (empty file?)", path=path)
    return sentences


def iter_annotations(
    path: str | Path,
    tokenizer: str = "whitespace",
    scheme: str = "BIO",
    flavour: str | None = None,
    keep_records: bool = True,
) -> Iterator[Sentence]:
    """Sentences of an annotation file, lazily (see :func:`read_annotations`); records without tokens included."""
    if tokenizer not in TOKENIZERS:
        raise SeqlabError(f"unknown tokenizer '{tokenizer}': expected one of {', '.join(TOKENIZERS)}")
    scheme = normalize_scheme(scheme)
    if Path(str(path)).suffix.lower() == ".spacy" or flavour == "spacy":
        yield from _iter_docbin(Path(path), scheme)
        return
    if flavour not in (None, *JSON_FLAVOURS):
        raise SeqlabError(f"not an annotation format: '{flavour}'")
    yield from records_to_sentences(iter_json_records(path), str(path), tokenizer, scheme, flavour, keep_records)


def records_to_sentences(
    records: Iterable[tuple[int, Any]],
    source: str,
    tokenizer: str,
    scheme: str = "BIO",
    flavour: str | None = None,
    keep_records: bool = True,
) -> Iterator[Sentence]:
    for line, record in records:
        where = _Where(source, line)
        text, spans, kind = parse_record(record, flavour, where)
        offsets = _record_tokens(record, text, where) if kind == "spacy-jsonl" else None
        if offsets is None:
            offsets = tokenize(text, tokenizer)
        labels = None
        if spans is not None:
            token_spans = align_spans(text, offsets, spans, where, tokenizer)
            labels = spans_to_tags(token_spans, len(offsets), scheme)
        extra: dict = {"text": text, "offsets": offsets}
        if keep_records:
            extra.update(record=record, flavour=kind)
        yield Sentence([text[a:b] for a, b in offsets], labels, source=source, line=line, extra=extra)


def text_records(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """Raw text as records: each non-blank line a ``{"text": line}``."""
    for number, line in numbered:
        if line.strip():
            yield number, {"text": line}


# ----- DocBin ----------------------------------------------------------------------------------------------------
def _spacy():
    try:
        import spacy
    except ImportError:
        raise SeqlabError("spaCy's DocBin (.spacy) files need spaCy: pip install 'seqlab[spacy]'") from None
    return spacy


def _iter_docbin(path: Path, scheme: str) -> Iterator[Sentence]:
    spacy = _spacy()
    from spacy.tokens import DocBin

    if not path.is_file():
        raise SeqlabError("no such file", path=path)
    try:
        docs = list(DocBin().from_disk(path).get_docs(spacy.vocab.Vocab()))
    except Exception as err:
        why = (str(err).splitlines() or [type(err).__name__])[0][:200]
        raise SeqlabError(f"not a spaCy DocBin file: {why}", path=path) from None
    for number, doc in enumerate(docs, start=1):
        where = _Where(str(path), number)
        kept = [t for t in doc if not t.text.isspace()]
        offsets = [(t.idx, t.idx + len(t.text)) for t in kept]
        labels = None
        spans = None
        if doc.has_annotation("ENT_IOB"):
            spans = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
        elif len(doc.spans) == 1:
            spans = [(s.start_char, s.end_char, s.label_) for s in next(iter(doc.spans.values()))]
        if spans is not None:
            labels = spans_to_tags(align_spans(doc.text, offsets, spans, where, "spaCy"), len(offsets), scheme)
        yield Sentence(
            [t.text for t in kept],
            labels,
            source=str(path),
            line=number,
            extra={"text": doc.text, "offsets": offsets, "flavour": "spacy"},
        )


def to_doc(vocab, text: str, offsets: Offsets, spans: Sequence[CharSpan] = ()):
    """A spaCy ``Doc`` whose text is ``text`` exactly: the tokens at ``offsets``, spaces between them as spaCy's
    trailing-space flags and space tokens; ``spans`` as its entities."""
    from spacy.tokens import Doc

    words: list[str] = []
    spaces: list[bool] = []

    def gap(between: str) -> None:
        if not between:
            return
        if words and between[0] == " " and not spaces[-1]:
            spaces[-1] = True
            between = between[1:]
        if between:
            words.append(between)
            spaces.append(False)

    at = 0
    for a, b in offsets:
        gap(text[at:a])
        words.append(text[a:b])
        spaces.append(False)
        at = b
    gap(text[at:])
    doc = Doc(vocab, words=words, spaces=spaces)
    ents = []
    for start, end, label in spans:
        span = doc.char_span(start, end, label=label)
        if span is None:
            raise SeqlabError(f"span [{start}, {end}) {label!r} does not fall on token boundaries")
        ents.append(span)
    doc.ents = ents
    return doc


def write_docbin(items: Iterable[tuple[str, Offsets, Sequence[CharSpan]]], path: str | Path) -> int:
    spacy = _spacy()
    from spacy.tokens import DocBin

    vocab = spacy.vocab.Vocab()
    db = DocBin(attrs=["ENT_IOB", "ENT_TYPE"], store_user_data=False)
    n = 0
    for text, offsets, spans in items:
        db.add(to_doc(vocab, text, offsets, spans))
        n += 1
    from seqlab.io.files import atomic_write_bytes

    atomic_write_bytes(Path(path), db.to_bytes())
    return n


# ----- writing records -------------------------------------------------------------------------------------------
_GOLD_KEYS = {
    "doccano": ("label", "entities", "relations"),
    "spacy-jsonl": ("spans", "ents", "tokens"),
    "labelstudio": (),
}


def render_record(
    text: str,
    offsets: Offsets,
    spans: Sequence[CharSpan],
    flavour: str,
    record: dict | None = None,
    record_flavour: str | None = None,
    predicted: bool = False,
    scores: Sequence[float | None] | None = None,
    model_version: str | None = None,
) -> dict:
    """One output record of ``flavour`` for ``text`` and its character ``spans`` (gold, or ``predicted`` with
    ``scores``). The input ``record``'s other keys are kept where it is of the same flavour."""
    same = record if record is not None and record_flavour == flavour else None
    if flavour == "labelstudio":
        return _labelstudio_task(text, spans, same, predicted, scores, model_version)
    out = {k: v for k, v in (same or {}).items() if k not in _GOLD_KEYS[flavour]}
    out["text"] = text
    if flavour == "doccano":
        out["label"] = [[a, b, t] for a, b, t in spans]
        return out
    if flavour != "spacy-jsonl":
        raise ValueError(flavour)
    index = {a: i for i, (a, _) in enumerate(offsets)}
    ends = {b: i for i, (_, b) in enumerate(offsets)}
    out["tokens"] = [{"text": text[a:b], "start": a, "end": b, "id": i} for i, (a, b) in enumerate(offsets)]
    out["spans"] = []
    for k, (a, b, t) in enumerate(spans):
        span = {"start": a, "end": b, "label": t, "token_start": index[a], "token_end": ends[b]}
        if predicted and scores is not None and scores[k] is not None:
            span["score"] = scores[k]
        out["spans"].append(span)
    return out


def _labelstudio_names(record: dict | None) -> tuple[str, str]:
    """(from_name, to_name) of the labels control in a task's own results, else Label Studio's NER template's."""
    for key in ("annotations", "predictions", "completions"):
        for ann in (record or {}).get(key) or []:
            for item in (ann.get("result") or []) if isinstance(ann, dict) else []:
                if isinstance(item, dict) and item.get("type") == "labels":
                    return str(item.get("from_name", "label")), str(item.get("to_name", "text"))
    return "label", "text"


def _labelstudio_task(
    text: str,
    spans: Sequence[CharSpan],
    record: dict | None,
    predicted: bool,
    scores: Sequence[float | None] | None,
    model_version: str | None,
) -> dict:
    from_name, to_name = _labelstudio_names(record)
    result = []
    for k, (a, b, t) in enumerate(spans):
        item = {
            "id": f"seqlab-{k}",
            "from_name": from_name,
            "to_name": to_name,
            "type": "labels",
            "value": {"start": a, "end": b, "text": text[a:b], "labels": [t]},
        }
        if predicted and scores is not None and scores[k] is not None:
            item["score"] = scores[k]
        result.append(item)
    task: dict = {"data": dict(record["data"]) if record else {"text": text}}
    if record and "meta" in record:
        task["meta"] = record["meta"]
    if predicted:
        known = [s for s in (scores or []) if s is not None]
        prediction: dict = {"model_version": model_version or "seqlab", "result": result}
        if known:
            prediction["score"] = min(known)  # the least sure span: what a reviewer sorts by
        task["predictions"] = [prediction]
    else:
        task["annotations"] = [{"result": result}]
    return task


class RecordWriter:
    """Writes records to a stream one at a time: one a line, or (``array``) as one JSON array."""

    def __init__(self, stream: IO[str], array: bool):
        self.stream, self.array, self.count = stream, array, 0

    def write(self, record: dict) -> None:
        text = json.dumps(record, ensure_ascii=False)
        if self.array:
            self.stream.write(("[\n" if self.count == 0 else ",\n") + text)
        else:
            self.stream.write(text + "\n")
        self.count += 1

    def close(self) -> None:
        if self.array:
            self.stream.write("[]\n" if self.count == 0 else "\n]\n")


# ----- convert ---------------------------------------------------------------------------------------------------
def _column_sentences(path: Path, fmt: str, token_column: int, label_column: int) -> list[Sentence]:
    from seqlab.data.readers import read_bmes, read_conll

    return read_bmes(path) if fmt == "bmes" else read_conll(path, token_column, label_column)


def _spans_of_columns(sentences: list[Sentence], path: Path) -> str:
    """The scheme of column files' tags (detected); refuses labels that are not chunk tags."""
    for s in sentences:
        for k, label in enumerate(s.labels or ()):
            if split_tag(label) is None:
                raise SeqlabError(
                    f"label {label!r} is not a chunk tag (O, or B-, I-, M-, E-, S- and a type): only "
                    f"chunk tags have spans to convert",
                    path=path,
                    line=s.line + k,
                )
    return detect_scheme([s.labels for s in sentences if s.labels])


def convert(
    src: str | Path,
    dst: str | Path,
    src_format: str | None = None,
    dst_format: str | None = None,
    tokenizer: str | None = None,
    scheme: str | None = None,
    token_column: int = 0,
    label_column: int = -1,
) -> int:
    """Convert ``src`` to ``dst`` (formats from the extensions, or named); returns the sentences written.

    Column files -> spans: the tokens joined by one space (by nothing for ``bmes`` or the ``chars`` tokenizer),
    the other columns kept in each record's ``columns``, so that converting back gives the same columns. Spans ->
    column files: tokens by ``tokenizer`` (default ``whitespace``; ``chars`` for ``bmes``), tags in ``scheme``
    (default BIO; BMES for ``bmes``). ``scheme`` also sets the scheme of column files written from column files."""
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise SeqlabError("no such file", path=src)
    fin, fout = format_of(src, src_format, False), format_of(dst, dst_format, True)
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise SeqlabError(f"--tokenizer: expected one of {', '.join(TOKENIZERS)}, got '{tokenizer}'")
    if scheme is not None and (scheme == "none" or scheme.upper() not in {*SCHEMES, "IOB2", "IOBES"}):
        raise SeqlabError(f"--scheme: expected one of {', '.join(SCHEMES)}, got '{scheme}'")
    out_scheme = normalize_scheme(scheme or ("BMES" if fout == "bmes" else "BIO"))
    if tokenizer is None:
        tokenizer = "chars" if "bmes" in (fin, fout) else "whitespace"
    # (text, offsets, character spans or None, tokens, other columns or None, input record, its flavour)
    items: list[tuple[str, Offsets, list[CharSpan] | None, list[str], list | None, dict | None, str | None]] = []
    if fin in ("conll", "bmes"):
        sentences = _column_sentences(src, fin, token_column, label_column)
        in_scheme = _spans_of_columns(sentences, src)
        joiner = "" if tokenizer == "chars" else " "
        mismatched = 0
        for s in sentences:
            _joined(s, joiner)
            text, offsets = s.extra.pop("text"), s.extra.pop("offsets")
            if tokenize(text, tokenizer) != offsets:
                mismatched += 1
            spans = None if s.labels is None else char_spans(offsets, get_spans(s.labels, in_scheme))
            columns = s.extra.get("columns")
            items.append((text, offsets, spans, s.tokens, columns if columns and any(columns) else None, None, None))
        if mismatched and fout not in ("conll", "bmes", "spacy-jsonl", "spacy"):
            log.warning(
                "%s: in %d sentence(s) the %s tokenizer does not give back the file's tokens from the text: "
                "reading the output with it cuts them differently (spacy-jsonl keeps the tokens)",
                src,
                mismatched,
                tokenizer,
            )
    else:
        for s in iter_annotations(src, tokenizer, out_scheme, None if fin in ("jsonl", "json") else fin):
            spans = None if s.labels is None else char_spans(s.extra["offsets"], get_spans(s.labels, out_scheme))
            record = s.extra.get("record")
            columns = None
            if isinstance(record, dict):  # the other columns of a column file converted before
                meta = record.get("meta") if s.extra.get("flavour") == "labelstudio" else record
                columns = meta.get("columns") if isinstance(meta, dict) else None
            if not (isinstance(columns, list) and len(columns) == len(s.tokens)):
                columns = None
            items.append(
                (s.extra["text"], s.extra["offsets"], spans, s.tokens, columns, record, s.extra.get("flavour"))
            )
    if fout == "spacy":
        return write_docbin(((text, offsets, spans or []) for text, offsets, spans, *_ in items), dst)
    import io as _io

    buf = _io.StringIO()
    if fout in ("conll", "bmes"):
        for text, offsets, spans, tokens, columns, _, _ in items:
            if not tokens:
                continue
            labels = None
            if spans is not None:
                where = _Where(str(src), 0)
                labels = spans_to_tags(align_spans(text, offsets, spans, where, tokenizer), len(tokens), out_scheme)
            for k, tok in enumerate(tokens):
                if any(c.isspace() for c in tok):
                    raise SeqlabError(f"token {tok!r} holds a space: a column file cannot hold it", path=src)
                fields = [tok, *(columns[k] if columns else []), *([labels[k]] if labels else [])]
                buf.write(" ".join(fields) + "\n")
            buf.write("\n")
    else:
        writer = RecordWriter(buf, _layout(dst) == "array")
        for text, offsets, spans, _tokens, columns, record, kind in items:
            out = render_record(text, offsets, spans or [], fout, record, kind)
            if spans is None and fout != "labelstudio":
                out.pop("label" if fout == "doccano" else "spans", None)
            elif spans is None:
                out.pop("annotations", None)
            if columns is not None and record is None:
                if fout == "labelstudio":
                    out["meta"] = {"columns": columns}
                else:
                    out["columns"] = columns
            writer.write(out)
        writer.close()
    from seqlab.data.readers import write_output

    write_output(dst, buf.getvalue())
    return len(items)


# ----- predict ---------------------------------------------------------------------------------------------------
OUTPUTS = ("doccano", "labelstudio", "spacy-jsonl")


def is_annotation_file(name: str) -> bool:
    return name != "-" and Path(name).suffix.lower() in ANNOTATION_SUFFIXES


def _stdin_records(source: str) -> Iterator[tuple[int, Any]]:
    """Records from stdin: a JSON array, JSON lines, or raw text (each non-blank line one text)."""
    from seqlab.data.readers import numbered_lines

    numbered = numbered_lines(sys.stdin.buffer, "utf-8", source)
    first = None
    head: list[tuple[int, str]] = []
    for number, line in numbered:
        head.append((number, line))
        if line.strip():
            first = line.lstrip()[0]
            break
    if first == "[":
        text = "\n" * (head[-1][0] - 1) + "\n".join([head[-1][1], *(line for _, line in numbered)])
        return _array_records(text, source)
    import itertools

    lines = itertools.chain(head, numbered)
    return _lines_records(lines, source) if first == "{" else text_records(lines)


def predict_annotations(
    tagger,
    file: str,
    output_format: str,
    tokenizer: str | None = None,
    batch_size: int | None = None,
    chunk: int = 2000,
    max_length: int | None = None,
    write=None,
    model_name: str | None = None,
    input_format: str = "auto",
    nbest: int | None = None,
    explain: bool = False,
) -> int:
    """``seqlab predict MODEL FILE --output-format doccano|labelstudio|spacy-jsonl`` (and an annotation file in
    with ``conll`` / ``jsonl`` out): tags the records of ``file`` ('-': stdin), or its text lines, or the
    sentences of a column file (``input_format`` conll, or auto and guessed so; the tokens joined by a space, by
    nothing for the chars tokenizer, as ``convert`` does) chunk by chunk, and writes each record with its
    predicted spans (character offsets into its text, and their confidences). ``nbest`` and ``explain`` go to the
    jsonl output (conll output becomes jsonl with them, as without records). Returns the records tagged."""
    from seqlab.data.readers import numbered_lines, write_conll
    from seqlab.data.tokenization import model_tokenizer

    write = write or sys.stdout.write
    if output_format == "conll" and (nbest or explain):
        output_format = "jsonl"
    elif output_format not in ("conll", "jsonl") and (nbest or explain):
        raise SeqlabError(f"--nbest and --explain go to jsonl output, not {output_format}")
    tokenizer = tokenizer or model_tokenizer(tagger.config.data)
    if tokenizer not in TOKENIZERS:
        raise SeqlabError(f"--tokenizer: expected one of {', '.join(TOKENIZERS)}, got '{tokenizer}'")
    scheme = tagger.scheme if tagger.scheme != "none" else "BIO"
    if file == "-":
        sentences: Iterable[Sentence] = records_to_sentences(_stdin_records("<stdin>"), "<stdin>", tokenizer, scheme)
    elif is_annotation_file(file):
        sentences = iter_annotations(file, tokenizer, scheme)
    else:
        if not Path(file).is_file():
            raise SeqlabError("no such file", path=file)
        width = None
        if input_format == "auto":
            from seqlab.data.formats import guess_format

            guess = guess_format(text for _, text in numbered_lines(file, "utf-8"))
            input_format, width = guess.format, guess.width
        if input_format == "conll":
            from seqlab.data.readers import iter_conll

            joiner = "" if tokenizer == "chars" else " "
            sentences = (_joined(s, joiner) for s in iter_conll(numbered_lines(file, "utf-8"), file, width=width))
        else:
            sentences = records_to_sentences(text_records(numbered_lines(file, "utf-8")), file, tokenizer, scheme)
    writer = RecordWriter(_Sink(write), array=True) if output_format == "labelstudio" else None
    version = f"seqlab {model_name}" if model_name else "seqlab"
    count = 0
    for part in linked_chunks(sentences, chunk, tagger.neighbours()):  # the same context for any --chunk
        count += len(part)
        # the input records aside: a sentence split for --max-length has its extra values sliced
        kept = [(s.extra.pop("record", None), s.extra.pop("flavour", None)) for s in part]
        preds = tagger.predict(
            part, batch_size, nbest=nbest, explain=explain, max_length=max_length, confidence=True, link=False
        )
        if output_format == "conll":
            import io as _io

            buf = _io.StringIO()
            write_conll(part, [p.tags for p in preds], buf)
            write(buf.getvalue())
            continue
        lines = []
        for s, p, (record, kind) in zip(part, preds, kept):
            offsets, text = s.extra["offsets"], s.extra["text"]
            spans = [(offsets[x.start][0], offsets[x.end - 1][1], x.type) for x in p.spans]
            scores = [x.confidence for x in p.spans]
            if output_format == "jsonl":
                d = p.to_dict()
                d["text"] = text
                for span, (a, b, _) in zip(d["spans"], spans):
                    span.update(start_char=a, end_char=b, text=text[a:b])
                lines.append(json.dumps(d, ensure_ascii=False) + "\n")
                continue
            record = render_record(
                text, offsets, spans, output_format, record, kind, predicted=True, scores=scores, model_version=version
            )
            if output_format == "labelstudio":
                writer.write(record)
            else:
                lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        if lines:
            write("".join(lines))
    if writer is not None:
        writer.close()
    return count


def _joined(sentence: Sentence, joiner: str) -> Sentence:
    """A column file's sentence with the text of its tokens joined, and their offsets in it."""
    offsets, at = [], 0
    for tok in sentence.tokens:
        offsets.append((at, at + len(tok)))
        at += len(tok) + len(joiner)
    sentence.extra.update(text=joiner.join(sentence.tokens), offsets=offsets)
    return sentence


class _Sink:
    """A write function as a stream."""

    def __init__(self, write):
        self.write = write


__all__ = [
    "FORMATS",
    "JSON_FLAVOURS",
    "OUTPUTS",
    "align_spans",
    "char_spans",
    "convert",
    "format_of",
    "iter_annotations",
    "predict_annotations",
    "read_annotations",
    "render_record",
    "to_doc",
]
