import torch
torch.manual_seed(0)
for threads in (1, 2):
    torch.set_num_threads(threads)
    lstm = torch.nn.LSTM(108, 100, batch_first=True).eval()
    with torch.inference_mode():
        for T in (5, 13, 24, 37):
            for B in (64, 7):
                x = torch.randn(B, T, 108)
                a = lstm(x)[0]
                for extra in (1, 3, 8):
                    xp = torch.cat([x, torch.zeros(B, extra, 108)], 1)
                    b = lstm(xp)[0][:, :T]
                    print(threads, T, B, extra, torch.equal(a, b), (a - b).abs().max().item())
