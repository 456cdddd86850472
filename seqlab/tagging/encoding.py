"""Inputs to the network's arrays: raw strings, token lists or sentences as :class:`Sentence` objects, each
through every featurizer, and gold labels as tag ids in the scheme the model is trained in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from seqlab.data.batching import Encoded
from seqlab.data.sentence import Sentence
from seqlab.data.tokenization import model_tokenizer, text_sentence
from seqlab.errors import SeqlabError
from seqlab.features.base import Featurizer


def training_scheme(scheme: str, requested: str) -> str:
    """The scheme the model is trained in, given the files' scheme and ``data.train_scheme``."""
    if scheme == "none" or requested == "same":
        return scheme
    if scheme == "BMES" and requested == "BIOES":
        return "BMES"  # the same structure; keep the corpus's own letters
    return requested


def as_sentences(inputs, data_config) -> list[Sentence]:
    """``inputs`` (a string, a sentence, or a sequence of strings, token lists and sentences) as sentences: a
    string cut by the model's tokenizer (:func:`seqlab.data.tokenization.model_tokenizer`), its tokens keeping
    their characters (``extra["offsets"]``) for the spans' text."""
    tokenizer = model_tokenizer(data_config)  # whitespace, chars for bmes, or data.tokenizer
    if isinstance(inputs, (str, Sentence)):
        inputs = [inputs]
    out = []
    for item in inputs:
        if isinstance(item, Sentence):
            out.append(item)
        elif isinstance(item, str):
            out.append(text_sentence(item, tokenizer))
        else:
            out.append(Sentence(list(item)))
    return out


def encode(
    featurizers: Mapping[str, Featurizer],
    sentences: Sequence[Sentence],
    tag_ids: Callable[[Sentence], np.ndarray] | None = None,
) -> list[Encoded]:
    """Each sentence through every featurizer (and its gold tags to ids by ``tag_ids``, when given)."""
    out = []
    feats = list(featurizers.items())
    sized = [(name, f) for name, f in feats if type(f).size is not Featurizer.size]  # report a length
    for s in sentences:
        arrays = {name: f.encode(s) for name, f in feats}
        sizes = {name: f.size(arrays[name]) for name, f in sized}
        out.append(Encoded(len(s.tokens), arrays, tag_ids(s) if tag_ids is not None else None, sizes))
    return out


def tag_ids(sentence: Sentence, tags: list[str], stoi: Mapping[str, int]) -> np.ndarray:
    """``tags`` (the sentence's labels in the training scheme) as ids of ``stoi``; a label the model has not seen
    is an error naming the sentence's file and line."""
    s = sentence
    for k, t in enumerate(tags):
        if t not in stoi:
            raise SeqlabError(f"label '{s.labels[k]}' was not seen in training", path=s.source, line=s.line + k)
    return np.fromiter((stoi[t] for t in tags), dtype=np.int64, count=len(tags))
