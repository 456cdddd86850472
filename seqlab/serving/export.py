"""Exported models: the network as ONNX (run by onnxruntime) or TorchScript, with the decoding step in NumPy.

``seqlab export MODEL --format onnx --out model.onnx`` (or ``--format torchscript --out model.pt``) writes the
network from the featurizers' tensors to the tag scores: embedder, encoder layers and the decoder's
projection. Its inputs are the batch's tensors, named ``mask``, ``lengths`` and ``<feature>.<tensor>`` (e.g.
``word.ids``, ``char.chars``, ``char.rows``), with every length dynamic; its outputs are ``emissions``
(batch, seq_len, num_tags) and, for a CRF, the ``transitions`` (from, to), ``start`` and ``end`` scores with
the tag-scheme constraints already added. The decoding step (documented here, run by :class:`OnnxTagger`
and :class:`TorchScriptTagger`): a CRF takes the Viterbi path of emissions + transitions + start / end scores
over each sentence's real tokens; a softmax decoder takes the arg-max per token. The loop over time stays
outside the graph, where NumPy runs it.

A TorchScript file is a traced graph (``torch.jit.trace``): it takes the inputs positionally, in the order
its extra file ``seqlab.json`` lists (``{"inputs": [...], "outputs": [...]}``), and runs in LibTorch (C++)
without Python. Loading one (``torch.jit.load``) reads TorchScript's own archive format, not seqlab's
JSON + safetensors model files: load only exports you made or trust. PyTorch marks ``torch.jit`` as
deprecated (in favour of ``torch.export``) but still ships it; this export is for LibTorch deployments.

FLAT exports with distance tables of a fixed size (sentences up to ``MAX_SPAN`` characters) and R made in
one piece, (batch, L, L, d_model) floats: tag long sentences in small batches.

Text still needs the model folder's featurizers (vocabularies, lexicon) to become tensors, so an exported
model is used with its model folder: ``OnnxTagger(model_dir, "model.onnx").predict_tags(sentences)``. Only
the CRF and softmax decoders export (GCDT's beam search over a recurrent decoder does not).
"""

from __future__ import annotations

import importlib.util
import io
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from seqlab.crf.viterbi import viterbi
from seqlab.data.batching import make_batches
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.io.files import atomic_write_bytes
from seqlab.runtime.devices import threads_for
from seqlab.runtime.tracing import EncoderNet, traceable
from seqlab.tagger import Tagger


class EmissionNet(EncoderNet):
    """TaggerNet without the decoding loop: (mask, lengths, feature tensors...) -> emissions [+ CRF scores]."""

    def __init__(self, tagger: Tagger, names: list[tuple[str, str]]):
        super().__init__(tagger.net, names, [])
        decoder = tagger.net.decoder
        if not hasattr(decoder, "proj"):
            raise SeqlabError(
                f"export: the {type(decoder).__name__} does not export (only the CRF and softmax decoders do)"
            )
        self.crf = getattr(decoder, "crf", None)

    def forward(self, mask: Tensor, lengths: Tensor, *tensors: Tensor):
        x = super().forward(mask, lengths, *tensors)[0]  # (batch, seq_len, dim)
        emissions = self.net.decoder.proj(x)  # (batch, seq_len, num_tags)
        if self.crf is None:
            return emissions
        trans, start, end = self.crf.potentials()
        return emissions, trans, start, end


def _sample_batch(tagger: Tagger):
    # made-up words: outside any vocabulary and any vectors, so no word gets a vectors-only row that the traced
    # graph (the trained table alone) cannot index
    sentences = [Sentence(["Qzxvq", "Wqzkx", "Xvqzw", "Zqwxv", "."]), Sentence(["Qzxwv", "Vwqzx"])]
    return make_batches(tagger.encode(sentences), tagger.featurizers, 8)[0]


def _trace_inputs(tagger: Tagger) -> tuple[EmissionNet, list[str], list[str], tuple[Tensor, ...]]:
    """(the wrapper in eval mode, input names, output names, a sample batch's tensors in input order)."""
    batch = _sample_batch(tagger)
    names = [(f, n) for f, tensors in batch.features.items() for n in tensors]
    wrapper = EmissionNet(tagger, names).eval()
    input_names = ["mask", "lengths"] + [f"{f}.{n}" for f, n in names]
    output_names = ["emissions"] + (["transitions", "start", "end"] if wrapper.crf is not None else [])
    args = (batch.mask, batch.lengths, *(batch.features[f][n] for f, n in names))
    return wrapper, input_names, output_names, args


def export_onnx(model: str | Path, out: str | Path) -> Path:
    """Write the ONNX graph of ``model``'s network to ``out`` (atomically)."""
    if importlib.util.find_spec("onnx") is None:
        raise SeqlabError("export needs onnx and onnxruntime: pip install 'seqlab[export]'")
    tagger = Tagger.load(model)
    wrapper, input_names, output_names, args = _trace_inputs(tagger)
    dynamic = {name: {i: f"{name}_d{i}" for i in range(t.dim())} for name, t in zip(input_names, args)}
    dynamic["emissions"] = {0: "batch", 1: "seq_len"}
    buf = io.BytesIO()
    with traceable(tagger):
        torch.onnx.export(
            wrapper,
            args,
            buf,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic,
            opset_version=17,
            dynamo=False,
        )
    out = Path(out)
    atomic_write_bytes(out, buf.getvalue())
    return out


def export_torchscript(model: str | Path, out: str | Path) -> Path:
    """Write ``model``'s network as a traced TorchScript module to ``out`` (atomically), with its input
    and output names in the extra file ``seqlab.json``."""
    tagger = Tagger.load(model)
    wrapper, input_names, output_names, args = _trace_inputs(tagger)
    with traceable(tagger):
        traced = torch.jit.trace(wrapper, args, check_trace=False)  # checked against eager by the tests
    buf = io.BytesIO()
    meta = json.dumps({"inputs": input_names, "outputs": output_names})
    torch.jit.save(traced, buf, _extra_files={"seqlab.json": meta})
    out = Path(out)
    atomic_write_bytes(out, buf.getvalue())
    return out


EXPORTERS = {"onnx": export_onnx, "torchscript": export_torchscript}


class ExportedTagger:
    """A model folder's featurizers + an exported network + NumPy decoding; subclasses run the network."""

    inputs: list[str]

    def __init__(self, model: str | Path):
        self.tagger = Tagger.load(model)
        for f in self.tagger.featurizers.values():  # the exported graph has the trained word table only
            if getattr(f, "open_vocabulary", False):
                f.open_vocabulary = False

    def _emissions(self, feed: dict[str, Tensor]) -> list:
        """The exported network's outputs, as NumPy arrays: emissions [, transitions, start, end]."""
        raise NotImplementedError

    def predict_tags(self, sentences: Sequence[Sentence], batch_size: int = 64) -> list[list[str]]:
        t = self.tagger
        encoded = t.encode(sentences)
        rows: list[list[int]] = [[] for _ in encoded]
        nonempty = [i for i, e in enumerate(encoded) if e.length]
        for batch in make_batches([encoded[i] for i in nonempty], t.featurizers, batch_size):
            core = {"mask": batch.mask, "lengths": batch.lengths}
            feed = {}
            for name in self.inputs:  # an ONNX graph keeps only the inputs it uses
                feature, _, tensor = name.partition(".")
                feed[name] = core[name] if name in core else batch.features[feature][tensor]
            outputs = self._emissions(feed)
            emissions, lengths = outputs[0], batch.lengths.numpy()  # (batch, seq_len, tags), (batch,)
            best = (
                viterbi(emissions, lengths, *outputs[1:4])[0] if len(outputs) == 4 else emissions.argmax(-1)
            ).tolist()  # (batch, seq_len)
            for row, j in enumerate(batch.index):
                rows[nonempty[j]] = best[row][: lengths[row]]
        return [t.to_labels(r) for r in rows]


class TorchScriptTagger(ExportedTagger):
    """An exported TorchScript module run by ``torch.jit`` (the decoding step in NumPy)."""

    def __init__(self, model: str | Path, script_file: str | Path):
        super().__init__(model)
        extra = {"seqlab.json": ""}
        try:
            self.module = torch.jit.load(str(script_file), map_location="cpu", _extra_files=extra)
            self.inputs = list(json.loads(extra["seqlab.json"])["inputs"])
        except Exception as err:  # torch.jit raises RuntimeError and others; json its own
            first = (str(err).splitlines() or [type(err).__name__])[0][:200]
            raise SeqlabError(f"not a seqlab TorchScript export: {first}", path=script_file) from None
        self.module.eval()

    @torch.inference_mode()
    def _emissions(self, feed: dict[str, Tensor]) -> list:
        with threads_for(feed["mask"].shape[0], torch.device("cpu")):  # the eager model's thread policy
            out = self.module(*(feed[name] for name in self.inputs))
        return [x.numpy() for x in (out if isinstance(out, tuple) else (out,))]


class OnnxTagger(ExportedTagger):
    """An exported ONNX network on onnxruntime (the decoding step in NumPy)."""

    def __init__(self, model: str | Path, onnx_file: str | Path, threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise SeqlabError("running an exported model needs onnxruntime: pip install onnxruntime") from None
        super().__init__(model)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own types
            raise SeqlabError(f"not a loadable ONNX model: {str(err).splitlines()[0][:200]}", path=onnx_file) from None
        self.inputs = [i.name for i in self.session.get_inputs()]

    def _emissions(self, feed: dict[str, Tensor]) -> list:
        return self.session.run(None, {name: t.numpy() for name, t in feed.items()})
