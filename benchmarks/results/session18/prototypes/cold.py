import sys, time, random, os
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
tagger.encode(corpus.train, with_tags=True)
tagger.net.eval()
test = corpus.test
mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
if "auto" in mode:
    tagger.set_engine("auto")
    tagger.predict_tags(test, 1)
tagger.predict_tags(test[:200], 64)
if "verbose" in mode:
    os.environ["ONEDNN_VERBOSE"] = "1"
    torch.backends.mkldnn.verbose(1)
if "prof" in mode:
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable()
if "pre" in mode:
    enc = tagger.net.encoders[0]
    lstm = [m for m in enc.modules() if isinstance(m, torch.nn.LSTM)]
    print(len(lstm), file=sys.stderr)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for T in range(1, 80):
            for l in lstm[:1]:
                l(torch.zeros(64, T, l.input_size))
    print("pre", time.perf_counter() - t0, file=sys.stderr)
print("MARK", flush=True)
for i in range(3):
    t = time.perf_counter(); tagger.predict_tags(test, 64); dt = time.perf_counter() - t
    print("MARK", flush=True); print(f"pass {i}: {dt*1000:.1f} ms {len(test)/dt:.0f} sent/s", file=sys.stderr, flush=True)
    if "prof" in mode and i == 0:
        pr.disable(); pstats.Stats(pr, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
