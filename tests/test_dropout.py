"""seqlab.nn.dropout.Dropout: nn.Dropout's contract with a mask drawn from uniform numbers on CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seqlab.config import config_from_dict
from seqlab.nn.dropout import Dropout, unk_dropout
from seqlab.tagger import Tagger
from tests.conftest import tiny_config, train_tiny


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_keeps_one_minus_p_and_scales_the_kept(p):
    torch.manual_seed(0)
    x = torch.rand(200, 500) + 0.5  # no zeros, so a zero output is a dropped element
    y = Dropout(p).train()(x)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / (1 - p), rtol=1e-6)
    rate = kept.float().mean().item()  # 100,000 draws: standard error under 0.0016
    assert abs(rate - (1 - p)) < 0.01


def test_gradient_is_the_mask_scaled():
    torch.manual_seed(1)
    x = torch.randn(30, 40, dtype=torch.float64, requires_grad=True)
    y = Dropout(0.3).train()(x)
    y.sum().backward()
    expected = (y != 0).to(x.dtype) / 0.7
    assert torch.equal(x.grad, expected)


def test_eval_and_edge_rates_behave_as_nn_dropout():
    x = torch.randn(5, 7)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    assert Dropout(0.5).state_dict() == nn.Dropout(0.5).state_dict() == {}


def test_masks_follow_the_seed():
    x = torch.randn(10, 25, 200)
    torch.manual_seed(3)
    a = Dropout(0.5).train()(x)
    torch.manual_seed(3)
    b = Dropout(0.5).train()(x)
    assert torch.equal(a, b)


def test_unk_dropout_reads_real_ids_as_unk_at_its_rate_and_only_in_training():
    torch.manual_seed(0)
    ids = torch.randint(2, 1000, (200, 50))  # (batch, seq_len)
    ids[:, 40:] = 0  # padding
    got = unk_dropout(ids, 0.3, 1, training=True)
    hit = got != ids
    assert (got[hit] == 1).all() and (got[:, 40:] == 0).all()  # only real ids, and only to <unk>
    assert 0.28 < hit[:, :40].float().mean().item() < 0.32  # 8,000 draws at 0.3
    assert unk_dropout(ids, 0.3, 1, training=False) is ids and unk_dropout(ids, 0.0, 1, training=True) is ids


@pytest.mark.parametrize("feature", ["word", "bigram"])
def test_unk_dropout_trains_the_unk_row_that_unseen_items_read(tmp_path_factory, feature):
    """On the tiny corpus every item was seen in training, so <unk> is read only through unk_dropout: at 0 its row
    keeps its initial value (Adam moves no row without a gradient), above 0 it is trained."""

    def config(p: float, epochs: int):
        def make(path):
            raw = tiny_config(path).model_dump(mode="json")
            features = raw["model"]["embedder"]["features"]
            features["bigram"] = {"type": "bigrams", "dim": 8}
            features[feature]["unk_dropout"] = p
            raw["train"]["max_epochs"] = epochs
            return config_from_dict(raw)

        return make

    def table(p: float, epochs: int) -> torch.Tensor:
        _, run, _ = train_tiny(tmp_path_factory, f"unk-{feature}", config(p, epochs))
        return dict(Tagger.load(run / "model").net.embedder.named_children())[feature].embed.weight.detach()

    once, thrice, dropped = table(0.0, 1), table(0.0, 3), table(0.2, 3)  # the same seed: the same initial table
    assert torch.equal(once[1], thrice[1]) and not torch.equal(once[2:], thrice[2:])  # <unk> untouched, others trained
    assert not torch.equal(dropped[1], thrice[1])  # <unk> trained


def test_the_lattice_reads_unk_for_a_words_own_row_only_in_training():
    from seqlab.features.lattice import LatticeEmbedding
    from seqlab.nn.context import Context

    torch.manual_seed(0)  # at 0.999 a word keeps its own row with odds of 1 in 1,000; the seed fixes the draws
    lattice = LatticeEmbedding("lexicon", num_words=6, dim=4, init=None, freeze=False, dropout=0.0, unk_dropout=0.999)
    inputs = {"ids": torch.tensor([[2, 3, 4, 5], [5, 4, 0, 0]])}  # (batch, words), 0: padding
    ids, table, ctx = inputs["ids"], lattice.embed.weight, Context.of(torch.ones(2, 3, dtype=torch.bool))
    lattice.train()(inputs, ctx)
    trained = ctx.latest("lexicon")  # (batch, words, dim)
    assert torch.equal(trained[ids > 0], table[1].expand(6, 4))  # every real word read <unk>'s row
    assert torch.equal(trained[ids == 0], table[0].expand(2, 4))  # padding stays padding
    lattice.eval()(inputs, ctx)
    assert torch.equal(ctx.latest("lexicon"), table[ids])  # prediction reads each word's own row
