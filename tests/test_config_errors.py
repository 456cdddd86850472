"""Configs that validate are configs that build: every config below is refused when it is read, with one
line naming the key as `--set` spells it, exit code 2, no traceback."""

from __future__ import annotations

import pytest
import yaml

from seqlab.cli import main
from seqlab.config import load_config
from tests.conftest import tiny_config
from tests.test_cli import assert_user_error, run

PSA = "model.encoders=[{type: psa_fusion, window: %s}]"

CASES = [
    (["model.encoders.0.hidden=201"], "model.encoders.0.hidden", "even"),
    (["model.encoders.0.hidden=100000000"], "model.encoders.0.hidden", "less than or equal"),
    (["model.encoders.0.layers=0"], "model.encoders.0.layers", "greater than"),
    (["model.encoders.0.type=transformer_xl"], "model.encoders.0", "unknown encoder type 'transformer_xl'"),
    (["model.encoders.0.windw=3"], "model.encoders.0.windw", "unknown config key"),
    ([PSA % 0], "model.encoders.0.window", "greater than"),
    ([PSA % 100000], "model.encoders.0.window", "less than or equal"),
    (["model.decoder.type=beam"], "model.decoder", "unknown decoder type 'beam'"),
    (
        ["model.embedder.features.char.encoder=lstm", "model.embedder.features.char.hidden=51"],
        "model.embedder.features.char.hidden",
        "even",
    ),
    (["model.embedder.features.char.type=subwords"], "model.embedder.features.char", "unknown feature type"),
    (["model.embedder.features.Word={type: words}"], "model.embedder.features", "feature name 'Word'"),
    (["model.embedder.features={}"], "model.embedder.features", "at least one input feature"),
    (["train.batch_length=lattice"], "train.batch_length", "neither 'tokens' nor a feature"),
    (["train.clip=-1"], "train.clip", "greater than 0"),
    (["train.lr=.inf"], "train.lr", "less than or equal"),
    (["train.device=tpu"], "train.device", "'auto', 'cpu' or 'cuda'"),
    (["train.lr=[0.1"], "train.lr", "not valid YAML"),
    (["train.lr_schedule=step_halving", "train.lr_decay=0.1"], "train.lr_decay", "not used by lr_schedule"),
    (["train.lr_hold_steps=5"], "train.lr_hold_steps", "not used by lr_schedule 'inverse_time'"),
    (["train.lr_schedule=exponential"], "train.lr_schedule", "'step_halving', 'linear' or 'cosine'"),
]


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfg")
    data = root / "tiny.txt"
    data.write_text("Confidence NN B-NP\n\n", encoding="utf-8")
    path = root / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_config(data).model_dump(mode="json")))
    return path


@pytest.mark.parametrize("sets,key,needle", CASES, ids=[c[1] + ":" + c[2][:20] for c in CASES])
def test_config_refused_with_its_key(config_file, tmp_path, capsys, sets, key, needle):
    """In-process through the CLI's main (argument parsing, error line, exit code)."""
    args = [x for s in sets for x in ("--set", s)]
    code = main(["-q", "train", str(config_file), "--out", str(tmp_path / "run"), *args])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert f"'{key}'" in lines[0] or f"--set {key}:" in lines[0], lines[0]
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_odd_hidden_in_a_subprocess_has_no_traceback(config_file, tmp_path):
    proc = run("train", config_file, "--out", tmp_path / "run", "--set", "model.encoders.0.hidden=201")
    assert_user_error(proc, "config key 'model.encoders.0.hidden'", "even")


def test_null_drops_a_feature(config_file):
    config = load_config(config_file, ["model.embedder.features.casing=null"])
    assert set(config.model.embedder.features) == {"word", "char"}
    assert config.model.embedder.output_dim() == 16 + 8
