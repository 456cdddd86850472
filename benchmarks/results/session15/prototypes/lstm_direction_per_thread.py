import torch, time, sys, threading
sys.path.insert(0, "/tmp")
from ab import ab
from concurrent.futures import ThreadPoolExecutor
from seqlab.lstm import BiLSTM, reversal_index, gather_steps
torch.manual_seed(0)
torch.set_num_threads(2)
m = BiLSTM(108, 100).eval()
x = torch.randn(64, 24, 108); var = torch.full((64,), 24); var[32:] = 23
pool = ThreadPoolExecutor(1, initializer=lambda: torch.set_num_threads(1))
def par(x, lengths):
    index = reversal_index(lengths, x.shape[1])
    def back():
        with torch.inference_mode():
            return gather_steps(m.bwd[0](gather_steps(x, index))[0], index)
    fut = pool.submit(back)
    torch.set_num_threads(1)
    f = m.fwd[0](x)[0]
    b = fut.result()
    torch.set_num_threads(2)
    return f, b
with torch.inference_mode():
    a = m._per_direction(x, var); b = par(x, var)
    print((a[0]-b[0]).abs().max(), ((a[1]-b[1])[:, :23]).abs().max())
    print("perdir vs par", ab(lambda: m._per_direction(x, var), lambda: par(x, var)))
