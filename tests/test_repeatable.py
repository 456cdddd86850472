"""Every architecture repeats bit for bit on CPU at two threads (CI's cores, and the default on such a machine):
two runs of one seed, dropout on, end with the same weights and the same log."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from seqlab.config import config_from_dict
from seqlab.training import train
from tests.test_cuda import _families


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)  # train() set it for the run


@pytest.mark.parametrize("name", ["bilstm-crf", "psa", "att-bilstm-cnn", "gcdt", "flat"])
def test_each_architecture_trains_to_the_same_bits_twice_on_two_threads(name, tmp_path, two_threads):
    config, _ = _families()[name](tmp_path)
    raw = config.model_dump(mode="json")
    raw["model"]["embedder"]["dropout"] = 0.2
    raw["train"].update(max_epochs=2, device="cpu", threads=2)
    weights, logs = [], []
    for run in ("a", "b"):
        train(config_from_dict(raw), tmp_path / run, progress=False)
        weights.append(load_file(str(tmp_path / run / "checkpoint" / "model.safetensors")))
        logs.append([line.split('"seconds"')[0] for line in (tmp_path / run / "log.jsonl").read_text().splitlines()])
    differ = [k for k in weights[0] if not torch.equal(weights[0][k], weights[1][k])]
    assert not differ, f"{name}: {len(differ)} tensors differ, e.g. {differ[:3]}"
    assert logs[0] == logs[1]


def test_flat_attention_gradients_repeat_at_a_realistic_size(two_threads):
    """FLAT's relative-span tables at Resume's sizes (tensors large enough for PyTorch to split work between
    threads): two backward passes give the same gradient bits. Indexing the tables with ``table[k][index]`` did
    not: its backward adds with atomics in a varying order (w_r's gradient differed between two passes)."""
    from seqlab.encoders.flat import FlatConfig, FlatLayer

    torch.set_num_threads(2)
    torch.manual_seed(0)
    layer = FlatLayer(FlatConfig(ff_dropout=0.0))
    batch, chars, words = 16, 120, 40
    heads = torch.cat([torch.arange(chars).expand(batch, chars), torch.randint(0, chars - 4, (batch, words))], 1)
    tails = torch.cat(
        [torch.arange(chars).expand(batch, chars), heads[:, chars:] + torch.randint(1, 4, (batch, words))], 1
    )
    e = torch.randn(batch, chars + words, 160)
    grads = []
    for _ in range(2):
        layer.zero_grad()
        layer.attention_scores(e, heads, tails, chars).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and "relative.w_r.weight" in grads[0]
    assert all(torch.equal(grads[0][n], grads[1][n]) for n in grads[0]), [
        n for n in grads[0] if not torch.equal(grads[0][n], grads[1][n])
    ]
