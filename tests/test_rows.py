"""seqlab.nn.rows: momentum SGD on the rows of an embedding table a batch read, the other rows' steps applied when next
read, against torch.optim.SGD's dense update."""

from __future__ import annotations

import copy

import pytest
import torch

from seqlab.features.words import WordEmbedding
from seqlab.nn import rows
from seqlab.training import clip_and_step
from seqlab.training.optim import SGD

VOCAB, DIM = 60, 4


class Net(torch.nn.Module):
    """A word table, a linear layer and a float64 parameter (with ``mixed``: clip_and_step's other path)."""

    def __init__(self, mixed: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.words = WordEmbedding(VOCAB, DIM, torch.randn(VOCAB, DIM), freeze=False)
        self.out = torch.nn.Linear(DIM, 3)
        self.extra = torch.nn.Parameter(torch.randn(3, dtype=torch.float64)) if mixed else None

    def forward(self, ids):
        y = self.out(self.words({"ids": ids}, None))  # (batch, seq, 3)
        loss = y.tanh().square().sum() + y.sum(-1).cos().sum()  # bounded gradients
        return loss + (self.extra**2).sum() if self.extra is not None else loss


def _batches(n, seed=1):
    """Batches of ids with padding (0); the first third from 12 words only, so most rows idle for long stretches."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for step in range(n):
        ids = torch.randint(1, 12 if step < n // 3 else VOCAB, (3, 6), generator=g)
        ids[torch.rand(3, 6, generator=g) < 0.2] = 0
        out.append(ids)
    return out


def _train(net, optimizer, batches, clip, lrs):
    params = list(net.parameters())
    for ids, lr in zip(batches, lrs):
        for group in optimizer.param_groups:
            group["lr"] = lr
        net.train()
        loss = net(ids)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_and_step(optimizer, params, clip)


@pytest.mark.parametrize(
    "momentum,clip,fused,mixed",
    [
        (0.9, None, True, False),
        (0.9, 1.0, True, False),
        (0.9, 1.0, False, False),
        (0.5, 1.0, True, False),
        (0.0, 1.0, True, False),
        (0.99, None, True, False),
        (0.9, 1.0, True, True),
    ],
)
def test_row_updates_equal_torch_sgd_to_rounding(momentum, clip, fused, mixed):
    """200 steps with the rate changed every 7 steps: the table (once brought up to date), the other weights and
    the momentum buffer match torch.optim.SGD after clip_grad_norm_. Momentum 0.5 ends a window every 10 steps,
    0.99 never before the end; 0 has no momentum; ``mixed`` adds a float64 parameter (clipping without
    a grad_scale)."""
    ours, theirs = Net(mixed), Net(mixed)
    optimizer = SGD(ours.parameters(), lr=0.1, momentum=momentum, fused=fused, foreach=not fused, row_tables=True)
    reference = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=momentum, foreach=True)
    batches, lrs = _batches(200), [0.02 / (1 + k // 7) for k in range(200)]
    table = ours.words.embed.weight
    assert rows.table(table) is not None
    params = list(theirs.parameters())
    for ids, lr in zip(batches, lrs):
        for group in optimizer.param_groups + reference.param_groups:
            group["lr"] = lr
        ours.train()
        ours_loss = ours(ids)
        optimizer.zero_grad(set_to_none=True)
        ours_loss.backward()
        assert table.grad.is_sparse
        clip_and_step(optimizer, list(ours.parameters()), clip)
        theirs_loss = theirs(ids)
        reference.zero_grad(set_to_none=True)
        theirs_loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        reference.step()
        torch.testing.assert_close(ours_loss, theirs_loss, rtol=1e-3, atol=1e-5)  # each forward read current rows
    if momentum >= 0.9:  # (0.5's windows end every 10 steps, the 200th included)
        # rows not read lately still owe their momentum steps
        assert not torch.allclose(table, theirs.words.embed.weight, rtol=1e-4, atol=1e-5)
    ours.eval()  # brings the table up to date
    # the tolerances: torch's fused SGD drifts as far from its multi-tensor one here (a missed momentum step: ~1e-2)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=2e-4)
    if momentum:
        buffer = optimizer.state_dict()["state"][[p is table for p in ours.parameters()].index(True)]["momentum_buffer"]
        torch.testing.assert_close(
            buffer, reference.state[theirs.words.embed.weight]["momentum_buffer"], rtol=1e-4, atol=2e-3
        )  # values up to ~6


def test_every_reader_sees_the_table_up_to_date():
    """After steps: a forward without gradients, the module's state_dict and the optimiser's state_dict each bring
    the table up to date; a forward with gradients brings up to date the rows it reads, and only those."""
    reference = Net()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, foreach=True)
    batches = _batches(40)
    _train(reference, ref_opt, batches, 1.0, [0.02] * 40)
    expected = reference.words.embed.weight.detach()

    def trained():
        net = Net()
        opt = SGD(net.parameters(), lr=0.1, momentum=0.9, fused=True, row_tables=True)
        _train(net, opt, batches, 1.0, [0.02] * 40)
        assert not torch.allclose(net.words.embed.weight, expected, rtol=1e-4, atol=1e-5)  # some rows lag
        return net, opt

    def close(weight):
        torch.testing.assert_close(weight, expected, rtol=1e-4, atol=1e-5)

    net, _ = trained()
    with torch.no_grad():
        net.words({"ids": torch.tensor([[1]])}, None)
    close(net.words.embed.weight.detach())
    net, _ = trained()
    close(net.state_dict()["words.embed.weight"])
    net, opt = trained()
    opt.state_dict()
    close(net.words.embed.weight.detach())
    net, _ = trained()
    read = torch.tensor([[5, 7, 7, 0]])
    net.words({"ids": read}, None)
    weight = net.words.embed.weight.detach()
    torch.testing.assert_close(weight[[0, 5, 7]], expected[[0, 5, 7]], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(weight, expected, rtol=1e-4, atol=1e-5)  # the rows not read still lag


def test_the_momentum_state_moves_between_torch_sgd_and_ours():
    """A state saved from row updates loads into torch.optim.SGD, and torch's into ours (as --resume does), and
    training goes on to the same weights as uninterrupted dense training."""
    batches, lrs = _batches(60), [0.02] * 60
    straight = Net()
    _train(straight, torch.optim.SGD(straight.parameters(), lr=0.1, momentum=0.9, foreach=True), batches, 1.0, lrs)
    for first, second in (("rows", "torch"), ("torch", "rows")):
        net = Net()

        def make(kind):
            return (
                SGD(net.parameters(), lr=0.1, momentum=0.9, fused=True, row_tables=True)  # noqa: B023 - called below
                if kind == "rows"
                else torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, foreach=True)  # noqa: B023
            )

        opt = make(first)
        _train(net, opt, batches[:30], 1.0, lrs[:30])
        state = copy.deepcopy(opt.state_dict())
        rows.detach(net.words.embed.weight)  # the first optimiser gone: its table dense again
        resumed = make(second)
        resumed.load_state_dict(state)
        _train(net, resumed, batches[30:], 1.0, lrs[30:])
        net.eval()
        for p, q in zip(net.parameters(), straight.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
        rows.detach(net.words.embed.weight)


@pytest.mark.parametrize(
    "kwargs", [{"weight_decay": 1e-3}, {"nesterov": True}, {"dampening": 0.1}, {"row_tables": False}]
)
def test_other_updates_keep_the_dense_table(kwargs):
    """Weight decay, Nesterov, dampening or row_tables off: the table gets a dense gradient and torch's update."""
    net = Net()
    options = {"lr": 0.1, "momentum": 0.9, "row_tables": True, **kwargs}
    optimizer = SGD(net.parameters(), **options)
    assert rows.table(net.words.embed.weight) is None
    loss = net(torch.tensor([[1, 2, 0]]))
    loss.backward()
    assert not net.words.embed.weight.grad.is_sparse
    optimizer.step()


def test_make_optimizer_leaves_the_table_dense_for_weight_averaging_and_data_parallel_ranks():
    from seqlab.config import load_config
    from seqlab.training import make_optimizer

    cfg = load_config("configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd"]).train
    for config, row_tables, expected in (
        (cfg, True, True),
        (cfg, False, False),
        (cfg.model_copy(update={"ema_decay": 0.999}), True, False),
    ):
        net = Net()
        make_optimizer(net.parameters(), config, row_tables)
        assert (rows.table(net.words.embed.weight) is not None) == expected
