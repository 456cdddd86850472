"""speed.py's batch-64 pass (cold: after batch 1 on onnxruntime and the 200-sentence warm-up) with or without every
LSTM shape the pass needs made beforehand (argv[1] 'pre'): what oneDNN's new shapes cost that pass. Prints ms."""
import sys, time
import torch
from chunker import fresh_chunker
from seqlab.data.batching import size_groups
tagger, corpus = fresh_chunker(2)
test = corpus.test
tagger.set_engine("auto")
tagger.predict_tags(test, 1)
tagger.predict_tags(test[:200], 64)
if sys.argv[1] == "pre":
    lstms = [m for m in tagger.net.encoders[0].modules() if isinstance(m, torch.nn.LSTM)]
    shapes = {(len(g), max(len(test[i].tokens) for i in g)) for g in size_groups([len(s.tokens) for s in test], 64)}
    with torch.inference_mode():
        torch.set_num_threads(1)  # as the pool's threads run them
        for rows, t in shapes:
            for m in lstms:
                m(torch.zeros(rows, t, m.input_size))
        torch.set_num_threads(2)
start = time.perf_counter()
tagger.predict_tags(test, 64)
print(round((time.perf_counter() - start) * 1e3, 1))
