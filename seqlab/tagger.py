"""The user-facing tagger: featurizers + network + tag-scheme handling, saved as JSON + safetensors.

    >>> tagger = Tagger.load("runs/chunking/model")
    >>> tagger.predict(["He reckons the current account deficit will narrow ."])[0].spans
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from seqlab import __version__
from seqlab.config import ExperimentConfig
from seqlab.nn.context import Context
from seqlab.runtime.cost import MEMORY_BUDGET, Budget, Cost, OverBudget, network_cost, padded, parameter_shapes
from seqlab.crf.crf import TagPath
from seqlab.data.batching import Batch, Encoded, collate, collate_sentences, size_groups
from seqlab.data.corpus import check_labels
from seqlab.data.tokenization import model_tokenizer, text_sentence
from seqlab.data.schemes import IndexConverter, convert, get_spans
from seqlab.data.sentence import Sentence
from seqlab.data.splitting import cut_points, split_sentence
from seqlab.data.token_types import TokenTypes
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.decoders.base import NoExactConfidence, ProbabilisticDecoderConfig, TagSet
from seqlab.runtime.devices import SMALL_BATCH, resolve_device, run_concurrently, threads_for
from seqlab.errors import SeqlabError
from seqlab.features.base import MEMO_TOKENS, Featurizer
from seqlab.io.files import atomic_write_bytes, atomic_write_dir, check_folder_kind, check_writable, recover_dir
from seqlab.evaluation.metrics import Scores, span_f1, token_scores
from seqlab.tagging.network import TaggerNet
from seqlab.tagging.modelfile import FORMAT_VERSION, NAMES, parse_model_files, read_model_files, read_weights
from seqlab.tagging.named_models import resolve_model

log = logging.getLogger("seqlab")

#: Default :attr:`Tagger.pad_overhead`: what one more batch is taken to cost, in padded tokens. Measured on the
#: chunker (2026-11-24): 256 made server-like calls (64 random test sentences) 1.15x faster on onnxruntime and
#: 1.35x on torch, and left the length-sorted test set at batch 64 as fast as before; 64 cut sorted batches
#: that gain nothing from it (32 -> 37 batches) and slowed that 1.14x.
PAD_OVERHEAD = 256


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
class LayerExplanation:
    """What one encoder layer published for a sentence: attention weights (tokens x tokens, rows sum
    to 1; the mean over heads for a multi-head layer, whose heads are in ``heads``) and the mean fusion
    gate per token, where the layer has them."""

    layer: int
    attention: list[list[float]] | None = None
    gate_mean: list[float] | None = None
    heads: list[list[list[float]]] | None = None


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
class _Row:
    """Inference result of one sentence, before conversion to labels."""

    tags: list[int] = field(default_factory=list)
    labels: list[str] | None = None  # ``tags`` in the input's scheme; None: not converted yet
    nbest: list[TagPath] | None = None
    explanation: list[LayerExplanation] | None = None
    split_at: list[int] | None = None
    token_conf: list[float] | None = None
    span_conf: dict[tuple[int, int], float] | None = None  # (start, end) -> probability
    confidence_kind: str | None = None


def training_scheme(scheme: str, requested: str) -> str:
    """The scheme the model is trained in, given the files' scheme and ``data.train_scheme``."""
    if scheme == "none" or requested == "same":
        return scheme
    if scheme == "BMES" and requested == "BIOES":
        return "BMES"  # the same structure; keep the corpus's own letters
    return requested


class Tagger:
    """A trained (or freshly built) sequence tagger."""

    def __init__(self, config: ExperimentConfig, featurizers: dict[str, Featurizer], tags: Vocab, scheme: str,
                 net: TaggerNet, device: str | torch.device = "cpu"):
        self.config, self.featurizers, self.tags, self.scheme = config, featurizers, tags, scheme
        self.device = resolve_device(device)
        self.net = net.to(self.device)
        self.to_labels = IndexConverter(tags.itos, self.train_scheme, scheme)  # indices -> input-scheme labels
        self.engine = None  # runs the encoding instead of eager PyTorch (seqlab.runtime.engine); None = eager
        self.engine_name = "torch"  # the engine asked for (auto may run everything eagerly)
        # a batch of very unequal lengths (requests merged by the server) is cut where that saves more padded
        # tokens than this many, the cost of one more batch (seqlab.data.batching.split_padding); None = never
        self.pad_overhead: int | None = PAD_OVERHEAD
        # the distinct tokens tagged so far, numbered: a batch's featurizers look its tokens up once between them
        self.token_types = TokenTypes(MEMO_TOKENS)
        # bytes one call's tensors may take (seqlab.runtime.cost): a sentence over it is refused, a batch over it runs in parts
        self.memory_budget = MEMORY_BUDGET
        # sentences longer than this many tokens are tagged in pieces where a call gives no max_length (predict's
        # and evaluate's --max-length); None: whole
        self.max_length: int | None = None
        self._costs: dict[tuple, Cost] = {}

    # ----- tag schemes -------------------------------------------------------------------------
    @property
    def train_scheme(self) -> str:
        return training_scheme(self.scheme, self.config.data.train_scheme)

    def to_train_scheme(self, labels: list[str]) -> list[str]:
        if self.train_scheme == self.scheme:
            return labels
        return convert(labels, self.scheme, self.train_scheme)

    # ----- construction ------------------------------------------------------------------------
    @classmethod
    def build(cls, config: ExperimentConfig, train: list[Sentence], scheme: str,
              other: Sequence[Sentence] = (), device: str | torch.device = "cpu") -> "Tagger":
        """Featurizers fitted on ``train`` (pre-trained words also from ``other``), tags, network."""
        featurizers = {name: fc.build(name) for name, fc in config.model.embedder.features.items()}
        for f in featurizers.values():
            f.fit(train, other, config.train.seed)
        ts = training_scheme(scheme, config.data.train_scheme)
        tag_counts = Counter(t for s in train for t in (s.labels if ts == scheme else convert(s.labels, scheme, ts)))
        tags = Vocab(sorted(tag_counts), specials=())
        net = TaggerNet(config.model, featurizers, TagSet(tags.itos, ts))
        return cls(config, featurizers, tags, scheme, net, device)

    # ----- encoding ----------------------------------------------------------------------------
    def encode(self, sentences: Sequence[Sentence], with_tags: bool = False) -> list[Encoded]:
        """Each sentence through every featurizer (and its gold tags to ids when ``with_tags``)."""
        out = []
        feats = list(self.featurizers.items())
        sized = [(name, f) for name, f in feats if type(f).size is not Featurizer.size]  # report a length
        for s in sentences:
            arrays = {name: f.encode(s) for name, f in feats}
            sizes = {name: f.size(arrays[name]) for name, f in sized}
            out.append(Encoded(len(s.tokens), arrays, self._tag_ids(s) if with_tags else None, sizes))
        return out

    def _tag_ids(self, s: Sentence) -> np.ndarray:
        tags = self.to_train_scheme(s.labels)
        stoi = self.tags.stoi
        for k, t in enumerate(tags):
            if t not in stoi:
                raise SeqlabError(f"label '{s.labels[k]}' was not seen in training", path=s.source, line=s.line + k)
        return np.fromiter((stoi[t] for t in tags), dtype=np.int64, count=len(tags))

    # ----- inference ---------------------------------------------------------------------------
    def _as_sentences(self, inputs) -> list[Sentence]:
        tokenizer = model_tokenizer(self.config.data)  # whitespace, chars for bmes, or data.tokenizer
        if isinstance(inputs, (str, Sentence)):
            inputs = [inputs]
        out = []
        for item in inputs:
            if isinstance(item, Sentence):
                out.append(item)
            elif isinstance(item, str):  # tokens keep their characters (extra["offsets"]) for the spans' text
                out.append(text_sentence(item, tokenizer))
            else:
                out.append(Sentence(list(item)))
        return out

    @torch.inference_mode()
    def _run(self, sentences: Sequence[Sentence], batch_size: int | None = None, nbest: int = 0,
             explain: bool = False, ablate: Collection[str] = (), confidence: bool = False) -> list[_Row]:
        """One forward pass per batch gives tags, n-best paths, explanations and confidences together. Each
        batch's sentences are encoded when it runs: with batches run side by side, one batch's featurizers
        (Python) overlap another's kernels."""
        if self.net.training:  # eval() walks every module: ~0.5 ms, a tenth of a batch-1 call
            self.net.eval()
        rows = [_Row(nbest=[] if nbest else None) for _ in sentences]
        nonempty = [i for i, s in enumerate(sentences) if s.tokens]
        groups = size_groups([len(sentences[i].tokens) for i in nonempty],
                             batch_size or self.config.train.eval_batch_size, pad_overhead=self.pad_overhead)
        if self.engine is not None and not self.engine.current():
            log.info("the weights changed since the network was exported to onnxruntime: exporting it again")
            self.set_engine(self.engine_name)
        engine = self.engine
        budget = self.budget(nbest, explain)
        tokens = [len(sentences[i].tokens) for i in nonempty]
        lengths = self._lengths(sentences, nonempty, budget)  # positions of each batch row: tokens, or a lattice's
        groups = [part for group in groups for part in budget.parts(group, tokens, lengths)]

        def tag(group: list[int]) -> None:  # writes the rows of this group's sentences only
            positions = [nonempty[i] for i in group]
            chosen = [sentences[k] for k in positions]
            in_parts = engine is not None and engine.takes(len(group)) and bool(engine.pairwise_dim)
            if in_parts or len(chosen) <= SMALL_BATCH:
                # each sentence encoded, then collated: cheaper for one or two sentences than the batch's array
                # operations (41 against 47 us a CoNLL-2000 sentence); and onnxruntime runs pairwise tensors' big
                # batches in parts, re-collated from each sentence's arrays
                encoded = self.encode(chosen)
                batch = collate(encoded, list(range(len(encoded))), self.featurizers)
                parts = engine.parts(batch, encoded, self.featurizers) if in_parts else [batch]
            else:  # the batch's tokens looked up once, each featurizer collating from their type ids
                parts = [collate_sentences(chosen, self.featurizers, self.token_types)]
            for part in parts:
                self._tag_batch(part, [rows[k] for k in positions], nbest, explain, ablate, confidence)

        # batches that run eagerly on more than one thread go several at a time (one thread each), within the budget
        together: list[list[int]] = []
        for group in groups:
            if len(group) > SMALL_BATCH and (engine is None or not engine.takes(len(group), ablate)) \
                    and budget.side_by_side(len(group), padded(group, tokens, lengths)):
                together.append(group)
            else:
                tag(group)
        # the costliest batches first (padded tokens: rows x longest), so that the last ones to finish are short and
        # no thread idles long while the other ends a long batch (groups come sorted by length, the longest last)
        together.sort(key=lambda g: len(g) * max(len(sentences[nonempty[i]].tokens) for i in g), reverse=True)
        run_concurrently(tag, together, self.device)
        if confidence:  # sentences without tokens still say what kind of confidence the model gives
            kind = next((r.confidence_kind for r in rows if r.confidence_kind), None)
            for r in rows:
                r.confidence_kind = r.confidence_kind or kind
        return rows

    def cost(self, nbest: int = 0, explain: bool = False) -> Cost:
        """What tagging costs in memory per position and per pair of positions (:mod:`seqlab.runtime.cost`) on this
        network and engine, with ``nbest`` paths and explanations or not."""
        engine = self.engine
        whole = 2 * engine.pairwise_dim if engine is not None and engine.max_rows is None else 0  # R and its sum
        key = (nbest, explain, whole)
        if key not in self._costs:
            chars = {name: f.config.max_len for name, f in self.featurizers.items()
                     if isinstance(getattr(f.config, "max_len", None), int)}  # characters per token
            self._costs[key] = network_cost(self.net, chars, len(self.tags), nbest, explain, whole)
        return self._costs[key]

    def budget(self, nbest: int = 0, explain: bool = False) -> Budget:
        """The memory budget of a call (:attr:`memory_budget`), shared by the batches that run side by side."""
        threads = torch.get_num_threads() if self.device.type == "cpu" else 1
        return Budget(self.cost(nbest, explain), self.memory_budget, threads)

    def _lengths(self, sentences: Sequence[Sentence], nonempty: list[int], budget: Budget) -> list[int]:
        """Per sentence of ``nonempty``: the positions its batch row has (its tokens, or a lattice's tokens and
        words), each within ``budget`` (else :class:`OverBudget` naming the sentence): first by its tokens alone,
        before any is encoded, then by what a featurizer reports (a lattice; its words are matched once more
        when the batch is encoded); and what they keep for the caller, together."""
        sized = [f for f in self.featurizers.values() if type(f).size is not Featurizer.size]
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

    def _tag_batch(self, batch: Batch, targets: list[_Row], nbest: int, explain: bool, ablate: Collection[str],
                   confidence: bool) -> None:
        """One forward pass over ``batch``, whose row ``j`` is sentence ``batch.index[j]`` of ``targets``: those
        rows get their tags, n-best paths, explanations and confidences."""
        batch = batch.to(self.device)
        engine = self.engine
        with threads_for(len(batch.index), self.device):
            if engine is not None and engine.takes(len(batch.index), ablate):
                out = self.net.head(*engine.run(batch, ablate), nbest)
            else:
                out = self.net(batch, ablate, nbest)
        tags = out.decoded.tags.cpu().numpy()  # (batch, seq_len)
        best = tags.tolist()
        labels = self.to_labels.rows(tags, batch.lengths.cpu().numpy())  # in the input's scheme, the whole batch at once
        lengths = batch.lengths.tolist()
        conf = self._confidence(batch, out, [b[:n] for b, n in zip(best, lengths)]) if confidence else None
        for row, j in enumerate(batch.index):
            r = targets[j]
            r.tags = best[row][: lengths[row]]
            r.labels = labels[row]
            if out.nbest is not None:
                r.nbest = out.nbest[row]
            if explain:
                r.explanation = _explain(out.published, row, lengths[row], len(self.net.encoders))
            if conf is not None:
                r.confidence_kind = conf[0]
                if conf[1] is not None:
                    r.token_conf, r.span_conf = conf[1][row], conf[2][row]

    def _confidence(self, batch, out, paths: list[list[int]]):
        """(kind, per-token probabilities per row, {(start, end): probability} per row) of the decoded
        paths; (reason, None, None) when the decoder has none."""
        itos, scheme = self.tags.itos, self.train_scheme
        segments = [[] if scheme == "none" else [(a, b) for _, a, b in get_spans([itos[i] for i in p], scheme)]
                    for p in paths]
        ctx = Context(batch.mask, batch.lengths, batch.features, out.published)
        try:
            conf = self.net.decoder.confidence(out.features, batch.mask, ctx, out.decoded.tags, segments)
        except NoExactConfidence as err:
            return f"unavailable: {err}", None, None
        return conf.kind, conf.tokens, [dict(zip(segs, probs)) for segs, probs in zip(segments, conf.spans)]

    def _run_capped(self, sentences: Sequence[Sentence], max_length: int | None, batch_size: int | None = None,
                    nbest: int = 0, explain: bool = False, ablate: Collection[str] = (),
                    confidence: bool = False) -> list[_Row]:
        """:meth:`_run` on whole sentences, or on pieces of at most ``max_length`` tokens (by default
        :attr:`max_length`) whose tags are joined back (a split sentence's row has ``split_at`` set, and no n-best
        list or explanation: those do not join)."""
        if max_length is None:
            max_length = self.max_length
        if max_length is None:
            return self._run(sentences, batch_size, nbest, explain, ablate, confidence)
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise SeqlabError(f"--max-length: expected a positive integer, got {max_length!r}")
        cuts = [cut_points(s.tokens, max_length) for s in sentences]
        pieces = [p for s, c in zip(sentences, cuts) for p in (split_sentence(s, c) if c else [s])]
        try:
            piece_rows = iter(self._run(pieces, batch_size, nbest, explain, ablate, confidence))
        except OverBudget as err:  # name the sentence of the call, not the piece
            if err.index is not None:
                err.index = [k for k, c in enumerate(cuts) for _ in range(len(c) + 1)][err.index]
            raise
        rows = []
        for s, c in zip(sentences, cuts):
            if not c:
                rows.append(next(piece_rows))
                continue
            log.warning("%s:%d: sentence of %d tokens split at %s for tagging (max length %d)",
                        s.source, s.line, len(s.tokens), ", ".join(map(str, c)), max_length)
            joined = _Row(split_at=c)
            for offset in [0, *c]:
                piece = next(piece_rows)
                joined.tags += piece.tags
                joined.confidence_kind = piece.confidence_kind
                if piece.token_conf is not None:
                    joined.token_conf = (joined.token_conf or []) + piece.token_conf
                    joined.span_conf = {**(joined.span_conf or {}),
                                        **{(a + offset, b + offset): p for (a, b), p in piece.span_conf.items()}}
            rows.append(joined)
        return rows

    def predict_tags(self, sentences: Sequence[Sentence], batch_size: int | None = None,
                     ablate: Collection[str] = (), max_length: int | None = None) -> list[list[str]]:
        """Predicted labels in the input's tag scheme."""
        return [self._labels(r) for r in self._run_capped(sentences, max_length, batch_size, ablate=ablate)]

    def _labels(self, row: _Row) -> list[str]:
        """A row's tags in the input's scheme (converted with its batch where it was tagged whole)."""
        return row.labels if row.labels is not None else self.to_labels(row.tags)

    def predict(self, inputs, batch_size: int | None = None, nbest: int | None = None,
                explain: bool = False, max_length: int | None = None, confidence: bool = False) -> list[Prediction]:
        """Tag raw strings (cut by the model's tokenizer, :func:`seqlab.data.tokenization.model_tokenizer`: whitespace,
        one char per token for character models; a span's text is its characters in the string), token lists or
        :class:`Sentence` objects. Returns one :class:`Prediction` per input with tags and spans, and the
        n best tag sequences, the attention layers' explanations and the probabilities of the predicted spans and
        tags (``confidence``) when asked for. With ``max_length``, longer sentences are tagged in pieces and say
        so in ``split_at``."""
        sentences = self._as_sentences(inputs)
        rows = self._run_capped(sentences, max_length, batch_size, nbest or 0, explain, confidence=confidence)
        joiner = "" if self.config.data.format == "bmes" else " "
        preds = []
        for s, r in zip(sentences, rows):
            tags = self._labels(r)
            at, text = s.extra.get("offsets"), s.extra.get("text")  # raw text: a span is its characters
            spans = [] if self.scheme == "none" else [
                Span(typ, a, b, text[at[a][0]:at[b - 1][1]] if at else joiner.join(s.tokens[a:b]),
                     None if r.span_conf is None else r.span_conf.get((a, b)))
                for typ, a, b in get_spans(tags, self.scheme)]
            paths = None if r.nbest is None else [ScoredTags(self.to_labels(p.tags), p.score) for p in r.nbest]
            preds.append(Prediction(s.tokens, tags, spans, paths, r.explanation, r.split_at, r.token_conf,
                                    r.confidence_kind))
        return preds

    def set_engine(self, name: str) -> None:
        """Run the encoding on ``torch`` (eager, the default), ``onnxruntime`` (exported in memory and
        checked against the eager network first; see :mod:`seqlab.runtime.engine`) or ``auto`` (onnxruntime for
        batches of up to :data:`seqlab.runtime.engine.AUTO_ROWS` sentences, torch for larger ones, torch alone where
        onnxruntime cannot run the model) for the following predictions."""
        from seqlab.runtime.engine import make_engine
        self.engine = make_engine(name, self)
        self.engine_name = name

    def set_beam(self, beam: int) -> None:
        """Beam size of a beam-search decoder (1 = greedy) for the following predictions."""
        if not hasattr(self.net.decoder, "beam"):
            raise SeqlabError(f"--beam: this model's decoder ({self.config.model.decoder.type}) has no beam search")
        if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
            raise SeqlabError(f"--beam: expected a positive integer, got {beam!r}")
        self.net.decoder.beam = beam

    def set_temperature(self, temperature: float) -> None:
        """Divide the decoder's scores by ``temperature`` for confidences and marginals (never for the
        tags); kept in the config, so :meth:`save` keeps it. ``seqlab calibrate`` fits it."""
        decoder = self.config.model.decoder
        if not isinstance(decoder, ProbabilisticDecoderConfig):
            raise SeqlabError(f"this model's decoder ({decoder.type}) has no probabilities to calibrate")
        decoder = type(decoder).model_validate({**decoder.model_dump(), "temperature": temperature})
        model = self.config.model.model_copy(update={"decoder": decoder})
        self.config = self.config.model_copy(update={"model": model})
        self.net.decoder.temperature = decoder.temperature

    # ----- evaluation --------------------------------------------------------------------------
    def unseen_labels(self, sentences: Sequence[Sentence]) -> Counter:
        """Gold labels (in the input scheme) that the model cannot predict, with their counts."""
        known = self.tags.stoi
        return Counter(s.labels[k] for s in sentences for k, t in enumerate(self.to_train_scheme(s.labels))
                       if t not in known)

    def evaluate(self, sentences: Sequence[Sentence], batch_size: int | None = None,
                 unseen: Literal["warn", "error", "score"] = "warn", ablate: Collection[str] = ()) -> Evaluation:
        """Scores against the sentences' gold labels (conlleval span F1, or token accuracy for plain
        labels) and the predictions. A gold label unseen in training is scored as conlleval does (a chunk
        the model always misses) with a warning ("warn"), silently ("score"), or is an error naming its
        file and line ("error")."""
        if not sentences:
            raise SeqlabError("no sentences to evaluate")
        check_labels(sentences, self.scheme)
        if unseen == "error":
            for s in sentences:
                self._tag_ids(s)  # the first unseen label -> error naming file and line
        elif unseen == "warn":
            missing = self.unseen_labels(sentences)
            if missing:
                log.warning("labels unseen in training, scored as misses: %s", dict(missing))
        pred = self.predict_tags(sentences, batch_size, ablate)
        gold = [s.labels for s in sentences]
        if self.scheme == "none":
            return Evaluation(token_scores(gold, pred), pred)
        return Evaluation(span_f1(gold, pred, scheme=self.scheme), pred)

    # ----- files -------------------------------------------------------------------------------
    def _files(self) -> dict[str, bytes]:
        from safetensors.torch import save as st_save
        state = {k: v.detach().contiguous().cpu() for k, v in self.net.state_dict().items()}
        meta = {"seqlab_version": __version__, "format_version": FORMAT_VERSION, "scheme": self.scheme,
                "config": self.config.model_dump(mode="json")}
        vocab = {"features": {name: f.state() for name, f in self.featurizers.items()}, "tags": self.tags.itos}
        return {"config.json": json.dumps(meta, indent=2).encode(),
                "vocab.json": json.dumps(vocab, ensure_ascii=False).encode(),
                "model.safetensors": st_save(state)}

    @staticmethod
    def check_save_target(path: str | Path) -> None:
        """Refuse, before any work, a place :meth:`save` must not write: a file or a folder of another kind than
        the model it would replace (a folder without the model files, a file that is not a model archive), or
        one that cannot be written. One-line SeqlabErrors naming ``path``."""
        path = Path(path)
        if path.suffix == ".zip":
            check_writable(path)
            if path.exists() and not _is_model_archive(path):
                raise SeqlabError("is a file but not a seqlab model archive: refusing to replace it", path=path)
        else:
            check_folder_kind(path, NAMES)
            check_writable(path, folder=True)

    def save(self, path: str | Path) -> None:
        """Write a model folder (or a ``.zip`` archive) atomically; what is at ``path`` is replaced only if it is
        a model too (:meth:`check_save_target`)."""
        path = Path(path)
        self.check_save_target(path)
        files = self._files()
        if path.suffix == ".zip":
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for name, data in files.items():
                    zf.writestr(name, data)
            atomic_write_bytes(path, buf.getvalue())
            return

        def fill(tmp: Path) -> None:
            for name, data in files.items():
                (tmp / name).write_bytes(data)
        atomic_write_dir(path, fill, NAMES)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu", engine: str = "torch") -> "Tagger":
        """Load a model folder or ``.zip`` archive, or a named model (``"en-ner"``: :mod:`seqlab.tagging.named_models`),
        onto ``device`` (cpu, cuda or auto), its encoding run by ``engine`` (see :meth:`set_engine`). Everything
        read is validated; only JSON and safetensors are read: nothing is unpickled. A folder left mid-swap by a killed writer (``calibrate``, ``train``) is put back
        first (:func:`seqlab.io.files.recover_dir`)."""
        path = resolve_model(path)  # a model name -> its folder (seqlab.tagging.named_models); a path as it is
        note = recover_dir(path)
        if note:
            log.warning(note)
        files = read_model_files(path)
        m = parse_model_files(files, path, with_weights=False)
        featurizers = {name: fc.build(name) for name, fc in m.config.model.embedder.features.items()}
        for name, f in featurizers.items():
            if name not in m.features:
                raise SeqlabError(f"vocab.json: no state for feature '{name}'", path=path)
            f.load_state(m.features[name], f"{path}/vocab.json: features.{name}")
        tags = Vocab.from_list(m.tags)
        tag_set = TagSet(tags.itos, training_scheme(m.scheme, m.config.data.train_scheme))

        def build() -> TaggerNet:
            return TaggerNet(m.config.model, featurizers, tag_set)
        # the config's parameter bytes, then the weights file against the shapes, before a tensor is made or read
        m.weights = read_weights(files, path, parameter_shapes(build), m.format_version)
        net = build()
        expected = net.state_dict()
        for name, tensor in m.weights.items():
            if name in expected and tensor.dtype != expected[name].dtype:
                raise SeqlabError(f"model.safetensors: tensor '{name}' is {tensor.dtype}, the model needs "
                                  f"{expected[name].dtype}", path=path)
        try:
            net.load_state_dict(m.weights, strict=True)
        except RuntimeError as err:
            raise SeqlabError(f"model.safetensors does not fit the config: {str(err).splitlines()[0]} "
                              f"{' '.join(str(err).split())[:300]}", path=path) from None
        net.eval()
        tagger = cls(m.config, featurizers, tags, m.scheme, net, device)
        if engine != "torch":
            tagger.set_engine(engine)
        return tagger

    def info(self) -> dict:
        params = sum(p.numel() for p in self.net.parameters())
        vocab_sizes = {name: len(f.vocab) for name, f in self.featurizers.items() if hasattr(f, "vocab")}
        return {"seqlab_version": __version__, "task": self.config.task, "scheme": self.scheme,
                "train_scheme": self.train_scheme, "labels": self.tags.itos,
                "features": {name: f.config.type for name, f in self.featurizers.items()},
                "vocabulary_sizes": vocab_sizes, "parameters": params,
                "encoders": [e.type for e in self.config.model.encoders],
                "decoder": self.config.model.decoder.type,
                "temperature": getattr(self.config.model.decoder, "temperature", None),  # of its confidences
                "device": str(self.device),
                "engine": self.engine_name,  # as asked for; "encoding": what runs it
                "encoding": "torch" if self.engine is None else "onnxruntime" if self.engine.max_rows is None
                else f"onnxruntime for batches of up to {self.engine.max_rows} sentences, torch for larger ones"}


def _is_model_archive(path: Path) -> bool:
    """Whether ``path`` is a ``.zip`` holding a model's files (only the names are read)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return set(NAMES) <= set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _explain(published: dict[str, torch.Tensor], row: int, n: int, num_layers: int) -> list[LayerExplanation]:
    """Per encoder layer that published attention (and a gate), this sentence's slice."""
    out = []
    for i in range(num_layers):
        attention = published.get(f"encoders.{i}.attention")
        if attention is None:
            continue
        gate = published.get(f"encoders.{i}.gate")
        heads = None
        if attention.dim() == 4:  # (batch, heads, n, n)
            heads = attention[row, :, :n, :n]
            attention = attention.mean(1)
        out.append(LayerExplanation(i, attention[row, :n, :n].tolist(),
                                    None if gate is None else gate[row, :n].mean(-1).tolist(),
                                    None if heads is None else heads.tolist()))
    return out


__all__ = ["Tagger", "Prediction", "Span", "ScoredTags", "LayerExplanation", "Evaluation", "PAD", "UNK"]
