import time, torch
torch.set_num_threads(2)
from seqlab.tagger import Tagger
t = Tagger.load("runs/speed/chunk-model/model")
grads = [torch.randn_like(p) for p in t.net.parameters()]
a = torch.nn.utils.get_total_norm(grads)
b = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
print(len(grads), a.item(), b.item(), torch.equal(a, b))
for rep in range(3):
    for name, f in (("get_total_norm", lambda: torch.nn.utils.get_total_norm(grads)),
                    ("foreach_norm", lambda: torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))):
        s = time.perf_counter()
        for _ in range(500): f()
        print(name, round((time.perf_counter() - s) / 500 * 1e6), "us")
