"""Every shipped config validates, builds a model, and paper ablations differ only in their stacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqlab.config import load_config
from seqlab.decoders import TagSet
from seqlab.tagging.network import TaggerNet
from tests.conftest import skip_without_its_transformers, stand_in_state

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").rglob("*.yaml"))


def test_configs_exist():
    names = {p.name for p in CONFIGS}
    for required in (
        "chunking-bilstm-crf.yaml",
        "pos-bilstm-crf.yaml",
        "ner-conll2003-bilstm-crf.yaml",
        "ner-resume-bilstm-crf.yaml",
        "chunking-psa.yaml",
        "pos-psa.yaml",
        "ner-conll2003-psa.yaml",
    ):
        assert required in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_validates_and_builds(path):
    config = load_config(path)
    skip_without_its_transformers(config)
    featurizers = {name: fc.build(name) for name, fc in config.model.embedder.features.items()}
    for f in featurizers.values():  # vocabularies from two sentences, no pre-trained vectors to read
        if hasattr(f, "vocab"):
            state = stand_in_state(["<pad>", "<unk>", "a", "b"], tag_names=["n"], word_tags=[1], word_frequencies=[3])
            f.load_state(state, "test")
    net = TaggerNet(config.model, featurizers, TagSet(["O", "B-NP", "I-NP", "E-NP", "S-NP"], "BIOES"))
    assert len(net.encoders) == len(config.model.encoders)
    assert net.embedder.output_dim == config.model.embedder.output_dim()


def test_overrides_are_typed(tmp_path):
    path = next(p for p in CONFIGS if p.name == "chunking-bilstm-crf.yaml")
    config = load_config(path, ["train.lr=0.1", "model.encoders.0.hidden=64", "data.dev_from_train=5"])
    assert config.train.lr == 0.1 and config.model.encoders[0].hidden == 64 and config.data.dev_from_train == 5


def test_psa_ablations_change_only_the_stack():
    base = load_config(Path(CONFIGS[0]).parent / "paper" / "chunking-psa.yaml").model_dump()  # the paper's recipe
    for path in (Path(CONFIGS[0]).parent / "psa").glob("chunking-*.yaml"):
        other = load_config(path).model_dump()
        assert other["data"] == base["data"] and other["train"] == base["train"], path.name
        assert other["model"]["embedder"] == base["model"]["embedder"], path.name


@pytest.mark.parametrize("corpus", ["ner-conll2003", "chunking"])
def test_gcdt_baselines_change_only_the_model(corpus):
    root = Path(CONFIGS[0]).parent
    base = load_config(root / f"{corpus}-gcdt.yaml").model_dump()
    variants = sorted((root / "gcdt").glob(f"{corpus}-*.yaml"))
    assert len(variants) == 14
    for path in variants:
        other = load_config(path).model_dump()
        changed = "train" if path.stem.endswith("-schedule") else "model"  # the one section a variant changes
        kept = {"data", "model", "train"} - {changed}
        assert all(other[k] == base[k] for k in kept) and other[changed] != base[changed], path.name


@pytest.mark.parametrize("corpus", ["resume", "ontonotes4"])
def test_flat_variants_change_only_the_model(corpus):
    root = Path(CONFIGS[0]).parent
    base = load_config(root / f"ner-{corpus}-flat.yaml").model_dump()
    variants = sorted((root / "flat").glob(f"{corpus}-*.yaml"))
    if corpus == "resume":
        variants.append(root / "ner-resume-transformer.yaml")
    assert len(variants) == 5
    for path in variants:
        other = load_config(path).model_dump()
        lattice = "lexicon" in other["model"]["embedder"]["features"]
        assert other["data"] == base["data"], path.name
        assert other["train"] == {**base["train"], "batch_length": "lexicon" if lattice else "tokens"}, path.name
        assert other["model"] != base["model"], path.name


def test_extends_merges_sections_and_refuses_loops(tmp_path):
    from seqlab.errors import SeqlabError

    base = tmp_path / "base.yaml"
    base.write_text(
        "task: ner\ndata: {train: a.txt, dev: b.txt}\ntrain: {optimizer: adam, lr: 0.002, batch_size: 16}\n"
    )
    (tmp_path / "paper").mkdir()
    child = tmp_path / "paper" / "child.yaml"
    child.write_text("extends: ../base.yaml\ntrain: {optimizer: sgd, lr: 0.015}\n")
    config = load_config(child, ["train.max_epochs=3"])
    assert (config.task, config.data.dev) == ("ner", "b.txt")  # from the base
    assert (config.train.optimizer, config.train.lr, config.train.batch_size) == ("sgd", 0.015, 16)  # merged
    assert config.train.max_epochs == 3
    base.write_text("extends: paper/child.yaml\ntask: ner\ndata: {train: a.txt}\n")
    with pytest.raises(SeqlabError, match="a loop"):
        load_config(child)
    child.write_text("extends: ../missing.yaml\n")
    with pytest.raises(SeqlabError, match="missing.yaml: no such config file"):
        load_config(child)
    child.write_text("extends: [1, 2]\n")
    with pytest.raises(SeqlabError, match="'extends': expected the path"):
        load_config(child)
