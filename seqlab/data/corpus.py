"""Loading the train / dev / test sentences that a config names."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

from seqlab.config import DataConfig, resolve_data_path
from seqlab.data.readers import read_bmes, read_conll
from seqlab.data.schemes import detect_scheme, normalize_scheme, split_tag
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError

log = logging.getLogger("seqlab")


@dataclass
class Corpus:
    train: list[Sentence]
    dev: list[Sentence]
    test: list[Sentence]
    scheme: str  # the files' tag scheme, or "none" for plain labels


def read_file(path: Path, data: DataConfig, labeled: bool = True) -> list[Sentence]:
    """Read one file in the format the data config names."""
    if data.format == "bmes":
        return read_bmes(path, strip_seg_digit=data.strip_seg_digit)
    return read_conll(path, token_column=data.token_column, label_column=data.label_column if labeled else None,
                      strip_seg_digit=data.strip_seg_digit)


def load_corpus(data: DataConfig, data_root: str | None = None) -> Corpus:
    train = read_file(resolve_data_path(data.train, data_root), data)
    if data.max_train_sentences:
        train = train[: data.max_train_sentences]
    if data.dev:
        dev = read_file(resolve_data_path(data.dev, data_root), data)
    else:
        # hold out a fixed random sample of training sentences (the papers use 1000 for CoNLL-2000)
        n = min(data.dev_from_train, len(train) // 5)
        picked = set(random.Random(data.dev_seed).sample(range(len(train)), n))
        dev = [s for i, s in enumerate(train) if i in picked]
        train = [s for i, s in enumerate(train) if i not in picked]
        log.info("held out %d training sentences as dev (seed %d)", len(dev), data.dev_seed)
    test = read_file(resolve_data_path(data.test, data_root), data) if data.test else []
    if data.scheme == "auto":
        scheme = detect_scheme([s.labels for s in train if s.labels])
    elif data.scheme == "none":
        scheme = "none"
    else:
        scheme = normalize_scheme(data.scheme)
    for split in (train, dev, test):
        check_labels(split, scheme)
    return Corpus(train, dev, test, scheme)


def check_labels(sentences: list[Sentence], scheme: str) -> None:
    """Every label of a chunk scheme is O or has a B-, I-, M-, E-, S- prefix; the first that is not is an
    error naming its file and line."""
    if scheme == "none":
        return
    for s in sentences:
        for k, label in enumerate(s.labels or ()):
            if split_tag(label) is None:
                raise SeqlabError(f"label {label!r} is not a {scheme} tag (expected O or a B-, I-, M-, E-, S- "
                                  f"prefix)", path=s.source, line=s.line + k)
