import time, torch, sys
torch.set_num_threads(1)
lstm = torch.nn.LSTM(108, 100, batch_first=True).eval()
with torch.inference_mode():
    for T in [20, 21, 22, 30, 31]:
        x = torch.randn(64, T, 108)
        ts = []
        for i in range(3):
            t = time.perf_counter(); lstm(x); ts.append((time.perf_counter() - t) * 1e3)
        print(T, [round(v, 2) for v in ts], flush=True)
