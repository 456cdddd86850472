"""The user-facing tagger: vocabularies + network + tag-scheme handling, saved as JSON + safetensors.

    >>> tagger = Tagger.load("runs/chunking/model")
    >>> tagger.predict(["He reckons the current account deficit will narrow ."])[0].spans
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from seqlab import __version__
from seqlab.config import ExperimentConfig, config_from_dict
from seqlab.data.batching import Encoded, Encoder, make_batches
from seqlab.data.readers import read_raw
from seqlab.data.schemes import IndexConverter, allowed_transitions, convert, get_spans
from seqlab.data.sentence import Sentence
from seqlab.data.vocab import PAD, UNK, Vocab, normalize_word
from seqlab.errors import SeqlabError
from seqlab.io import atomic_write_bytes, atomic_write_dir
from seqlab.metrics import Scores, span_f1, token_accuracy
from seqlab.model import TaggerNet
from seqlab.vectors import load_vectors

FORMAT_VERSION = 1


@dataclass
class Span:
    type: str
    start: int  # first token
    end: int  # one past the last token
    text: str


@dataclass
class Prediction:
    tokens: list[str]
    tags: list[str]
    spans: list[Span]
    nbest: list[tuple[list[str], float]] | None = None
    explanation: list[dict] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        return asdict(self)


def training_scheme(scheme: str, requested: str) -> str:
    """The scheme the model is trained in, given the files' scheme and ``data.train_scheme``."""
    if scheme == "none" or requested == "same":
        return scheme
    if scheme == "BMES" and requested == "BIOES":
        return "BMES"  # the same structure; keep the corpus's own letters
    return requested


class Tagger:
    """A trained (or freshly built) sequence tagger."""

    def __init__(self, config: ExperimentConfig, words: Vocab, chars: Vocab, tags: Vocab, scheme: str,
                 net: TaggerNet):
        self.config, self.words, self.chars, self.tags, self.scheme, self.net = config, words, chars, tags, scheme, net
        w = config.model.embedder.word
        self.encoder = Encoder(words, chars, tags, w.lowercase, w.replace_digits)
        self.to_labels = IndexConverter(tags.itos, self.train_scheme, scheme)  # indices -> input-scheme labels

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
              other: list[Sentence] = ()) -> "Tagger":
        """Vocabularies from ``train`` (plus pre-trained words seen in ``other``), vectors, network."""
        w = config.model.embedder.word
        norm = lambda t: normalize_word(t, w.lowercase, w.replace_digits)  # noqa: E731
        counts = Counter(norm(t) for s in train for t in s.tokens)
        vectors, extra = {}, []
        if w.pretrained:
            wanted = set(counts) | {norm(t) for s in other for t in s.tokens}
            vectors, dim = load_vectors(w.pretrained, wanted)
            if dim != w.dim:
                raise SeqlabError(f"word vectors have {dim} dimensions but model.embedder.word.dim is {w.dim}",
                                  key="model.embedder.word.dim")
            extra = sorted(t for t in wanted - set(counts) if t in vectors)  # dev/test words with vectors
        words = Vocab.from_counts(counts, w.min_count, extra=extra)
        chars = Vocab.from_counts(Counter(c for s in train for t in s.tokens for c in t))
        ts = training_scheme(scheme, config.data.train_scheme)
        tag_counts = Counter(t for s in train for t in (s.labels if ts == scheme else convert(s.labels, scheme, ts)))
        tags = Vocab(sorted(tag_counts), specials=())
        pretrained = None
        if vectors:
            # unseen words: uniform(-sqrt(3/dim), sqrt(3/dim)) as Ma and Hovy; found words: their vector
            rng = np.random.default_rng(config.train.seed)
            scale = np.sqrt(3.0 / w.dim)
            table = rng.uniform(-scale, scale, (len(words), w.dim)).astype(np.float32)
            table[0] = 0.0
            for i, word in enumerate(words.itos):
                if word in vectors:
                    table[i] = vectors[word]
            pretrained = torch.from_numpy(table)
        net = TaggerNet(config.model, len(words), len(chars), len(tags), pretrained,
                        cls._constraints(tags, ts))
        return cls(config, words, chars, tags, scheme, net)

    @staticmethod
    def _constraints(tags: Vocab, scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        if scheme == "none":
            return None
        allowed, start, end = allowed_transitions(tags.itos, scheme)
        return torch.tensor(allowed), torch.tensor(start), torch.tensor(end)

    # ----- encoding ----------------------------------------------------------------------------
    def encode(self, sentences: list[Sentence], with_tags: bool) -> list[Encoded]:
        out = []
        for s in sentences:
            tags = None
            if with_tags:
                tags = self.to_train_scheme(s.labels)
                for k, t in enumerate(tags):
                    if t not in self.tags.stoi:
                        raise SeqlabError(f"label '{s.labels[k]}' was not seen in training",
                                          path=s.source, line=s.line + k)
            out.append(self.encoder.encode(s, tags))
        return out

    # ----- inference ---------------------------------------------------------------------------
    def _as_sentences(self, inputs) -> list[Sentence]:
        chars = self.config.data.format == "bmes"
        if isinstance(inputs, (str, Sentence)):
            inputs = [inputs]
        out = []
        for item in inputs:
            if isinstance(item, Sentence):
                out.append(item)
            elif isinstance(item, str):
                out.extend(read_raw([item], chars=chars) or [Sentence([])])
            else:
                out.append(Sentence(list(item)))
        return out

    @torch.inference_mode()
    def tag_indices(self, encoded: list[Encoded], batch_size: int | None = None) -> list[list[int]]:
        """Best tag indices (training scheme) for each encoded sentence, in input order."""
        self.net.eval()
        result: list[list[int]] = [[] for _ in encoded]
        nonempty = [i for i, e in enumerate(encoded) if len(e.words)]
        items = [encoded[i] for i in nonempty]
        for batch in make_batches(items, batch_size or self.config.train.eval_batch_size):
            best = self.net.decode(batch).tolist()
            lengths = batch.mask.sum(1).tolist()
            for row, j in enumerate(batch.index):
                result[nonempty[j]] = best[row][: lengths[row]]
        return result

    def predict_tags(self, sentences: list[Sentence], batch_size: int | None = None) -> list[list[str]]:
        """Predicted labels in the input's tag scheme."""
        encoded = self.encode(sentences, with_tags=False)
        return [self.to_labels(idx) for idx in self.tag_indices(encoded, batch_size)]

    def predict(self, inputs, batch_size: int | None = None, nbest: int | None = None,
                explain: bool = False) -> list[Prediction]:
        """Tag raw strings (whitespace-tokenized; one char per token for character models), token lists or
        :class:`Sentence` objects. Returns one :class:`Prediction` per input with tags and spans."""
        sentences = self._as_sentences(inputs)
        tags = self.predict_tags(sentences, batch_size)
        preds = []
        for s, t in zip(sentences, tags):
            spans = [] if self.scheme == "none" else [
                Span(typ, a, b, (" " if self.config.data.format != "bmes" else "").join(s.tokens[a:b]))
                for typ, a, b in get_spans(t, self.scheme)]
            preds.append(Prediction(s.tokens, t, spans))
        if nbest:
            self._add_nbest(sentences, preds, nbest)
        if explain:
            self._add_explanations(sentences, preds)
        return preds

    @torch.inference_mode()
    def _add_nbest(self, sentences: list[Sentence], preds: list[Prediction], k: int) -> None:
        self.net.eval()
        encoded = self.encode(sentences, with_tags=False)
        idx = [i for i, e in enumerate(encoded) if len(e.words)]
        for batch in make_batches([encoded[i] for i in idx], self.config.train.eval_batch_size):
            lists = self.net.decoder.nbest(self.net.features(batch), batch.mask, k)
            for row, j in enumerate(batch.index):
                preds[idx[j]].nbest = [(self.to_labels(tags), score)
                                       for tags, score in lists[row]]

    @torch.inference_mode()
    def _add_explanations(self, sentences: list[Sentence], preds: list[Prediction]) -> None:
        self.net.eval()
        encoded = self.encode(sentences, with_tags=False)
        idx = [i for i, e in enumerate(encoded) if len(e.words)]
        for batch in make_batches([encoded[i] for i in idx], self.config.train.eval_batch_size):
            _, info = self.net.explain(batch)
            lengths = batch.mask.sum(1).tolist()
            for row, j in enumerate(batch.index):
                n = lengths[row]
                layers = []
                for k, details in enumerate(info):
                    if not details:
                        continue
                    entry = {"layer": k}
                    if "attention" in details:
                        entry["attention"] = details["attention"][row, :n, :n].tolist()
                    if "gate" in details:
                        entry["gate_mean"] = details["gate"][row, :n].mean(-1).tolist()
                    layers.append(entry)
                preds[idx[j]].explanation = layers

    # ----- evaluation --------------------------------------------------------------------------
    def unseen_labels(self, sentences: list[Sentence]) -> Counter:
        """Gold labels (in the input scheme) that the model cannot predict, with their counts."""
        known = set(self.tags.itos)
        return Counter(s.labels[k] for s in sentences for k, t in enumerate(self.to_train_scheme(s.labels))
                       if t not in known)

    def evaluate(self, sentences: list[Sentence], batch_size: int | None = None,
                 allow_unseen_labels: bool = False) -> tuple[Scores, list[list[str]]]:
        """Scores against the sentences' gold labels (conlleval span F1 or token accuracy) and predictions.

        A gold label unseen in training is an error naming its file and line, unless
        ``allow_unseen_labels``: then it is scored as conlleval does (a chunk the model always misses)."""
        if not sentences:
            raise SeqlabError("no sentences to evaluate")
        if not allow_unseen_labels:
            self.encode(sentences, with_tags=True)  # unseen labels -> error naming file and line
        pred = self.predict_tags(sentences, batch_size)
        gold = [s.labels for s in sentences]
        if self.scheme == "none":
            tokens = sum(len(g) for g in gold)
            return Scores(0.0, 0.0, 0.0, token_accuracy(gold, pred), 0, 0, 0, tokens), pred
        return span_f1(gold, pred, scheme=self.scheme), pred

    # ----- files -------------------------------------------------------------------------------
    def _meta(self) -> dict:
        return {"seqlab_version": __version__, "format_version": FORMAT_VERSION, "scheme": self.scheme,
                "config": self.config.model_dump(mode="json")}

    def _files(self) -> dict[str, bytes]:
        state = {k: v.detach().contiguous().cpu() for k, v in self.net.state_dict().items()}
        vocab = {"words": self.words.itos, "chars": self.chars.itos, "tags": self.tags.itos}
        return {"config.json": json.dumps(self._meta(), indent=2).encode(),
                "vocab.json": json.dumps(vocab, ensure_ascii=False).encode(),
                "model.safetensors": st_save(state)}

    def save(self, path: str | Path) -> None:
        """Write a model folder (or a ``.zip`` archive) atomically."""
        files = self._files()
        path = Path(path)
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
        atomic_write_dir(path, fill)

    @classmethod
    def load(cls, path: str | Path) -> "Tagger":
        """Load a model folder or ``.zip`` archive. Only JSON and safetensors are read: nothing is unpickled."""
        path = Path(path)
        files = _read_model_files(path)
        try:
            meta = json.loads(files["config.json"])
            vocab = json.loads(files["vocab.json"])
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise SeqlabError(f"corrupt model file: {err}", path=path) from None
        if meta.get("format_version") != FORMAT_VERSION:
            raise SeqlabError(f"unsupported model format {meta.get('format_version')}", path=path)
        config = config_from_dict(meta["config"], str(path / "config.json"))
        words, chars, tags = (Vocab.from_list(vocab[k]) for k in ("words", "chars", "tags"))
        net = TaggerNet(config.model, len(words), len(chars), len(tags), None,
                        cls._constraints(tags, training_scheme(meta["scheme"], config.data.train_scheme)))
        try:
            state = st_load(files["model.safetensors"])
            net.load_state_dict(state, strict=True)
        except Exception as err:  # safetensors raises its own error types
            raise SeqlabError(f"corrupt or mismatched weights: {str(err).splitlines()[0]}", path=path) from None
        net.eval()
        return cls(config, words, chars, tags, meta["scheme"], net)

    def info(self) -> dict:
        params = sum(p.numel() for p in self.net.parameters())
        return {"seqlab_version": __version__, "task": self.config.task, "scheme": self.scheme,
                "train_scheme": self.train_scheme, "labels": self.tags.itos, "words": len(self.words),
                "chars": len(self.chars), "parameters": params,
                "encoders": [e.type for e in self.config.model.encoders],
                "decoder": self.config.model.decoder.type}


def _read_model_files(path: Path) -> dict[str, bytes]:
    names = ("config.json", "vocab.json", "model.safetensors")
    if path.is_dir():
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise SeqlabError(f"not a seqlab model folder (missing {', '.join(missing)})", path=path)
        return {n: (path / n).read_bytes() for n in names}
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            present = set(zf.namelist())
            missing = [n for n in names if n not in present]
            if missing:
                raise SeqlabError(f"not a seqlab model archive (missing {', '.join(missing)})", path=path)
            return {n: zf.read(n) for n in names}
    if not path.exists():
        raise SeqlabError("no such model", path=path)
    raise SeqlabError("not a seqlab model folder or .zip archive", path=path)


__all__ = ["Tagger", "Prediction", "Span", "PAD", "UNK"]
