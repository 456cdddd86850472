"""Inference engines: which runtime computes a tagger's encoding (embedder and encoder layers).

``torch`` (the default) runs the network eagerly. ``onnxruntime`` exports the embedder and encoder
layers to an ONNX graph in memory when the engine is chosen (a second or two; nothing is written to
disk) and runs that graph in onnxruntime; the decoder (CRF Viterbi and n-best, softmax, GCDT's beam
search) and everything around it (tokenizing, confidences, spans) stay in PyTorch, so a prediction
has the same fields on either engine. Its gain is the per-operation overhead of eager PyTorch, which
dominates small batches (about 2x at batch 1 on 2 cores), and at batch 64 it was 1.1-1.3x faster too.

Before the engine is used, the graph is checked against the eager network on sentences of several
lengths: a model whose encoding does not export faithfully (e.g. a Python loop over time steps, which
tracing unrolls to the sample's length) is refused with one error line, never run with wrong results.
Test-time ablation is an analysis of the eager network and is not available on onnxruntime.

Memory: where the eager network works through pairwise tensors in blocks (PSA's additive scores, FLAT's
relative-position scores), the exported graph computes them in one piece, batch x length^2 x hidden floats.
Batches are therefore run in parts of at most :data:`PAIRWISE_BUDGET` such floats (predictions do not depend
on batch composition), and a sentence too long even alone is refused with a pointer to ``--max-length``
(without parts, FLAT on OntoNotes at batch 64 grew past 22 GB and was killed). A batch that onnxruntime cannot
run is one error line, never a traceback.

``auto`` (the default of ``seqlab serve``) runs batches of at most :data:`AUTO_ROWS` sentences on
onnxruntime and larger ones eagerly, where each is faster; where onnxruntime is not installed, the model does
not export faithfully, or it has PSA's or FLAT's pairwise attention (which onnxruntime ran no faster: 1.06x and
0.66x at batch 1), it says why in one log line and runs everything eagerly. The two engines' encoder outputs
differ by float rounding (2.9e-6 at most on the chunker's test-set emissions, where eager batch 1 and
eager batch 64 differ by 2.4e-6), and a graph whose outputs differ by more than :data:`TOLERANCE` is refused.

    tagger = Tagger.load("runs/chunking/model")
    tagger.set_engine("onnxruntime")        # or: seqlab predict MODEL --engine onnxruntime
    tagger.set_engine("auto")               # onnxruntime for small batches, torch for large ones
"""

from __future__ import annotations

import importlib.util
import io
import logging
import warnings
from collections.abc import Collection

import torch
from torch import Tensor

from seqlab.data.batching import Batch, Encoded, collate, make_batches
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.nn.context import Context
from seqlab.nn.versions import weights_key
from seqlab.runtime.devices import SMALL_BATCH
from seqlab.runtime.tracing import EncoderNet, traceable

log = logging.getLogger("seqlab")

ENGINES = ("torch", "onnxruntime", "auto")

#: With ``auto``, batches of at most this many sentences run on onnxruntime, larger ones eagerly. Measured on
#: the CoNLL-2000 chunker (2 threads, 2026-11-25, ``predict_tags`` of 1,024 test sentences, onnxruntime against
#: eager): 1.53x at batch 1, 1.31x at 2, 1.21x at 4, 0.96x at 8, 0.86x at 32, 0.81x at 64 (its LSTM kernel).
AUTO_ROWS = 4

#: Floats of one (rows, length, length, hidden) tensor that the exported graph may make in one piece (256 MB):
#: larger batches are run in parts. A single sentence needing 8 times this is refused (``--max-length``).
PAIRWISE_BUDGET = 1 << 26

#: Largest difference between the exported graph's encoder output and the eager one's, relative to the
#: largest eager value, that the faithfulness check accepts (float rounding of a reordered sum is ~1e-6).
TOLERANCE = 1e-4


class EngineRunError(SeqlabError):
    """onnxruntime could not run a batch; ``reason`` is its own first line."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def _check_sentences(tagger) -> list[Sentence]:
    """Sentences of lengths 1 to 17 built from the model's own vocabularies (so that lexicon words match
    in a lattice model) and an out-of-vocabulary word."""
    words: list[str] = []
    for f in tagger.featurizers.values():
        vocab = getattr(f, "vocab", None)
        if vocab is not None:
            words += [w for w in vocab.itos[:60] if not (w.startswith("<") and w.endswith(">"))]
    words = (words or ["sample"]) + ["Zyxwvut"]
    return [Sentence([words[(i * 7 + k) % len(words)] for k in range(n)]) for i, n in enumerate((1, 4, 17, 9, 2))]


def refuse_off_cpu(device: torch.device) -> None:
    """onnxruntime runs the network on the CPU: a one-line error for a tagger on any other device."""
    if device.type != "cpu":
        raise SeqlabError(f"--engine onnxruntime runs on the CPU; the network is on {device}")


class OnnxEncoding:
    """A tagger's embedder and encoder layers as an onnxruntime session (one thread for batches of up to
    :data:`SMALL_BATCH` sentences, the process's PyTorch thread count for larger ones)."""

    def __init__(self, tagger, max_rows: int | None = None):
        self.max_rows = max_rows  # larger batches run eagerly (the auto engine); None: every batch runs here
        if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
            raise SeqlabError("--engine onnxruntime needs onnx and onnxruntime: pip install 'seqlab[export]'")
        refuse_off_cpu(tagger.device)
        tagger.net.eval()
        sample = make_batches(tagger.encode(_check_sentences(tagger)[:2]), tagger.featurizers, 8)[0]
        self.names = [(f, n) for f, tensors in sample.features.items() for n in tensors]
        with torch.no_grad():
            _, ctx = tagger.net.encode(sample)
        self.published = list(ctx.published)
        from seqlab.encoders.flat import RelativeSpanEncoding
        from seqlab.encoders.psa import PositionAwareAttention

        self.pairwise_dim = max(
            [m.d_model for m in tagger.net.modules() if isinstance(m, RelativeSpanEncoding)]
            + [m.w1.out_features for m in tagger.net.modules() if isinstance(m, PositionAwareAttention)],
            default=0,
        )
        if max_rows is not None and self.pairwise_dim:  # measured, batch 1: PSA 1.06x, FLAT 0.66x (BENCHMARKS.md)
            raise SeqlabError("onnxruntime is no faster on models with PSA's or FLAT's pairwise attention")
        wrapper = EncoderNet(tagger.net, self.names, self.published).eval()
        self.inputs = ["mask", "lengths"] + [f"{f}.{n}" for f, n in self.names]
        outputs = ["features"] + self.published
        args = (sample.mask, sample.lengths, *(sample.features[f][n] for f, n in self.names))
        dynamic = {name: {i: f"{name}_d{i}" for i in range(t.dim())} for name, t in zip(self.inputs, args)}
        buf = io.BytesIO()
        try:
            with traceable(tagger), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracer notes on Python branches: the check below decides
                torch.onnx.export(
                    wrapper,
                    args,
                    buf,
                    input_names=self.inputs,
                    output_names=outputs,
                    dynamic_axes=dynamic,
                    opset_version=17,
                    dynamo=False,
                )
        except Exception as err:  # the exporter raises many types for unsupported operations
            first = (str(err).splitlines() or [type(err).__name__])[0][:200]
            raise SeqlabError(f"--engine onnxruntime: this model does not export to ONNX: {first}") from None
        self.graph = buf.getvalue()
        self._sessions: dict[bool, object] = {}
        # word tables whose rows past the trained ones (words the vectors know, seqlab.features.words) the graph
        # has not: a batch with such ids runs eagerly
        from seqlab.features.words import WordEmbedding

        self._net = tagger.net
        self._tables = {
            name: m.embed.weight.shape[0]
            for name, m in tagger.net.embedder.named_children()
            if isinstance(m, WordEmbedding)
        }
        self._check(tagger)
        self.params = [*tagger.net.embedder.parameters(), *tagger.net.encoders.parameters()]  # the graph's
        self.weights = weights_key(self.params)  # what was exported; see :meth:`current`

    def current(self) -> bool:
        """Whether the network's weights are still the exported ones: an optimiser step, ``load_state_dict``
        or a weight changed in place makes the graph stale (:func:`seqlab.tagging.inference.run` then exports
        again). Parameters replaced as module attributes (``load_state_dict(assign=True)``) are not seen:
        choose the engine again after that."""
        return weights_key(self.params) == self.weights

    def takes(self, rows: int, ablate: Collection[str] = ()) -> bool:
        """Whether a batch of ``rows`` sentences runs here; under ``auto``, ablations run eagerly (they are an
        analysis of the eager network), under ``onnxruntime`` they are refused by :meth:`run`."""
        return self.max_rows is None or (rows <= self.max_rows and not ablate)

    def _session(self, small: bool):
        if small not in self._sessions:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1 if small else torch.get_num_threads()
            options.log_severity_level = 4  # its failures become SeqlabErrors; its warnings are not the user's
            # idle pool threads sleep instead of spinning: spinning ones took the core the decoder (Viterbi,
            # confidences) runs on next; batch 64 on 2 threads, 2,283 against 1,585 sentences/s
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._sessions[small] = ort.InferenceSession(self.graph, options, providers=["CPUExecutionProvider"])
        return self._sessions[small]

    def parts(self, batch: Batch, items: list[Encoded], featurizers) -> list[Batch]:
        """``batch``, or its rows re-collated in parts whose pairwise tensors fit :data:`PAIRWISE_BUDGET`
        (``items``: what ``batch.index`` points into). The length counts the tokens plus the longest other
        per-row tensor (a lattice's words), an upper bound for FLAT's lattice."""
        if not self.pairwise_dim:
            return [batch]
        rows, n = len(batch.index), batch.mask.shape[1]
        extra = max(
            (
                t.shape[1]
                for tensors in batch.features.values()
                for t in tensors.values()
                if t.dim() >= 2 and t.shape[0] == rows and t.shape[1] != n
            ),
            default=0,
        )
        per_row = (n + extra) ** 2 * self.pairwise_dim
        if per_row > 8 * PAIRWISE_BUDGET:
            raise SeqlabError(
                f"--engine onnxruntime: a sentence of {n} tokens needs {4 * per_row >> 20} MiB for "
                f"one attention tensor; tag with --max-length, or with --engine torch"
            )
        fit = max(1, PAIRWISE_BUDGET // per_row)
        if rows <= fit:
            return [batch]
        return [
            collate([items[i] for i in idx], idx, featurizers)
            for idx in (batch.index[k : k + fit] for k in range(0, rows, fit))
        ]

    def run(self, batch: Batch, ablate: Collection[str] = ()) -> tuple[Tensor, Tensor, Context]:
        """(encoder output (batch, seq_len, dim), the mask, a context with the batch and the published
        tensors): the arguments of ``TaggerNet.head``."""
        if ablate:
            raise SeqlabError("--ablate analyses the eager network: use --engine torch")
        if any(int(batch.features[name]["ids"].max()) >= rows for name, rows in self._tables.items()):
            x, ctx = self._net.encode(batch)  # words added from the vectors after training: eagerly
            return x, batch.mask, ctx
        session = self._session(len(batch.index) <= SMALL_BATCH)
        feed = {"mask": batch.mask.numpy(), "lengths": batch.lengths.numpy()}
        wanted = {i.name for i in session.get_inputs()}  # an ONNX graph keeps only the inputs it uses
        for (feature, name), key in zip(self.names, self.inputs[2:]):
            if key in wanted:
                feed[key] = batch.features[feature][name].numpy()
        feed = {k: v for k, v in feed.items() if k in wanted}
        try:
            out = [torch.from_numpy(a) for a in session.run(None, feed)]
        except Exception as err:  # onnxruntime's own types (out of memory, a shape the graph cannot take)
            reason = (str(err).splitlines() or [type(err).__name__])[0][:200]
            raise EngineRunError(
                f"--engine onnxruntime failed on a batch of {len(batch.index)} sentences of up "
                f"to {int(batch.lengths.max())} tokens ({reason}); try a smaller --batch-size, "
                f"--max-length, or --engine torch",
                reason,
            ) from None
        ctx = Context(batch.mask, batch.lengths, batch.features, dict(zip(self.published, out[1:])), "decoder.")
        return out[0], batch.mask, ctx

    def _check(self, tagger) -> None:
        """The graph's encoder output against the eager network's on batches of several lengths."""
        encoded = tagger.encode(_check_sentences(tagger))
        for size in (1, 5):
            for batch in make_batches(encoded, tagger.featurizers, size):
                with torch.no_grad():
                    expected, _ = tagger.net.encode(batch)
                try:
                    got = self.run(batch)[0]
                except EngineRunError as err:
                    raise SeqlabError(
                        f"--engine onnxruntime: this model's exported graph fails on a sentence of "
                        f"{int(batch.lengths.max())} tokens ({err.reason}); use --engine torch"
                    ) from None
                scale = float(expected.abs().max()) or 1.0
                if got.shape != expected.shape or float((got - expected).abs().max()) > TOLERANCE * scale:
                    raise SeqlabError(
                        "--engine onnxruntime: this model's exported graph does not compute what the "
                        "network computes (an operation that tracing cannot follow, such as a loop "
                        "over time steps); use --engine torch"
                    )


def make_engine(name: str, tagger) -> OnnxEncoding | None:
    """The encoding runner for ``name`` (None for eager PyTorch)."""
    if name not in ENGINES:
        raise SeqlabError(f"--engine: expected one of {', '.join(ENGINES)}, got '{name}'")
    if name == "torch":
        return None
    if name == "onnxruntime":
        return OnnxEncoding(tagger)
    try:
        engine = OnnxEncoding(tagger, max_rows=AUTO_ROWS)
    except SeqlabError as err:  # not installed, not on the CPU, pairwise attention, or not exported faithfully
        log.info("--engine auto: every batch runs on torch (%s)", str(err).removeprefix("--engine onnxruntime: "))
        return None
    log.info("--engine auto: batches of up to %d sentences run on onnxruntime, larger ones on torch", AUTO_ROWS)
    return engine


__all__ = ["AUTO_ROWS", "ENGINES", "OnnxEncoding", "make_engine"]
