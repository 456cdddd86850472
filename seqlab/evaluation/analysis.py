"""What a tagger gets right, decoupled as Li et al. (2019) do: entity chunking alone (per-class recall of
O, S, B, I, E with the types collapsed, their Table 3) and entity typing alone (per-type accuracy with
chunk boundaries ignored, their Table 4), optionally with named parts of the representation zeroed at
test time (Table 3's columns H, C_all, C1..C5: every other part of that layer zeroed).

The parts are the named column ranges encoder layers declare (``Encoder.columns``); nothing here knows
which layer made them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from seqlab.data.schemes import convert, split_tag
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.evaluation.seen import EntityKey, SeenSplit, format_seen_split, seen_split

CHUNK_CLASSES = ("O", "S", "B", "I", "E")
NONE = "NONE"


@dataclass
class ChunkingTyping:
    """Per-token recalls, in percent, with the number of gold tokens behind each."""

    chunk_recall: dict[str, float]  # O, S, B, I, E -> % of gold tokens of the class predicted with it
    chunk_support: dict[str, int]
    type_accuracy: dict[str, float]  # entity type, and NONE for O -> % of its gold tokens given that type
    type_support: dict[str, int]


@dataclass
class PartAnalysis:
    """The analysis with only ``kept`` left of its layer's named parts (None: the full model)."""

    kept: str | None
    zeroed: list[str]
    result: ChunkingTyping
    seen: SeenSplit | None = None  # span scores split by entities seen in a reference; None: no reference given


def _bioes(tags: Sequence[str], scheme: str) -> list[str]:
    if scheme == "BMES":  # the same structure: M is I
        return ["I" + t[1:] if t.startswith("M") else t for t in tags]
    return list(tags) if scheme == "BIOES" else convert(tags, scheme, "BIOES")


def chunk_and_type(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], scheme: str) -> ChunkingTyping:
    """Token-level chunking recall (types collapsed) and typing accuracy (boundaries ignored)."""
    if scheme == "none":
        raise SeqlabError("chunking and typing analyses need span labels (IOB1, BIO, BIOES or BMES)")
    chunk_total, chunk_right, type_total, type_right = Counter(), Counter(), Counter(), Counter()
    for g_seq, p_seq in zip(gold, pred):
        for g, p in zip(_bioes(g_seq, scheme), _bioes(p_seq, scheme)):
            (gp, gt), (pp, pt) = split_tag(g) or ("O", ""), split_tag(p) or ("O", "")
            chunk_total[gp] += 1
            chunk_right[gp] += gp == pp
            g_type, p_type = gt or NONE, pt or NONE
            type_total[g_type] += 1
            type_right[g_type] += g_type == p_type
    pct = lambda right, total: {k: 100.0 * right[k] / total[k] for k in total}  # noqa: E731
    chunks = [c for c in CHUNK_CLASSES if c in chunk_total]
    types = sorted(t for t in type_total if t != NONE) + ([NONE] if NONE in type_total else [])
    recall, accuracy = pct(chunk_right, chunk_total), pct(type_right, type_total)
    return ChunkingTyping(
        {c: recall[c] for c in chunks},
        {c: chunk_total[c] for c in chunks},
        {t: accuracy[t] for t in types},
        {t: type_total[t] for t in types},
    )


def zeroed_for(columns: dict[str, tuple[int, int]], keep: str) -> list[str]:
    """The named parts to zero so that only ``keep`` (and parts inside it) is left: every part whose
    columns do not overlap it. ``columns``: one layer's name -> (start, end)."""
    a, b = columns[keep]
    return [name for name, (s, e) in columns.items() if e <= a or s >= b]


def analyze(
    tagger,
    sentences: list[Sentence],
    keep: Sequence[str | None] = (None,),
    batch_size: int | None = None,
    known: Collection[EntityKey] | None = None,
) -> list[PartAnalysis]:
    """One :class:`PartAnalysis` per entry of ``keep`` (None = the full model); with ``known`` (the
    :func:`seqlab.evaluation.seen.entity_keys` of a reference, usually the training file), each also splits the
    span scores by entities seen there and not."""
    layers = [layer.columns for layer in tagger.net.encoders]
    gold, tokens = [s.labels for s in sentences], [s.tokens for s in sentences]
    out = []
    for part in keep:
        zeroed: list[str] = []
        if part is not None:
            owner = [cols for cols in layers if part in cols]
            if not owner:
                names = ", ".join(tagger.net.column_names()) or "none"
                raise SeqlabError(f"no part named '{part}' in this model; its named parts: {names}")
            zeroed = zeroed_for(owner[-1], part)
        evaluation = tagger.evaluate(sentences, batch_size, unseen="score", ablate=zeroed)
        result = chunk_and_type(gold, evaluation.predictions, tagger.scheme)
        seen = None
        if known is not None:
            seen = seen_split(tokens, gold, evaluation.predictions, known, tagger.scheme, tagger.joiner)
        out.append(PartAnalysis(part, zeroed, result, seen))
    return out


def format_analysis(parts: list[PartAnalysis], reference: str = "the reference") -> str:
    """Two tables, one column per analysis: chunk-class recall, then per-type accuracy (percent); then, where the
    analyses split spans by a reference's entities, each analysis's seen and unseen scores."""
    heads = ["full" if p.kept is None else f"{p.kept} only" for p in parts]
    first = parts[0].result
    lines = [
        "entity chunking, recall per class (types collapsed):",
        f"{'class':>8} {'tokens':>8} " + " ".join(f"{h:>9}" for h in heads),
    ]
    for c, n in first.chunk_support.items():
        lines.append(f"{c:>8} {n:>8} " + " ".join(f"{p.result.chunk_recall[c]:9.2f}" for p in parts))
    lines += [
        "",
        "entity typing, accuracy per type (boundaries ignored):",
        f"{'type':>8} {'tokens':>8} " + " ".join(f"{h:>9}" for h in heads),
    ]
    for t, n in first.type_support.items():
        lines.append(f"{t:>8} {n:>8} " + " ".join(f"{p.result.type_accuracy[t]:9.2f}" for p in parts))
    for head, p in zip(heads, parts):
        if p.seen is not None:
            lines += ["", f"{head}: " + format_seen_split(p.seen, reference).rstrip("\n")]
    return "\n".join(lines) + "\n"
