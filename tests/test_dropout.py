"""seqlab.nn.dropout.Dropout: nn.Dropout's contract with a mask drawn from uniform numbers on CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seqlab.nn.dropout import Dropout


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
