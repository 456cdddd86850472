import torch, time
torch.set_num_threads(1)
for (b, h, rows, cols, d, N) in [(10, 8, 14, 177, 160, 2485), (10, 8, 24, 107, 160, 1000), (10, 8, 60, 60, 160, 1000)]:
    torch.manual_seed(0)
    qr = torch.randn(b, h, rows, d, requires_grad=True)
    table = torch.randn(N, d, requires_grad=True)
    index = torch.randint(0, N, (b, rows, cols))
    def f_einsum():
        r = torch.nn.functional.embedding(index, table)
        return torch.einsum("bhie,bije->bhij", qr, r)
    def f_rleft():
        r = torch.nn.functional.embedding(index, table)  # (b, i, j, e)
        return torch.matmul(r, qr.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # (b,i,j,h) -> (b,h,i,j)
    res = {}
    for name, f in [("einsum", f_einsum), ("r-left", f_rleft)] * 3:
        for _ in range(2): f().pow(2).sum().backward()
        t = time.perf_counter()
        for _ in range(10):
            y = f(); y.pow(2).sum().backward()
        res.setdefault(name, []).append(round((time.perf_counter() - t) / 10 * 1000, 2))
    ref, new = f_einsum(), f_rleft()
    print((b, h, rows, cols), res, "max diff", (ref - new).abs().max().item())
