"""onnxruntime's intra-op threads at batch 64 on the engine's graph: 1 or 2 threads, idle threads spinning or
not (session.intra_op.allow_spinning), alternating in one process, 3 repetitions, the CoNLL-2000 test set.

    python benchmarks/ort_spinning_ab.py     (uses runs/speed/chunk-model/model and ../shared/data)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import statistics
import time
import warnings

import torch

warnings.simplefilter("ignore")
import onnxruntime as ort

from seqlab.data.corpus import read_file
from seqlab.tagger import Tagger

torch.set_num_threads(2)
t = Tagger.load("runs/speed/chunk-model/model", engine="onnxruntime")
sents = read_file(Path("../shared/data/conll2000/test.txt"), t.config.data, labeled=False)
enc = t.engine


def make(threads, spin):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.log_severity_level = 4
    o.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(enc.graph, o, providers=["CPUExecutionProvider"])


variants = {(th, sp): make(th, sp) for th in (1, 2) for sp in (True, False)}
res = {}
for _rep in range(3):
    for key, sess in variants.items():
        enc._sessions[False] = sess
        s = time.perf_counter()
        t.predict_tags(sents, 64)
        res.setdefault(key, []).append(len(sents) / (time.perf_counter() - s))
for k, v in res.items():
    runs = ", ".join(f"{x:.0f}" for x in v)
    print(f"threads {k[0]:d} spinning {k[1]}: {statistics.median(v):.0f} sent/s ({runs})")
