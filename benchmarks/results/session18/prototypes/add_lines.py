import numpy as np, torch, time, collections
from add_micro import batches, TokenMemo
acc = collections.Counter()
def add(self, ids, hashes, vectors):
    T = time.perf_counter
    t0 = T()
    _, first = np.unique(hashes, return_index=True)
    at = np.searchsorted(self.hashes, hashes[first])
    taken = np.zeros(len(first), dtype=bool)
    inside = at < len(self.hashes)
    taken[inside] = self.hashes[at[inside]] == hashes[first][inside]
    keep, at = first[~taken], at[~taken]
    start, n = self.used, len(keep)
    t1 = T(); acc["find place"] += t1 - t0
    self.table[start: start + n] = vectors[torch.from_numpy(keep)]
    t2 = T(); acc["table"] += t2 - t1
    self.used += n
    width = max(ids.shape[1], self.chars.shape[1])
    if self.used > len(self.chars) or width > self.chars.shape[1]:
        grown = np.zeros((max(self.used, 2 * len(self.chars)), width), dtype=np.int64)
        grown[: len(self.chars), : self.chars.shape[1]] = self.chars
        self.chars = grown
        self.lengths = np.concatenate([self.lengths, np.zeros(len(grown) - len(self.lengths), dtype=np.int64)])
    t3 = T(); acc["grow"] += t3 - t2
    self.chars[start: start + n, : ids.shape[1]] = ids[keep]
    self.chars[start: start + n, ids.shape[1]:] = 0
    self.lengths[start: start + n] = np.count_nonzero(ids[keep], axis=1)
    t4 = T(); acc["chars"] += t4 - t3
    self.hashes = np.insert(self.hashes, at, hashes[keep])
    self.rows = np.insert(self.rows, at, start + np.arange(n))
    acc["insert"] += T() - t4
TokenMemo.add = add
memo = TokenMemo(("k",), 50, torch.float32)
for ids, h, v in batches: memo.add(ids, h, v)
print({k: round(v*1e3, 2) for k, v in acc.items()})
