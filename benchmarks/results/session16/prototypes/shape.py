import time, torch
torch.set_num_threads(1)
lstm = torch.nn.LSTM(108, 100, batch_first=True).eval()
def t(b, T, reps=1):
    x = torch.randn(b, T, 108)
    with torch.inference_mode():
        s = time.perf_counter()
        for _ in range(reps): lstm(x)
        return (time.perf_counter() - s) / reps * 1e3
if __name__ == "__main__":
    for T in range(10, 40, 3):
        first = t(64, T); again = t(64, T, 5)
        print(T, round(first, 3), round(again, 3))
