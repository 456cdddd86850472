"""seqlab.optim.NAdam: torch.optim.NAdam's update to the bit, without the slow square root of zeros."""

from __future__ import annotations

import copy

import pytest
import torch

from seqlab.optim import NAdam


def _params(dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.nn.Parameter(torch.randn(300, 20, dtype=dtype)),  # an embedding matrix: most rows unseen
            torch.nn.Parameter(torch.randn(50, dtype=dtype)),
            torch.nn.Parameter(torch.randn(7, 3, dtype=torch.float64))]


def _run(optimizers, groups, steps, seed=1):
    """The same gradients into every parameter group: rows of the first tensor mostly zero, as an embedding's."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for tensors in zip(*groups):
            grad = torch.randn(tensors[0].shape, generator=g, dtype=tensors[0].dtype)
            if tensors[0].shape[0] == 300:
                grad[torch.rand(300, generator=g) < 0.9] = 0
            for p in tensors:
                p.grad = grad.clone()
        for opt in optimizers:
            opt.step()


@pytest.mark.parametrize("weight_decay,eps,dtype", [(0.0, 1e-8, torch.float32), (0.01, 1e-6, torch.float32),
                                                    (0.0, 1e-8, torch.float64), (0.0, 1e-13, torch.float32)])
def test_same_bits_as_torch_nadam(weight_decay, eps, dtype):
    ours, theirs = _params(dtype), _params(dtype)
    a = NAdam(ours, lr=0.01, weight_decay=weight_decay, eps=eps)
    b = torch.optim.NAdam(theirs, lr=0.01, weight_decay=weight_decay, eps=eps, foreach=True)
    _run([a, b], [ours, theirs], 40)
    assert all(torch.equal(x, y) for x, y in zip(ours, theirs))
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    assert all(torch.equal(sa[i][k], sb[i][k]) for i in sb for k in sb[i])
    # eps 1e-13 is below what the clamp leaves exact in float32: torch's own step ran
    assert a._own_path(a.param_groups[0]) == (eps >= 1e-11 or dtype == torch.float64)


def test_state_dicts_move_between_the_two():
    """A checkpoint of torch.optim.NAdam continues in seqlab's NAdam (and back) as if nothing changed."""
    ref, mid = _params(), _params()
    r = torch.optim.NAdam(ref, lr=0.01, foreach=True)
    m = torch.optim.NAdam(mid, lr=0.01, foreach=True)
    _run([r, m], [ref, mid], 10)
    # loading casts mu_product to a float64 parameter's dtype: the reference goes through a load too (each
    # from its own copy: a loaded state shares the saved tensors)
    r, ours = torch.optim.NAdam(ref, lr=0.01, foreach=True), NAdam(mid, lr=0.01)
    r.load_state_dict(copy.deepcopy(m.state_dict()))
    ours.load_state_dict(copy.deepcopy(m.state_dict()))
    _run([r, ours], [ref, mid], 10, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(ref, mid))
    r, back = torch.optim.NAdam(ref, lr=0.01, foreach=True), torch.optim.NAdam(mid, lr=0.01, foreach=True)
    r.load_state_dict(copy.deepcopy(ours.state_dict()))
    back.load_state_dict(copy.deepcopy(ours.state_dict()))
    _run([r, back], [ref, mid], 5, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(ref, mid))
    assert type(ours).__name__ == "NAdam"  # checkpoints record the class name


def test_parameters_without_gradient_are_left_alone():
    ps = _params()
    opt = NAdam(ps, lr=0.1)
    ps[0].grad = torch.ones_like(ps[0])
    before = [p.detach().clone() for p in ps]
    opt.step()
    assert not torch.equal(ps[0], before[0])
    assert torch.equal(ps[1], before[1]) and torch.equal(ps[2], before[2]) and len(opt.state) == 1
