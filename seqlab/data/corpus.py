"""Loading the train / dev / test sentences that a config names."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path

from seqlab.config import DataConfig, resolve_data_path
from seqlab.data.readers import read_bmes, read_conll
from seqlab.data.schemes import check_scheme, detect_scheme, normalize_scheme
from seqlab.data.sentence import Sentence

log = logging.getLogger("seqlab")


@dataclass
class Corpus:
    train: list[Sentence]
    dev: list[Sentence]
    test: list[Sentence]
    scheme: str  # the files' tag scheme, or "none" for plain labels


def read_file(path: Path, data: DataConfig, labeled: bool = True) -> list[Sentence]:
    """Read one file in the format the data config names (an annotation file, .jsonl / .json / .spacy, whatever
    it names: :mod:`seqlab.data.annotations`, tokens by the config's tokenizer)."""
    if data.format == "jsonl" or path.suffix.lower() in (".jsonl", ".json", ".spacy"):
        from seqlab.data.annotations import read_annotations
        from seqlab.data.tokenization import model_tokenizer

        scheme = data.scheme if data.scheme not in ("auto", "none") else "BIO"
        return read_annotations(path, model_tokenizer(data), scheme, labeled=labeled)
    if data.format == "bmes":
        return read_bmes(path, strip_seg_digit=data.strip_seg_digit)
    return read_conll(
        path,
        token_column=data.token_column,
        label_column=data.label_column if labeled else None,
        strip_seg_digit=data.strip_seg_digit,
    )


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
    declared = data.scheme != "auto"
    for split in (train, dev, test):
        check_labels(split, scheme, "data.scheme" if declared else None, "the training file (data.scheme: auto)")
    return Corpus(train, dev, test, scheme)


def check_labels(
    sentences: list[Sentence], scheme: str, setting: str | None = None, expected_from: str = "the model"
) -> None:
    """The labels of each file are tags of ``scheme``; the first that is not is an error naming its file, line
    and tag, with the scheme the file fits and how to convert it (:func:`seqlab.data.schemes.check_scheme`).
    ``setting`` names the config key that declared the scheme; None when ``expected_from`` fixed it."""
    if scheme == "none":
        return
    by_file: dict[str, list[tuple[int, list[str]]]] = {}
    for s in sentences:
        if s.labels:
            by_file.setdefault(s.source, []).append((s.line, s.labels))
    for source, located in by_file.items():
        check_scheme(located, scheme, source, setting, expected_from)
