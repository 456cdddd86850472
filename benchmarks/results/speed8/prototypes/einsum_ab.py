import torch, time
torch.set_num_threads(1)
b, h, rows, cols, d = 10, 8, 20, 50, 160
N = 300
qr = torch.randn(b, h, rows, d, requires_grad=True)
table = torch.randn(N, d, requires_grad=True)
index = torch.randint(0, N, (b, rows, cols))
def f_einsum():
    r = torch.nn.functional.embedding(index, table)
    return torch.einsum("bhie,bije->bhij", qr, r)
def f_matmul():
    r = torch.nn.functional.embedding(index, table)  # (b, i, j, e)
    out = torch.matmul(qr.transpose(1, 2), r.transpose(-1, -2))  # (b, i, h, j)
    return out.transpose(1, 2)
class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, index):
        ctx.save_for_backward(index); ctx.n = table.shape[0]
        return table.index_select(0, index.reshape(-1)).view(*index.shape, table.shape[1])
    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        out = g.new_zeros(ctx.n, g.shape[-1]).index_add_(0, index.reshape(-1), g.reshape(-1, g.shape[-1]))
        return out, None
def f_matmul_ia():
    r = Gather.apply(table, index)
    out = torch.matmul(qr.transpose(1, 2), r.transpose(-1, -2))
    return out.transpose(1, 2)
def f_rleft():  # R (b, i, j, e) on the left, never permuted (the "einsum_ab2" row of BENCHMARKS)
    r = torch.nn.functional.embedding(index, table)
    return torch.matmul(r, qr.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
def f_products():
    # group-free: products of queries with every table row, then gather (N columns)
    p = torch.matmul(qr, table.T)  # (b, h, rows, N)
    return p.gather(-1, index[:, None].expand(b, h, rows, cols))
for name, f in [("einsum", f_einsum), ("matmul", f_matmul), ("matmul+index_add", f_matmul_ia), ("r-left", f_rleft), ("products", f_products)] * 2:
    for _ in range(5): f().pow(2).sum().backward()
    t = time.perf_counter()
    for _ in range(30):
        y = f(); y.pow(2).sum().backward()
    print(name, round((time.perf_counter() - t) / 30 * 1000, 2), "ms fwd+bwd")
ref = f_einsum()
print(torch.allclose(ref, f_matmul(), atol=1e-4), torch.allclose(ref, f_matmul_ia(), atol=1e-4), torch.allclose(ref, f_products(), atol=1e-3))
