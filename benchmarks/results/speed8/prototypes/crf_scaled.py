import numpy as np, time
from seqlab.crf_partition import _NumpyPartition
from seqlab.blas import one_blas_thread
rng = np.random.default_rng(0)
B, T, K = 10, 25, 40
em = rng.normal(size=(B, T, K)).astype(np.float32); tr = rng.normal(size=(K, K)).astype(np.float32)
st = rng.normal(size=K).astype(np.float32); en = rng.normal(size=K).astype(np.float32)
mask = np.ones((B, T), bool); mask[3, 20:] = False
def scaled(em, trans, start, end, mask):
    em = em.astype(np.float64); trans = trans.astype(np.float64)
    c = trans.max(); E = np.exp(trans - c)
    M = em.max(axis=2, keepdims=True); P = np.exp(em - M)
    a0 = start + em[:, 0]; m0 = a0.max(1, keepdims=True); ah = np.exp(a0 - m0); s = ah.sum(1, keepdims=True); ah /= s
    logscale = m0 + np.log(s)
    for t in range(1, em.shape[1]):
        u = (ah @ E) * P[:, t]
        s = u.sum(1, keepdims=True)
        nah = u / s
        nls = logscale + np.log(s) + c + M[:, t]
        keep = mask[:, t, None]
        ah = np.where(keep, nah, ah); logscale = np.where(keep, nls, logscale)
    last = ah * np.exp(end - end.max())
    return np.log(last.sum(1)) + logscale[:, 0] + end.max()
with one_blas_thread():
    ref = _NumpyPartition(em, tr, st, en, mask).log_z
    new = scaled(em, tr, st, en, mask)
    print("max diff", np.abs(ref - new).max())
    for f, name in [(lambda: _NumpyPartition(em, tr, st, en, mask), "current fwd"), (lambda: scaled(em, tr, st, en, mask), "scaled fwd"), (lambda: _NumpyPartition(em, tr, st, en, mask).gradients(np.ones(B)), "current fwd+bwd")]:
        for _ in range(50): f()
        t = time.perf_counter()
        for _ in range(500): f()
        print(name, round((time.perf_counter() - t) / 500 * 1e6, 1), "us")
