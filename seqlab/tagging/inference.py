"""One forward pass per batch gives tags, n-best paths, explanations and confidences together.

:func:`run` groups a call's sentences into batches (by length, cut where padding costs more than another batch:
:attr:`seqlab.tagger.Tagger.pad_overhead`), splits the batches that the call's memory budget
(:mod:`seqlab.runtime.cost`) does not hold, and tags them: on the engine that runs the encoding
(:mod:`seqlab.runtime.engine`) or eagerly, several eager batches side by side where there are threads for them
(:func:`seqlab.runtime.devices.run_concurrently`). Each batch's sentences are encoded when it runs: with batches
run side by side, one batch's featurizers (Python) overlap another's kernels.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

import torch

from seqlab.data.batching import Batch, collate, collate_sentences, size_groups
from seqlab.data.sentence import Sentence
from seqlab.features.base import Featurizer
from seqlab.runtime.cost import Budget, padded
from seqlab.runtime.devices import SMALL_BATCH, run_concurrently, threads_for
from seqlab.tagging.confidence import confidence as decoded_confidence
from seqlab.tagging.explanations import explain as explanations
from seqlab.tagging.results import Row

log = logging.getLogger("seqlab")


@torch.inference_mode()
def run(
    tagger,
    sentences: Sequence[Sentence],
    batch_size: int | None = None,
    nbest: int = 0,
    explain: bool = False,
    ablate: Collection[str] = (),
    confidence: bool = False,
    link: bool = True,
) -> list[Row]:
    """The :class:`Row` of each of ``sentences`` (``tagger``: a :class:`seqlab.tagger.Tagger`). ``link``: the
    sentences are consecutive text, each the context of the others (:meth:`Tagger.link`); False keeps the
    neighbours they have (the server links each request's own)."""
    if tagger.net.training:  # eval() walks every module: ~0.5 ms, a tenth of a batch-1 call
        tagger.net.eval()
    if link:
        tagger.link(sentences)
    rows = [Row(nbest=[] if nbest else None) for _ in sentences]
    nonempty = [i for i, s in enumerate(sentences) if s.tokens]
    groups = size_groups(
        [len(sentences[i].tokens) for i in nonempty],
        batch_size or tagger.config.train.eval_batch_size,
        pad_overhead=tagger.pad_overhead,
    )
    if tagger.engine is not None and not tagger.engine.current():
        log.info("the weights changed since the network was exported to onnxruntime: exporting it again")
        tagger.set_engine(tagger.engine_name)
    engine = tagger.engine
    budget = tagger.budget(nbest, explain)
    tokens = [len(sentences[i].tokens) for i in nonempty]
    lengths = row_lengths(tagger, sentences, nonempty, budget)  # positions of each batch row: tokens, or a lattice's
    groups = [part for group in groups for part in budget.parts(group, tokens, lengths)]

    def tag(group: list[int]) -> None:  # writes the rows of this group's sentences only
        positions = [nonempty[i] for i in group]
        chosen = [sentences[k] for k in positions]
        in_parts = engine is not None and engine.takes(len(group)) and bool(engine.pairwise_dim)
        if in_parts or len(chosen) <= SMALL_BATCH:
            # each sentence encoded, then collated: cheaper for one or two sentences than the batch's array
            # operations (41 against 47 us a CoNLL-2000 sentence); and onnxruntime runs pairwise tensors' big
            # batches in parts, re-collated from each sentence's arrays
            encoded = tagger.encode(chosen)
            batch = collate(encoded, list(range(len(encoded))), tagger.featurizers)
            parts = engine.parts(batch, encoded, tagger.featurizers) if in_parts else [batch]
        else:  # the batch's tokens looked up once, each featurizer collating from their type ids
            parts = [collate_sentences(chosen, tagger.featurizers, tagger.token_types)]
        for part in parts:
            tag_batch(tagger, part, [rows[k] for k in positions], nbest, explain, ablate, confidence)

    # batches that run eagerly on more than one thread go several at a time (one thread each), within the budget
    together: list[list[int]] = []
    for group in groups:
        if (
            len(group) > SMALL_BATCH
            and (engine is None or not engine.takes(len(group), ablate))
            and budget.side_by_side(len(group), padded(group, tokens, lengths))
        ):
            together.append(group)
        else:
            tag(group)
    # the costliest batches first (padded tokens: rows x longest), so that the last ones to finish are short and
    # no thread idles long while the other ends a long batch (groups come sorted by length, the longest last)
    together.sort(key=lambda g: len(g) * max(len(sentences[nonempty[i]].tokens) for i in g), reverse=True)
    run_concurrently(tag, together, tagger.device)
    if confidence:  # sentences without tokens still say what kind of confidence the model gives
        kind = next((r.confidence_kind for r in rows if r.confidence_kind), None)
        for r in rows:
            r.confidence_kind = r.confidence_kind or kind
    return rows


def row_lengths(tagger, sentences: Sequence[Sentence], nonempty: list[int], budget: Budget) -> list[int]:
    """Per sentence of ``nonempty``: the positions its batch row has (its tokens, or a lattice's tokens and
    words), each within ``budget`` (else :class:`~seqlab.runtime.cost.OverBudget` naming the sentence): first by
    its tokens alone, before any is encoded, then by what a featurizer reports (a lattice; its words are matched
    once more when the batch is encoded); and what they keep for the caller, together."""
    sized = [f for f in tagger.featurizers.values() if type(f).size is not Featurizer.size]
    for i in nonempty:
        s, n = sentences[i], len(sentences[i].tokens)
        if budget.over(n):  # the piece to suggest has the lattice of the sentence's start, if any
            head = Sentence(s.tokens[: budget.cost.fits(budget.limit)])
            ratio = max([1.0, *((f.size(f.encode(head)) or 0) / len(head.tokens) for f in sized)])
            budget.check(i, s.source, s.line, n, n, ratio)
    lengths = []
    for i in nonempty:
        s, n = sentences[i], len(sentences[i].tokens)
        length = max([n, *(f.size(f.encode(s)) or 0 for f in sized)])
        if length > n:
            budget.check(i, s.source, s.line, n, length)
        lengths.append(length)
    budget.check_kept(lengths)
    return lengths


def tag_batch(
    tagger, batch: Batch, targets: list[Row], nbest: int, explain: bool, ablate: Collection[str], confidence: bool
) -> None:
    """One forward pass over ``batch``, whose row ``j`` is sentence ``batch.index[j]`` of ``targets``: those
    rows get their tags, n-best paths, explanations and confidences."""
    batch = batch.to(tagger.device)
    engine = tagger.engine
    with threads_for(len(batch.index), tagger.device):
        if engine is not None and engine.takes(len(batch.index), ablate):
            out = tagger.net.head(*engine.run(batch, ablate), nbest)
        else:
            out = tagger.net(batch, ablate, nbest)
    tags = out.decoded.tags.cpu().numpy()  # (batch, seq_len)
    best = tags.tolist()
    labels = tagger.to_labels.rows(tags, batch.lengths.cpu().numpy())  # in the input's scheme, the whole batch at once
    lengths = batch.lengths.tolist()
    conf = None
    if confidence:
        conf = decoded_confidence(
            tagger.net.decoder,
            tagger.tags.itos,
            tagger.train_scheme,
            batch,
            out,
            [b[:n] for b, n in zip(best, lengths)],
        )
    for row, j in enumerate(batch.index):
        r = targets[j]
        r.tags = best[row][: lengths[row]]
        r.labels = labels[row]
        if out.nbest is not None:
            r.nbest = out.nbest[row]
        if explain:
            r.explanation = explanations(out.published, row, lengths[row], len(tagger.net.encoders))
        if conf is not None:
            r.confidence_kind = conf[0]
            if conf[1] is not None:
                r.token_conf, r.span_conf = conf[1][row], conf[2][row]
