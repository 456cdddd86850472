"""Prototype: a one-layer BiLSTM's two directions on two threads (one intra-op thread each), forward and backward."""
import threading, time, torch
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(2, initializer=lambda: torch.set_num_threads(1))


def both_directions(run):
    """[run(0), run(1)] on the pool's two threads, the process's thread count 1 meanwhile."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return list(pool.map(run, range(2)))
    finally:
        torch.set_num_threads(threads)

class TwoWay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fwd, bwd, *weights):
        # x (batch, seq, d) unpadded; returns (batch, seq, 2h)
        leaves = [w.detach().requires_grad_() for w in weights]
        n = len(leaves) // 2
        xs = [x.detach().requires_grad_(), x.detach().flip(1).requires_grad_()]
        def run(i):
            with torch.enable_grad():
                ws = leaves[i * n:(i + 1) * n]
                out = torch._VF.lstm(xs[i], (torch.zeros(1, x.shape[0], ws[1].shape[1], dtype=x.dtype),) * 2,
                                        ws, True, 1, 0.0, True, False, True)[0]
                return out
        outs = both_directions(run)
        ctx.graph = (outs, xs, leaves, n)
        return torch.cat([outs[0].detach(), outs[1].detach().flip(1)], dim=-1)

    @staticmethod
    def backward(ctx, grad):
        outs, xs, leaves, n = ctx.graph
        h = outs[0].shape[-1]
        gs = [grad[..., :h], grad[..., h:].flip(1)]
        def run(i):
            return torch.autograd.grad(outs[i], [xs[i], *leaves[i * n:(i + 1) * n]], gs[i])
        res = both_directions(run)
        gx = res[0][0] + res[1][0].flip(1)
        return (gx, None, None, *res[0][1:], *res[1][1:])

    torch.manual_seed(0)
    torch.set_num_threads(2)
    f = torch.nn.LSTM(108, 100, batch_first=True); b = torch.nn.LSTM(108, 100, batch_first=True)
    bi = torch.nn.LSTM(108, 100, batch_first=True, bidirectional=True, device="meta")
    for name, q in f.named_parameters(): setattr(bi, name, q)
    for name, q in b.named_parameters(): setattr(bi, name + "_reverse", q)
