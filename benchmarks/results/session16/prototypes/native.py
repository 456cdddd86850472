"""oneDNN's LSTM against PyTorch's own kernel, first call of a shape and again (t from shape.py)."""
import torch
from shape import t
for T in (13, 24, 37):
    a = (t(64, T), t(64, T, 5))
    with torch.backends.mkldnn.flags(enabled=False):
        b = (t(64, T + 1), t(64, T + 1, 5))
    print(T, "mkldnn first/again", [round(x, 2) for x in a], "native first/again (T+1)", [round(x, 2) for x in b])
