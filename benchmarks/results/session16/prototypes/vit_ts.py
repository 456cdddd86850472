import time, torch, numpy as np, statistics, threading
from seqlab.viterbi import viterbi
torch.set_num_threads(1)

@torch.jit.script
def forward_max(emit: torch.Tensor, into: torch.Tensor, inside: torch.Tensor, score: torch.Tensor, kept: torch.Tensor,
                full: int):
    steps = emit.shape[0]
    total = torch.empty(score.shape[0], into.shape[1], into.shape[2], dtype=score.dtype)
    for t in range(1, steps):
        torch.add(score.unsqueeze(1), into, out=total)
        best = torch.amax(total, 2)
        best += emit[t]
        if t >= full:
            best = torch.where(inside[t], best, score)
        score = best
        kept[t] = score
    return kept

def py_forward(emit, into, inside, score, kept, full):
    steps = emit.shape[0]
    total = torch.empty(score.shape[0], into.shape[1], into.shape[2], dtype=score.dtype)
    for t in range(1, steps):
        torch.add(score[:, None, :], into, out=total)
        best = torch.amax(total, 2)
        best += emit[t]
        score = best if t < full else torch.where(inside[t], best, score)
        kept[t] = score
    return kept

rng = np.random.default_rng(0)
B, T, K = 64, 26, 40
emit = torch.from_numpy(rng.standard_normal((T, B, K)).astype(np.float32))
into = torch.from_numpy(rng.standard_normal((1, K, K)).astype(np.float32))
lengths = rng.integers(20, T + 1, B); lengths[0] = T
inside = torch.from_numpy(np.arange(T)[:, None] < lengths[None])[:, :, None]
full = int(lengths.min())
def run(fn):
    kept = torch.empty(T, B, K); score = emit[0].clone(); kept[0] = score
    return fn(emit, into, inside, score, kept, full)
print("equal", torch.equal(run(forward_max), run(py_forward)))
for n in (1, 2):
    for name, fn in (("python", py_forward), ("script", forward_max)) * 2:
        def work():
            for _ in range(200): run(fn)
        ths = [threading.Thread(target=work) for _ in range(n)]
        s = time.perf_counter()
        for th in ths: th.start()
        for th in ths: th.join()
        print(n, "threads", name, round((time.perf_counter() - s) / 200 * 1e6), "us per decode (wall)")
