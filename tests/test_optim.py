"""seqlab.training.optim.NAdam: torch.optim.NAdam's update, to the bit in its multi-tensor step (without the slow square
root of zeros) and to float rounding as two fused Adam calls; the fused SGD and NAdam that take the clipping factor
(seqlab.training.step.clip_and_step)."""

from __future__ import annotations

import copy

import pytest
import torch

from seqlab.training import optim
from seqlab.training.optim import NAdam


def _params(dtype=torch.float32):
    torch.manual_seed(0)
    return [
        torch.nn.Parameter(torch.randn(300, 20, dtype=dtype)),  # an embedding matrix: most rows unseen
        torch.nn.Parameter(torch.randn(50, dtype=dtype)),
        torch.nn.Parameter(torch.randn(7, 3, dtype=torch.float64)),
    ]


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


@pytest.mark.parametrize(
    "weight_decay,eps,dtype",
    [(0.0, 1e-8, torch.float32), (0.01, 1e-6, torch.float32), (0.0, 1e-8, torch.float64), (0.0, 1e-13, torch.float32)],
)
def test_same_bits_as_torch_nadam(weight_decay, eps, dtype, monkeypatch):
    monkeypatch.setattr(optim, "FUSED_NADAM", False)  # the multi-tensor step
    ours, theirs = _params(dtype), _params(dtype)
    a = NAdam(ours, lr=0.01, weight_decay=weight_decay, eps=eps)
    b = torch.optim.NAdam(theirs, lr=0.01, weight_decay=weight_decay, eps=eps, foreach=True)
    _run([a, b], [ours, theirs], 40)
    assert all(torch.equal(x, y) for x, y in zip(ours, theirs))
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    assert all(torch.equal(sa[i][k], sb[i][k]) for i in sb for k in sb[i])
    # eps 1e-13 is below what the clamp leaves exact in float32: torch's own step ran
    assert a._own_path(a.param_groups[0]) == (eps >= 1e-11 or dtype == torch.float64)


def test_state_dicts_move_between_the_two(monkeypatch):
    """A checkpoint of torch.optim.NAdam continues in seqlab's NAdam (and back) as if nothing changed."""
    monkeypatch.setattr(optim, "FUSED_NADAM", False)  # to the bit: the multi-tensor step
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


def _one_dtype(dtype):
    return [torch.nn.Parameter(p.detach().to(dtype)) for p in _params()]


def _fused_calls(monkeypatch) -> list:
    calls, fused_adam = [], torch._fused_adam_
    monkeypatch.setattr(torch, "_fused_adam_", lambda *a, **k: calls.append(k["beta1"]) or fused_adam(*a, **k))
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_step_equals_torch_nadam_to_rounding(dtype, monkeypatch):
    """On CPU without weight decay the step is two fused Adam calls (see seqlab.training.optim): torch.optim.NAdam's
    update to float rounding, its state kept as torch's (a state dict loads into either), and every step's
    parameters bumped in their version counters, which the fused kernel does not count."""
    if not optim._HAS_FUSED_ADAM:
        pytest.skip(f"torch {torch.__version__} has no fused Adam on CPU: the multi-tensor step runs")
    calls = _fused_calls(monkeypatch)
    ours, theirs = _one_dtype(dtype), _one_dtype(dtype)
    a, b = NAdam(ours, lr=0.01), torch.optim.NAdam(theirs, lr=0.01, foreach=True)
    versions = [p._version for p in ours]
    _run([a, b], [ours, theirs], 60)
    assert calls == [0.9, 0.0] * 60  # one pair a step: the momentum term, then the gradient's
    assert all(p._version >= v + 60 for p, v in zip(ours, versions))
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-13}
    assert not torch.equal(ours[0], _one_dtype(dtype)[0])  # it moved
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x, y, **tol)
    sa, sb = a.state_dict()["state"], b.state_dict()["state"]
    assert all(sa[i].keys() == sb[i].keys() for i in sb)
    for i in sb:
        for k in sb[i]:
            torch.testing.assert_close(sa[i][k], sb[i][k], **tol)
    c = torch.optim.NAdam(_one_dtype(dtype), lr=0.01, foreach=True)
    c.load_state_dict(copy.deepcopy(a.state_dict()))  # and back: the state is torch's


def test_fused_step_with_parameters_at_different_step_counts(monkeypatch):
    """A parameter left without a gradient on some steps lags in its step count: the fused calls run once per
    distinct count, each at its own rates, still torch.optim.NAdam's update to rounding."""
    if not optim._HAS_FUSED_ADAM:
        pytest.skip(f"torch {torch.__version__} has no fused Adam on CPU")
    calls = _fused_calls(monkeypatch)
    ours, theirs = _one_dtype(torch.float32), _one_dtype(torch.float32)
    a, b = NAdam(ours, lr=0.01), torch.optim.NAdam(theirs, lr=0.01, foreach=True)
    g = torch.Generator().manual_seed(5)
    for step in range(12):
        for i, (p, q) in enumerate(zip(ours, theirs)):
            p.grad = None if i == 1 and step % 3 == 0 else torch.randn(p.shape, generator=g)
            q.grad = None if p.grad is None else p.grad.clone()
        a.step()
        b.step()
    assert len(calls) > 24  # some steps ran two pairs of calls
    assert a.state[ours[1]]["step"] < a.state[ours[0]]["step"]
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("clip", [0.5, 1e6])
def test_fused_nadam_with_the_clipping_factor_equals_clip_grad_norm_then_nadam(clip, monkeypatch):
    """clip_and_step folds the clipping factor into the fused step (the first call divides the gradients by
    it in place): clip_grad_norm_ and torch.optim.NAdam to rounding, clipped on every step (0.5) or never."""
    from seqlab.training import clip_and_step

    if not optim._HAS_FUSED_ADAM:
        pytest.skip(f"torch {torch.__version__} has no fused Adam on CPU")
    clip_grad_norm_, clips = torch.nn.utils.clip_grad_norm_, []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: clips.append(1) or clip_grad_norm_(*a, **k))
    ours, theirs = _one_dtype(torch.float32), _one_dtype(torch.float32)
    a, b = NAdam(ours, lr=0.01), torch.optim.NAdam(theirs, lr=0.01, foreach=True)
    assert a.takes_grad_scale()
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        for p, q in zip(ours, theirs):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        norm = torch.nn.utils.get_total_norm([q.grad for q in theirs])
        clip_and_step(a, ours, clip)
        clip_grad_norm_(theirs, clip)
        b.step()
        assert not hasattr(a, "grad_scale")
    assert clips == [] and (clip != 0.5 or norm > 0.5)
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_a_grad_scale_on_a_step_that_cannot_take_it_is_refused():
    ps = _params()  # float32 and float64 together: the multi-tensor step, which knows no grad_scale
    opt = NAdam(ps, lr=0.1)
    for p in ps:
        p.grad = torch.ones_like(p)
    assert not opt.takes_grad_scale()
    opt.grad_scale = torch.tensor(2.0)
    with pytest.raises(RuntimeError, match="grad_scale"):
        opt.step()


def test_parameters_without_gradient_are_left_alone():
    ps = _params()
    opt = NAdam(ps, lr=0.1)
    ps[0].grad = torch.ones_like(ps[0])
    before = [p.detach().clone() for p in ps]
    opt.step()
    assert not torch.equal(ps[0], before[0])
    assert torch.equal(ps[1], before[1]) and torch.equal(ps[2], before[2]) and len(opt.state) == 1


def _sgd_config():
    from seqlab.config import load_config

    return load_config(
        "configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd", "train.lr=0.1", "train.weight_decay=1e-3"]
    ).train


@pytest.mark.parametrize("clip,count", [(None, 2), (0.5, 2), (1e6, 2), (0.5, 3)])
def test_fused_sgd_with_the_clipping_factor_equals_clip_grad_norm_then_sgd(clip, count, monkeypatch):
    """make_optimizer's fused SGD, with clip_and_step folding the clipping factor into its update, against
    clip_grad_norm_ and torch's multi-tensor SGD: clipped every step (0.5), never (1e6) and no clipping; with
    float32 and float64 parameters together (count 3) the factor cannot be one grad_scale, and is applied first."""
    from seqlab.training import clip_and_step, make_optimizer

    cfg = _sgd_config()
    ours, theirs = _params()[:count], _params()[:count]
    fused = make_optimizer(ours, cfg)
    if not fused.param_groups[0]["fused"]:
        pytest.skip(f"torch {torch.__version__} has no fused SGD on CPU: make_optimizer builds the foreach one")
    reference = torch.optim.SGD(theirs, lr=0.1, momentum=cfg.momentum, weight_decay=1e-3, foreach=True)
    clip_grad_norm_, calls = torch.nn.utils.clip_grad_norm_, []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *a, **k: calls.append(1) or clip_grad_norm_(*a, **k))
    g = torch.Generator().manual_seed(3)
    for _ in range(30):
        for p, q in zip(ours, theirs):
            p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
            q.grad = p.grad.clone()
        norm = torch.nn.utils.get_total_norm([q.grad for q in theirs])
        clip_and_step(fused, ours, clip)
        if clip:
            clip_grad_norm_(theirs, clip)
        reference.step()
        assert not hasattr(fused, "grad_scale")
    assert clip != 0.5 or norm > 0.5  # the clipping did happen
    assert len(calls) == (30 if clip and count == 3 else 0)  # folded into the update wherever it can be
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_clip_and_step_on_an_sgd_resumed_from_a_multi_tensor_state():
    """An SGD state saved before the fused update (param group foreach, not fused) loads into make_optimizer's
    SGD; its steps then clip with clip_grad_norm_, as they did, and match the multi-tensor SGD."""
    from seqlab.training import clip_and_step, make_optimizer

    cfg = _sgd_config()
    ours, theirs = _params(), _params()
    old = torch.optim.SGD(theirs, lr=0.1, momentum=cfg.momentum, weight_decay=1e-3, foreach=True)
    for p in theirs:
        p.grad = torch.ones_like(p)
    old.step()
    with torch.no_grad():
        for p, q in zip(ours, theirs):
            p.copy_(q)
    resumed = make_optimizer(ours, cfg)
    resumed.load_state_dict(copy.deepcopy(old.state_dict()))  # not sharing old's momentum buffers
    for p, q in zip(ours, theirs):
        p.grad = torch.full_like(p, 3.0)
        q.grad = p.grad.clone()
    clip_and_step(resumed, ours, 0.5)
    torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    old.step()
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_fused_sgd_steps_are_seen_by_the_inference_caches():
    """PyTorch's fused SGD writes the parameters without bumping their version counters, which seqlab's inference
    caches read (seqlab.nn.versions.weights_key): make_optimizer's SGD bumps them, so the BiLSTM's bidirectional
    inference copy built before a step is rebuilt after it (before, dev scoring read stale weights)."""
    from seqlab.nn.lstm import BiLSTM
    from seqlab.training import clip_and_step, make_optimizer

    torch.manual_seed(0)
    lstm = BiLSTM(5, 4).eval()
    params = list(lstm.parameters())
    optimizer = make_optimizer(params, _sgd_config())
    x, lengths = torch.randn(2, 3, 5), torch.tensor([3, 3])
    with torch.no_grad():
        before = torch.cat(lstm.directions(x, lengths), -1)  # no padding: the bidirectional copy
    for p in params:
        p.grad = torch.ones_like(p)
    versions = [p._version for p in params]
    clip_and_step(optimizer, params, 5.0)
    assert all(p._version > v for p, v in zip(params, versions))
    with torch.no_grad():
        after = torch.cat(lstm.directions(x, lengths), -1)
        direct = torch.cat(lstm._per_direction(x, lengths), -1)  # from the module's own weights
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, direct, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make",
    [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, fused=True), lambda ps: optim.NAdam(ps, lr=0.01)],
    ids=["sgd", "nadam"],
)
def test_step_hooks_and_the_profiler_label_still_work(make):
    """seqlab's optimisers skip PyTorch's step wrapper only where nothing needs it: registered step hooks (on the
    optimiser or global) still run around the step, a profiler still sees the step's label, and without either
    the step updates the weights the same; clear_grads leaves every gradient None, as zero_grad(set_to_none)."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    from torch.profiler import profile

    from seqlab.training import clear_grads

    torch.manual_seed(0)
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)  # PyTorch's classes wrapped as a program's would be
    torch.optim.NAdam([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(3))]
    opt = make(params)
    calls = []

    def grads():
        for p in params:
            p.grad = torch.ones_like(p)

    grads()
    before = [p.detach().clone() for p in params]
    opt.step()  # no hooks, no profiler: the unwrapped step
    assert all(not torch.equal(a, p) for a, p in zip(before, params))
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    post = opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    grads()
    opt.step()
    assert calls == ["pre", "post"]
    pre.remove(), post.remove()
    handle = register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append("global"))
    try:
        grads()
        opt.step()
    finally:
        handle.remove()
    assert calls == ["pre", "post", "global"]
    grads()
    with profile() as prof:
        opt.step()
    assert any(e.name == f"Optimizer.step#{type(opt).__name__}.step" for e in prof.events())
    grads()
    opt.step()
    assert calls == ["pre", "post", "global"]  # removed hooks stay removed
    clear_grads(opt)
    assert all(p.grad is None for p in params)
