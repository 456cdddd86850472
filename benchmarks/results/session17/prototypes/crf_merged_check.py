import time, numpy as np
from seqlab.crf_partition import _ScaledPartition
from seqlab.blas import one_blas_thread
rng = np.random.default_rng(0)
ok = True
for trial in range(300):
    B = int(rng.integers(1, 12)); T = int(rng.integers(1, 30)); K = int(rng.integers(2, 45))
    em = (rng.normal(size=(B, T, K)) * rng.uniform(0.1, 8)).astype(np.float32)
    tr = rng.normal(size=(K, K)).astype(np.float32)
    if trial % 3 == 0: tr[rng.random((K, K)) < 0.3] = -10000.0
    st = rng.normal(size=K).astype(np.float32); en = rng.normal(size=K).astype(np.float32)
    lens = rng.integers(1, T + 1, size=B); lens[int(rng.integers(0, B))] = T
    mask = np.arange(T)[None, :] < lens[:, None]
    g = rng.uniform(0.5, 2, size=B)
    try:
        a = _ScaledPartition(em, tr, st, en, mask, False); b = _ScaledPartition(em, tr, st, en, mask, True)
    except Exception as e:
        continue
    ga, gb = a.gradients(g), b.gradients(g)
    same = np.array_equal(a.log_z, b.log_z) and all(np.array_equal(x, y) for x, y in zip(ga, gb))
    if not same:
        ok = False; print("differ", trial, B, T, K, max(np.abs(x - y).max() for x, y in zip(ga, gb)))
print("all equal:", ok)
B, T, K = 10, 24, 40
em = rng.normal(size=(B, T, K)).astype(np.float32) * 3; tr = rng.normal(size=(K, K)).astype(np.float32)
st = rng.normal(size=K).astype(np.float32); en = rng.normal(size=K).astype(np.float32)
for padded in (False, True):
    lens = np.full(B, T); 
    if padded: lens = rng.integers(5, T + 1, size=B); lens[0] = T
    mask = np.arange(T)[None, :] < lens[:, None]; g = np.ones(B)
    with one_blas_thread():
        res = {False: [], True: []}
        for rep in range(7):
            for m in (False, True):
                t = time.perf_counter()
                for _ in range(500): _ScaledPartition(em, tr, st, en, mask, m).gradients(g)
                res[m].append((time.perf_counter() - t) / 500 * 1e6)
    print("padded" if padded else "unpadded", "separate", round(sorted(res[False])[3]), "merged", round(sorted(res[True])[3]))
