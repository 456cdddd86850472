"""Tag schemes: chunk extraction, conversion, detection and transition constraints.

A tag is ``PREFIX-TYPE`` (split on the first ``-``), a bare ``PREFIX`` (type ``""``) or ``O``.
Supported schemes and their prefixes:

* ``IOB1``  -- I, B, O; a chunk starts with I unless it directly follows a chunk of the same type.
* ``BIO``   -- (alias ``IOB2``) B, I, O; every chunk starts with B.
* ``BIOES`` -- (alias ``IOBES``) B, I, E, S, O.
* ``BMES``  -- B, M, E, S, O (Chinese NER files); the same structure as BIOES with M in place of I.

Chunk extraction follows conlleval's ``startOfChunk``/``endOfChunk`` rules, so malformed sequences
are scored exactly as conlleval scores them (``O I-PER`` starts a chunk at the I, ``B-PER I-LOC`` is
two chunks). The rules are generalised to E and S (a chunk always ends after E or S; B and S always
start one) and M is read as I. Extraction is the same for every scheme.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from seqlab.errors import SeqlabError

Span = tuple[str, int, int]  # (type, start, end_exclusive)

SCHEMES = ("IOB1", "BIO", "BIOES", "BMES")
_ALIASES = {"IOB1": "IOB1", "BIO": "BIO", "IOB2": "BIO", "BIOES": "BIOES", "IOBES": "BIOES", "BMES": "BMES"}
_PREFIXES = {
    "IOB1": frozenset("BIO"),
    "BIO": frozenset("BIO"),
    "BIOES": frozenset("BIOES"),
    "BMES": frozenset("BMESO"),
}
_ALL_PREFIXES = frozenset("BIMESO")
_OUTSIDE = ("O", "")


def normalize_scheme(name: str) -> str:
    """Return the canonical scheme name for ``name`` (case-insensitive, aliases accepted)."""
    canonical = _ALIASES.get(str(name).strip().upper())
    if canonical is None:
        raise SeqlabError(f"unknown tag scheme '{name}' (expected one of {', '.join(SCHEMES)})")
    return canonical


def split_tag(tag: str) -> tuple[str, str] | None:
    """Split ``tag`` into (prefix, type); ``None`` when the prefix is not one of B, I, M, E, S, O.

    ``O`` always has type ``""``.
    """
    prefix, _, chunk_type = tag.partition("-")
    if prefix not in _ALL_PREFIXES:
        return None
    if prefix == "O":
        return _OUTSIDE
    return prefix, chunk_type


@functools.lru_cache(maxsize=4096)  # a tag set has tens of tags; this runs once per token of every output
def _parse(tag: str, scheme: str) -> tuple[str, str]:
    """Split ``tag`` for chunk extraction, reading M as I; raise SeqlabError on an unknown prefix."""
    parts = split_tag(tag)
    if parts is None:
        raise SeqlabError(f"tag '{tag}' is not a {scheme} tag (expected O or a B-, I-, M-, E-, S- prefix)")
    prefix, chunk_type = parts
    return ("I" if prefix == "M" else prefix), chunk_type


def _end_of_chunk(prev: tuple[str, str], cur: tuple[str, str]) -> bool:
    """conlleval's endOfChunk: does the chunk containing ``prev`` end before ``cur``?"""
    prev_tag, prev_type = prev
    tag, chunk_type = cur
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag != "O" and prev_type != chunk_type


def _start_of_chunk(prev: tuple[str, str], cur: tuple[str, str]) -> bool:
    """conlleval's startOfChunk: does a chunk start at ``cur``?"""
    prev_tag, prev_type = prev
    tag, chunk_type = cur
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev_tag in ("E", "S", "O"):
        return True
    return tag != "O" and prev_type != chunk_type


def get_spans(tags: Sequence[str], scheme: str = "BIO") -> list[Span]:
    """Return the chunks of ``tags`` as (type, start, end_exclusive), in order, conlleval-style."""
    scheme = normalize_scheme(scheme)
    spans: list[Span] = []
    prev = _OUTSIDE
    start: int | None = None
    for i, tag in enumerate(tags):
        cur = _parse(tag, scheme)
        if start is not None and _end_of_chunk(prev, cur):
            spans.append((prev[1], start, i))
            start = None
        if _start_of_chunk(prev, cur):
            start = i
        prev = cur
    if start is not None:
        spans.append((prev[1], start, len(tags)))
    return spans


def _tag(prefix: str, chunk_type: str) -> str:
    return f"{prefix}-{chunk_type}" if chunk_type else prefix


def spans_to_tags(spans: Iterable[Span], length: int, scheme: str) -> list[str]:
    """Render non-overlapping ``spans`` as a well-formed tag sequence of ``length`` in ``scheme``."""
    scheme = normalize_scheme(scheme)
    tags = ["O"] * length
    prev_end, prev_type = -1, None
    for chunk_type, start, end in sorted(spans, key=lambda s: s[1]):
        tags[start:end] = _render_chunk(chunk_type, end - start, scheme, start == prev_end and chunk_type == prev_type)
        prev_end, prev_type = end, chunk_type
    return tags


def _render_chunk(chunk_type: str, size: int, scheme: str, follows_same_type: bool) -> list[str]:
    """The tags of one chunk of ``size`` tokens."""
    inside = "M" if scheme == "BMES" else "I"
    if scheme == "IOB1":
        first = "B" if follows_same_type else "I"
        return [_tag(first, chunk_type)] + [_tag("I", chunk_type)] * (size - 1)
    if scheme == "BIO":
        return [_tag("B", chunk_type)] + [_tag("I", chunk_type)] * (size - 1)
    if size == 1:
        return [_tag("S", chunk_type)]
    return [_tag("B", chunk_type)] + [_tag(inside, chunk_type)] * (size - 2) + [_tag("E", chunk_type)]


def convert(tags: Sequence[str], src: str, dst: str) -> list[str]:
    """Convert ``tags`` from scheme ``src`` to scheme ``dst`` through their chunks.

    Lossless for well-formed input: ``convert(convert(t, A, B), B, A) == t``.
    """
    return spans_to_tags(get_spans(tags, src), len(tags), dst)


def detect_scheme(tag_sequences: Iterable[Sequence[str]]) -> str:
    """Guess the scheme of a corpus from its tag sequences.

    M- present -> BMES; else E- or S- present -> BIOES; else IOB1 when some chunk starts with I-
    (after O, the sentence start or another type) and every B- follows the same type; else BIO.
    """
    prefixes: set[str] = set()
    chunk_starting_i = False
    b_after_other = False
    for tags in tag_sequences:
        prev = _OUTSIDE
        for tag in tags:
            cur = split_tag(tag) or _OUTSIDE
            prefixes.add(cur[0])
            starts_new_type = prev[0] == "O" or prev[1] != cur[1]
            if cur[0] == "I" and starts_new_type:
                chunk_starting_i = True
            if cur[0] == "B" and starts_new_type:
                b_after_other = True
            prev = cur
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"E", "S"}:
        return "BIOES"
    if chunk_starting_i and not b_after_other:
        return "IOB1"
    return "BIO"


def _may_follow(prev: tuple[str, str], cur: tuple[str, str], scheme: str) -> bool:
    """May tag ``cur`` directly follow ``prev`` in a well-formed ``scheme`` sequence?"""
    (p, p_type), (c, c_type) = prev, cur
    same = p != "O" and p_type == c_type
    if scheme == "BIO":
        return c != "I" or same
    if scheme == "IOB1":
        return c != "B" or same
    inside = "M" if scheme == "BMES" else "I"
    if p in ("B", inside):
        return c in (inside, "E") and p_type == c_type
    return c in ("O", "B", "S")


def _may_start(cur: tuple[str, str], scheme: str) -> bool:
    if scheme == "BIO":
        return cur[0] in ("O", "B")
    if scheme == "IOB1":
        return cur[0] in ("O", "I")
    return cur[0] in ("O", "B", "S")


def _may_end(cur: tuple[str, str], scheme: str) -> bool:
    if scheme in ("BIO", "IOB1"):
        return True
    return cur[0] in ("O", "E", "S")


def allowed_transitions(tags: Sequence[str], scheme: str) -> tuple[list[list[bool]], list[bool], list[bool]]:
    """Hard transition constraints for a CRF over the tag vocabulary ``tags``.

    Returns ``(allowed, start, end)``: ``allowed[i][j]`` is True when ``tags[i]`` may be followed by
    ``tags[j]`` (the ``transitions[from, to]`` convention), ``start[j]`` when a sequence may begin
    with ``tags[j]``, ``end[i]`` when it may finish with ``tags[i]``. Tags that are not tags of the
    scheme (``<pad>``, or an E- tag under BIO) allow nothing to or from them.
    """
    scheme = normalize_scheme(scheme)
    parsed = [_scheme_tag(tag, scheme) for tag in tags]
    allowed = [[p is not None and c is not None and _may_follow(p, c, scheme) for c in parsed] for p in parsed]
    start = [c is not None and _may_start(c, scheme) for c in parsed]
    end = [c is not None and _may_end(c, scheme) for c in parsed]
    return allowed, start, end


def _scheme_tag(tag: str, scheme: str) -> tuple[str, str] | None:
    """(prefix, type) of ``tag`` when it is a tag of ``scheme``, else None."""
    parts = split_tag(tag)
    if parts is None or parts[0] not in _PREFIXES[scheme]:
        return None
    if parts[0] == "O" and tag != "O":
        return None
    return parts


#: Tag-by-tag prefix maps that convert a *well-formed* BIOES / BMES sequence exactly.
_PREFIX_MAPS = {
    "BIO": {"B": "B", "I": "I", "M": "I", "E": "I", "S": "B", "O": "O"},
    "BIOES": {"B": "B", "I": "I", "M": "I", "E": "E", "S": "S", "O": "O"},
    "BMES": {"B": "B", "I": "M", "M": "M", "E": "E", "S": "S", "O": "O"},
}


#: Batches of at most this many rows are converted row by row: for one sentence the array operations of
#: :meth:`IndexConverter.rows` cost more than they save (27 against 5 us on a CoNLL-2000 sentence).
ROWS_ONE_BY_ONE = 2


class IndexConverter:
    """Tag-index sequences in scheme ``src`` (over the vocabulary ``itos``) -> label strings in ``dst``.

    The same result as ``convert([itos[i] for i in seq], src, dst)``, faster for the common case of
    decoding: when ``src`` is BIOES or BMES and every move of the sequence is allowed in ``src``
    (always so after constrained Viterbi), a well-formed sequence converts tag by tag through a
    table; anything else goes through the chunks (:func:`convert`).
    """

    def __init__(self, itos: Sequence[str], src: str, dst: str):
        self.itos = list(itos)
        self.src, self.dst = (src, dst) if src == dst else (normalize_scheme(src), normalize_scheme(dst))
        self.table: list[str] | None = None
        if self.src != self.dst and self.src in ("BIOES", "BMES") and self.dst in _PREFIX_MAPS:
            allowed, start, end = allowed_transitions(self.itos, self.src)
            n = len(self.itos)
            self._pairs = {(i, j) for i in range(n) for j in range(n) if allowed[i][j]}
            self._pairs |= {(-1, j) for j in range(n) if start[j]} | {(i, -1) for i in range(n) if end[i]}
            self.table = [self._map(tag) for tag in self.itos]
            self._allowed = np.array(allowed, dtype=bool).reshape(n, n)  # the same moves, for whole batches
            self._start, self._end = np.array(start, dtype=bool), np.array(end, dtype=bool)
        self._labels = np.array(self.itos if self.table is None else self.table, dtype=object)  # (tags,)

    def _map(self, tag: str) -> str:
        parts = _scheme_tag(tag, self.src)
        if parts is None:
            return tag  # not a tag of the scheme: never in a well-formed sequence
        return _tag(_PREFIX_MAPS[self.dst][parts[0]], parts[1])

    def __call__(self, seq: Sequence[int]) -> list[str]:
        if self.src == self.dst:
            return [self.itos[i] for i in seq]
        if self.table is not None:
            moves = zip([-1, *seq], [*seq, -1])
            if all(m in self._pairs for m in moves):
                return [self.table[i] for i in seq]
        return convert([self.itos[i] for i in seq], self.src, self.dst)

    def rows(self, tags: np.ndarray, lengths: np.ndarray) -> list[list[str]]:
        """Each row's labels, ``self(tags[b, :lengths[b]])`` for every b, for a whole batch at once: tags (batch,
        seq_len) int, lengths (batch,) >= 1. The moves of all rows are checked and their tags mapped with array
        operations (3.5x the per-row calls on a CoNLL-2000 test pass); a row with a move not allowed in ``src``
        goes through the chunks as in :meth:`__call__`."""
        batch, seq_len = tags.shape
        if batch <= ROWS_ONE_BY_ONE or (self.src != self.dst and self.table is None):
            return [self(row[:n]) for row, n in zip(tags.tolist(), lengths.tolist())]
        mapped = self._labels[tags].tolist()  # (batch, seq_len) lists of labels, padding included
        out = [row[:n] for row, n in zip(mapped, lengths.tolist())]
        if self.src == self.dst:
            return out
        rows = np.arange(batch)
        ok = self._start[tags[:, 0]] & self._end[tags[rows, lengths - 1]]  # (batch,)
        if seq_len > 1:
            inside = np.arange(1, seq_len)[None, :] < lengths[:, None]  # (batch, seq_len - 1): a real move
            ok &= (self._allowed[tags[:, :-1], tags[:, 1:]] | ~inside).all(axis=1)
        for b in np.flatnonzero(~ok).tolist():  # not well-formed: through the chunks
            out[b] = self(tags[b, : lengths[b]].tolist())
        return out


# ----- checking a file's tags against its declared scheme ------------------------------------------------

_USES = {"IOB1": "B-, I-, O", "BIO": "B-, I-, O", "BIOES": "B-, I-, E-, S-, O", "BMES": "B-, M-, E-, S-, O"}
#: How a well-formed sequence converts tag by tag, (from, to) -> what changes.
_CONVERSIONS = {
    ("BIOES", "BIO"): "S- becomes B-, E- becomes I-",
    ("BMES", "BIO"): "S- becomes B-, M- and E- become I-",
    ("BMES", "BIOES"): "M- becomes I-",
    ("BIOES", "BMES"): "I- becomes M-",
    ("BIO", "BIOES"): "a one-token chunk's B- becomes S-, a chunk's last I- becomes E-",
    ("BIO", "BMES"): "a one-token chunk's B- becomes S-, a chunk's last I- becomes E-, the other I- become M-",
}
Located = tuple[int, Sequence[str]]  # (line of the first tag, the tags of one sentence, one per line)


def conversion_hint(src: str, dst: str) -> str:
    """How to convert tags from scheme ``src`` to ``dst``, in words, for an error message."""
    call = f"seqlab.data.schemes.convert(tags, '{src}', '{dst}') converts a sentence"
    how = _CONVERSIONS.get((src, dst))
    return f"{how}; {call}" if how else call


def fitting_scheme(tag_sequences: Sequence[Sequence[str]]) -> str | None:
    """The narrowest scheme whose prefixes cover every tag: BIO or IOB1 (told apart as :func:`detect_scheme`
    does), else BIOES, else BMES; None when the tags mix I- and M- (or are not chunk tags)."""
    prefixes = {(split_tag(tag) or ("?", ""))[0] for tags in tag_sequences for tag in tags} - {"O"}
    if prefixes <= {"B", "I"}:
        return detect_scheme(tag_sequences)
    return next((s for s in ("BIOES", "BMES") if prefixes <= _PREFIXES[s]), None)


def _malformed(tag: str) -> str | None:
    """What is wrong with ``tag`` whatever the scheme, or None."""
    parts = split_tag(tag)
    if parts is None:
        return f"tag {tag!r} is not a chunk tag (expected O or a B-, I-, M-, E-, S- prefix)"
    prefix, chunk_type = parts
    if tag.startswith("O-"):
        return f"tag {tag!r}: O takes no type (write 'O')"
    if tag.endswith("-") and not chunk_type:
        return f"tag {tag!r} has an empty type after '-' (write '{prefix}' alone, or '{prefix}-TYPE')"
    return None


def _remedy(scheme: str, fit: str | None, setting: str | None, expected_from: str) -> str:
    """The end of a wrong-scheme message: the scheme that the file's tags fit, and how to get there."""
    if fit is None:
        return (
            "; the file mixes I- and M- tags, which no one scheme has (both mean inside a chunk): convert one "
            "to the other"
        )
    convert_it = f"convert the file ({conversion_hint(fit, scheme)})"
    if setting is not None:
        return f"; the file's tags fit {fit}: set {setting} to {fit}, or {convert_it}"
    return f"; the file's tags fit {fit} but {expected_from} reads {scheme}: {convert_it}"


def _first_lines(sequences: Iterable[Located]) -> tuple[dict[str, int], list[Sequence[str]]]:
    """Each distinct tag -> the line it first appears on, in file order; and the tag sequences."""
    first: dict[str, int] = {}
    tag_sequences = []
    for line, tags in sequences:
        tag_sequences.append(tags)
        for k, tag in enumerate(tags):
            first.setdefault(tag, line + k)
    return dict(sorted(first.items(), key=lambda item: item[1])), tag_sequences


def check_scheme(
    sequences: Iterable[Located],
    scheme: str,
    path: object,
    setting: str | None = None,
    expected_from: str = "the model",
) -> None:
    """Refuse the first tag of a file that is not a tag of ``scheme``, naming the file, its line and the tag,
    with the scheme that the file's tags fit and how to convert them.

    Refused: a tag without a chunk prefix, ``O-TYPE``, an empty type (``B-``); a prefix that ``scheme`` lacks
    (``S-LOC`` in BIO, ``I-PER`` in BMES); chunks in a BIOES / BMES file that has no E- or S- tag at all
    (BIO or IOB1 data: no chunk would end); a tag without a type among typed ones, or the other way round (the
    fewer kind is wrong). ``setting`` names what declared the scheme (``data.scheme``, ``--scheme``); None when
    it is fixed by ``expected_from`` (a model, the training file)."""
    if scheme == "none":
        return
    scheme = normalize_scheme(scheme)
    first, tag_sequences = _first_lines(sequences)
    for tag, line in first.items():
        problem = _malformed(tag)
        if problem:
            raise SeqlabError(problem, path=path, line=line)
    parts = {tag: split_tag(tag) or _OUTSIDE for tag in first}
    fit = fitting_scheme(tag_sequences)
    for tag, line in first.items():
        if parts[tag][0] not in _PREFIXES[scheme]:
            article = "an" if scheme == "IOB1" else "a"
            raise SeqlabError(
                f"tag {tag!r} is not {article} {scheme} tag ({scheme} uses {_USES[scheme]})"
                + _remedy(scheme, fit, setting, expected_from),
                path=path,
                line=line,
            )
    in_chunks = {p for p, _ in parts.values()} - {"O"}
    if scheme in ("BIOES", "BMES") and in_chunks and not in_chunks & {"E", "S"}:
        tag, line = next((t, n) for t, n in first.items() if parts[t][0] != "O")
        raise SeqlabError(
            f"tag {tag!r} is in a chunk, but no E- or S- tag in the file ends one: these are not "
            f"{scheme} tags" + _remedy(scheme, fit, setting, expected_from),
            path=path,
            line=line,
        )
    _check_types(first, parts, path)


def _check_types(first: dict[str, int], parts: dict[str, tuple[str, str]], path: object) -> None:
    """Chunk tags all have a type (``B-PER``) or none has (``B``, word segmentation): of a mix, the kind with
    fewer distinct tags is refused."""
    typed = [t for t in first if parts[t][0] != "O" and parts[t][1]]
    bare = [t for t in first if parts[t][0] != "O" and not parts[t][1]]
    if not typed or not bare:
        return
    if len(bare) <= len(typed):
        tag, example = bare[0], typed[0]
        what = f"tag {tag!r} has no type, but the file's other chunk tags have one"
    else:
        tag, example = typed[0], bare[0]
        what = f"tag {tag!r} has a type, but the file's other chunk tags have none"
    raise SeqlabError(f"{what} (e.g. {example!r} on line {first[example]})", path=path, line=first[tag])
