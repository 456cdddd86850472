import time, torch
torch.set_num_threads(1)
lstm = torch.nn.LSTM(108, 100, batch_first=True).eval()
def t(b, T, reps=1):
    x = torch.randn(b, T, 108)
    with torch.inference_mode():
        s = time.perf_counter()
        for _ in range(reps): lstm(x)
        return (time.perf_counter() - s) / reps * 1e3
for T in (13, 24, 37):
    a = (t(64, T), t(64, T, 5))
    with torch.backends.mkldnn.flags(enabled=False):
        b = (t(64, T + 1), t(64, T + 1, 5))
    print(T, "mkldnn first/again", [round(x, 2) for x in a], "native first/again (T+1)", [round(x, 2) for x in b])
