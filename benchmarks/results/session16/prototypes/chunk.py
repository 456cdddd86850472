import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
lstm = torch.nn.LSTM(108, 100, batch_first=True).eval()
def chunked(x, C):
    outs, state = [], None
    for s in range(0, x.shape[1], C):
        o, state = lstm(x[:, s:s + C], state)
        outs.append(o)
    return torch.cat(outs, 1)
with torch.inference_mode():
    for T in (12, 24, 37, 50):
        x = torch.randn(64, T, 108)
        whole = lstm(x)[0]
        for C in (8, 16):
            c = chunked(x, C)
            print(T, C, "equal", torch.equal(whole, c), float((whole - c).abs().max()))
        for rep in range(2):
            for name, fn in [("whole", lambda: lstm(x)), ("c8", lambda: chunked(x, 8)), ("c16", lambda: chunked(x, 16))]:
                fn()
                s = time.perf_counter()
                for _ in range(30): fn()
                print(T, name, round((time.perf_counter() - s) / 30 * 1e6), "us")
