"""The user-facing tagger: featurizers + network + tag-scheme handling, saved as JSON + safetensors.

    >>> tagger = Tagger.load("runs/chunking/model")
    >>> tagger.predict(["He reckons the current account deficit will narrow ."])[0].spans

:class:`Tagger` is the public API over the parts in :mod:`seqlab.tagging`, each doing one job: ``encoding``
(inputs to arrays), ``inference`` (batches, threads, the engine, the memory budget), ``long_sentences``,
``confidence``, ``explanations``, ``results`` (what a prediction holds), ``scoring`` (against gold labels),
``storage`` (the model folder) and ``network`` (the network itself).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from seqlab.config import ExperimentConfig
from seqlab.data.batching import Encoded
from seqlab.data.schemes import IndexConverter, convert
from seqlab.data.sentence import Sentence, link_neighbours
from seqlab.data.token_types import TokenTypes
from seqlab.data.vocab import PAD, UNK, Vocab
from seqlab.decoders.base import ProbabilisticDecoderConfig, TagSet
from seqlab.errors import SeqlabError
from seqlab.features.base import MEMO_TOKENS, Featurizer
from seqlab.runtime.cost import MEMORY_BUDGET, Budget, Cost, network_cost
from seqlab.runtime.devices import resolve_device
from seqlab.runtime.engine import make_engine
from seqlab.tagging import encoding, scoring, storage
from seqlab.tagging.encoding import training_scheme
from seqlab.tagging.explanations import LayerExplanation
from seqlab.tagging.long_sentences import run_capped
from seqlab.tagging.network import TaggerNet
from seqlab.tagging.results import Evaluation, Prediction, Row, ScoredTags, Span, prediction
from seqlab.version import __version__

#: Default :attr:`Tagger.pad_overhead`: what one more batch is taken to cost, in padded tokens. Measured on the
#: chunker (2026-11-24): 256 made server-like calls (64 random test sentences) 1.15x faster on onnxruntime and
#: 1.35x on torch, and left the length-sorted test set at batch 64 as fast as before; 64 cut sorted batches
#: that gain nothing from it (32 -> 37 batches) and slowed that 1.14x.
PAD_OVERHEAD = 256


class Tagger:
    """A trained (or freshly built) sequence tagger."""

    def __init__(
        self,
        config: ExperimentConfig,
        featurizers: dict[str, Featurizer],
        tags: Vocab,
        scheme: str,
        net: TaggerNet,
        device: str | torch.device = "cpu",
    ):
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
        # bytes one call's tensors may take (seqlab.runtime.cost): a sentence over it is refused, a batch over it runs
        # in parts
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
    def build(
        cls,
        config: ExperimentConfig,
        train: list[Sentence],
        scheme: str,
        other: Sequence[Sentence] = (),
        device: str | torch.device = "cpu",
    ) -> Tagger:
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
        return encoding.encode(self.featurizers, sentences, self._tag_ids if with_tags else None)

    def neighbours(self) -> int:
        """How many sentences on each side of a sentence its features read (a transformer with ``context``); 0:
        none, each sentence is tagged alone."""
        return max((f.neighbours() for f in self.featurizers.values()), default=0)

    def link(self, sentences: Sequence[Sentence]) -> None:
        """Link ``sentences``, given together and in order, to their neighbours (:func:`link_neighbours`) where a
        featurizer reads across sentences (a transformer with ``context``); otherwise nothing."""
        link_neighbours(sentences, self.neighbours())

    def columns(self) -> dict[str, int]:
        """The features that read columns of the input besides token and label, and how many each needs
        (:meth:`Featurizer.columns`): such a tagger tags column files only, never raw text."""
        return {name: n for name, f in self.featurizers.items() if (n := f.columns())}

    def _tag_ids(self, s: Sentence) -> np.ndarray:
        return encoding.tag_ids(s, self.to_train_scheme(s.labels), self.tags.stoi)

    # ----- inference ---------------------------------------------------------------------------
    def cost(self, nbest: int = 0, explain: bool = False) -> Cost:
        """What tagging costs in memory per position and per pair of positions (:mod:`seqlab.runtime.cost`) on this
        network and engine, with ``nbest`` paths and explanations or not."""
        engine = self.engine
        whole = 2 * engine.pairwise_dim if engine is not None and engine.max_rows is None else 0  # R and its sum
        key = (nbest, explain, whole)
        if key not in self._costs:
            chars = {
                name: f.config.max_len
                for name, f in self.featurizers.items()
                if isinstance(getattr(f.config, "max_len", None), int)
            }  # characters per token
            self._costs[key] = network_cost(self.net, chars, len(self.tags), nbest, explain, whole)
        return self._costs[key]

    def budget(self, nbest: int = 0, explain: bool = False) -> Budget:
        """The memory budget of a call (:attr:`memory_budget`), shared by the batches that run side by side."""
        threads = torch.get_num_threads() if self.device.type == "cpu" else 1
        return Budget(self.cost(nbest, explain), self.memory_budget, threads)

    def predict_tags(
        self,
        sentences: Sequence[Sentence],
        batch_size: int | None = None,
        ablate: Collection[str] = (),
        max_length: int | None = None,
        link: bool = True,
    ) -> list[list[str]]:
        """Predicted labels in the input's tag scheme; ``link`` as for :meth:`predict`."""
        rows = run_capped(self, sentences, max_length, batch_size, ablate=ablate, link=link)
        return [self._labels(r) for r in rows]

    def _labels(self, row: Row) -> list[str]:
        """A row's tags in the input's scheme (converted with its batch where it was tagged whole)."""
        return row.labels if row.labels is not None else self.to_labels(row.tags)

    def predict(
        self,
        inputs,
        batch_size: int | None = None,
        nbest: int | None = None,
        explain: bool = False,
        max_length: int | None = None,
        confidence: bool = False,
        link: bool = True,
    ) -> list[Prediction]:
        """Tag raw strings (cut by the model's tokenizer, :func:`seqlab.data.tokenization.model_tokenizer`: whitespace,
        one char per token for character models; a span's text is its characters in the string), token lists or
        :class:`Sentence` objects. Returns one :class:`Prediction` per input with tags and spans, and the
        n best tag sequences, the attention layers' explanations and the probabilities of the predicted spans and
        tags (``confidence``) when asked for. With ``max_length``, longer sentences are tagged in pieces and say
        so in ``split_at``. A model whose features read the sentences around each (a transformer's ``context``)
        reads the inputs as consecutive text; ``link=False`` keeps the neighbours that :class:`Sentence` inputs
        have (:meth:`link`)."""
        sentences = encoding.as_sentences(inputs, self.config.data)
        rows = run_capped(
            self, sentences, max_length, batch_size, nbest or 0, explain, confidence=confidence, link=link
        )
        return [
            prediction(s, r, self._labels(r), self.scheme, self.joiner, self.to_labels) for s, r in zip(sentences, rows)
        ]

    @property
    def joiner(self) -> str:
        """What joins a span's tokens into its text: nothing for character corpora (BMES), else a space."""
        return "" if self.config.data.format == "bmes" else " "

    def set_engine(self, name: str) -> None:
        """Run the encoding on ``torch`` (eager, the default), ``onnxruntime`` (exported in memory and
        checked against the eager network first; see :mod:`seqlab.runtime.engine`) or ``auto`` (onnxruntime for
        batches of up to :data:`seqlab.runtime.engine.AUTO_ROWS` sentences, torch for larger ones, torch alone where
        onnxruntime cannot run the model) for the following predictions."""
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
        return scoring.unseen_labels(self, sentences)

    def evaluate(
        self,
        sentences: Sequence[Sentence],
        batch_size: int | None = None,
        unseen: Literal["warn", "error", "score"] = "warn",
        ablate: Collection[str] = (),
    ) -> Evaluation:
        """Scores against the sentences' gold labels (conlleval span F1, or token accuracy for plain
        labels) and the predictions. A gold label unseen in training is scored as conlleval does (a chunk
        the model always misses) with a warning ("warn"), silently ("score"), or is an error naming its
        file and line ("error")."""
        return scoring.evaluate(self, sentences, batch_size, unseen, ablate)

    # ----- files -------------------------------------------------------------------------------
    @staticmethod
    def check_save_target(path: str | Path) -> None:
        """Refuse, before any work, a place :meth:`save` must not write: a file or a folder of another kind than
        the model it would replace (a folder without the model files, a file that is not a model archive), or
        one that cannot be written. One-line SeqlabErrors naming ``path``."""
        storage.check_save_target(path)

    def save(self, path: str | Path, weights_dtype: str = "float32", tensors: Collection[str] | None = None) -> None:
        """Write a model folder (or a ``.zip`` archive) atomically; what is at ``path`` is replaced only if it is
        a model too (:meth:`check_save_target`). ``weights_dtype`` float16 (or bfloat16) stores the float32
        weights named in ``tensors`` (the network's state dict names; None: all) in half precision, half their
        bytes; :meth:`load` reads them back as float32. Check the tags it predicts before shipping it."""
        storage.save(self, path, weights_dtype, tensors)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu", engine: str = "torch") -> Tagger:
        """Load a model folder or ``.zip`` archive, or a named model (``"en-ner"``: :mod:`seqlab.tagging.named_models`),
        onto ``device`` (cpu, cuda or auto), its encoding run by ``engine`` (see :meth:`set_engine`). Everything
        read is validated; only JSON and safetensors are read: nothing is unpickled. A folder left mid-swap by a killed
        writer (``calibrate``, ``train``) is put back first (:func:`seqlab.io.files.recover_dir`)."""
        tagger = cls(*storage.load(path), device)
        if engine != "torch":
            tagger.set_engine(engine)
        return tagger

    def info(self) -> dict:
        params = sum(p.numel() for p in self.net.parameters())
        vocab_sizes = {name: len(f.vocab) for name, f in self.featurizers.items() if hasattr(f, "vocab")}
        return {
            "seqlab_version": __version__,
            "task": self.config.task,
            "scheme": self.scheme,
            "train_scheme": self.train_scheme,
            "labels": self.tags.itos,
            "features": {name: f.config.type for name, f in self.featurizers.items()},
            "vocabulary_sizes": vocab_sizes,
            "parameters": params,
            "encoders": [e.type for e in self.config.model.encoders],
            "decoder": self.config.model.decoder.type,
            "temperature": getattr(self.config.model.decoder, "temperature", None),  # of its confidences
            "device": str(self.device),
            "engine": self.engine_name,  # as asked for; "encoding": what runs it
            "encoding": "torch"
            if self.engine is None
            else "onnxruntime"
            if self.engine.max_rows is None
            else f"onnxruntime for batches of up to {self.engine.max_rows} sentences, torch for larger ones",
        }


__all__ = ["PAD", "UNK", "Evaluation", "LayerExplanation", "Prediction", "ScoredTags", "Span", "Tagger"]
