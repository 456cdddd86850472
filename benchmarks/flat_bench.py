"""FLAT benchmarks (paper 002, issue 12) that need no training run.

    python benchmarks/flat_bench.py words  [--data-root ../shared/data]   # lexicon words per sentence (Table 1)
    python benchmarks/flat_bench.py speed  [--data-root ../shared/data]   # OntoNotes 4 test, batch 1 and 16
    python benchmarks/flat_bench.py memory [--data-root ../shared/data]   # peak memory vs sentence length

``speed`` builds FLAT and the character BiLSTM-CRF (without e5) on OntoNotes 4 train (vocabularies, lexicon) with
freshly initialised weights: tagging speed does not depend on the weight values. Both run in this process,
alternating, three repetitions, medians. ``memory`` runs each (R, length, mode) in a fresh subprocess and
reports its peak resident memory: one sentence of n characters cut from OntoNotes 4 test text (its real
lattice), inference (tagging) and one training step (forward + backward).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the models' own cost: without multilingual-e5-small, which the OntoNotes configs read since session 53 (its reading
# would be most of the time and memory measured here, as it was not in the figures these are compared with)
NO_E5 = ["model.embedder.features.e5=null"]


def words(data_root: str) -> None:
    from seqlab.data.readers import read_bmes
    from seqlab.lexicon import Lexicon

    lexicon = Lexicon.load("jieba")
    print(f"lexicon: jieba dict.txt, {len(lexicon)} words of 2+ characters\n")
    print("| corpus | split | sentences | chars/sentence | matched words/sentence | words/char |")
    print("|---|---|---|---|---|---|")
    for corpus in ("resume", "ontonotes4"):
        for split in ("train", "dev", "test"):
            sents = [s for s in read_bmes(Path(data_root) / corpus / f"{split}.char.bmes") if s.tokens]
            chars = sum(len(s.tokens) for s in sents)
            found = sum(len(lexicon.match(s.tokens)) for s in sents)
            print(
                f"| {corpus} | {split} | {len(sents)} | {chars / len(sents):.1f} | {found / len(sents):.1f} | "
                f"{found / chars:.2f} |"
            )


def _build(config: str, data_root: str):
    from seqlab.config import load_config
    from seqlab.data.corpus import load_corpus
    from seqlab.tagger import Tagger

    cfg = load_config(ROOT / config, NO_E5)
    corpus = load_corpus(cfg.data, data_root)
    return Tagger.build(cfg, corpus.train, corpus.scheme), corpus


def speed(data_root: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    models = {"FLAT": "configs/ner-ontonotes4-flat.yaml", "BiLSTM-CRF": "configs/flat/ontonotes4-bilstm-crf.yaml"}
    taggers, corpus = {}, None
    for name, path in models.items():
        taggers[name], corpus = _build(path, data_root)
    test = [s for s in corpus.test if s.tokens]
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(3):
        for batch in (1, 16):
            for name, tagger in taggers.items():
                tagger.predict_tags(test[:50], batch_size=batch)  # warm-up
                start = time.perf_counter()
                tagger.predict_tags(test, batch_size=batch)
                results.setdefault((name, batch), []).append(len(test) / (time.perf_counter() - start))
    print(f"OntoNotes 4 test: {len(test)} sentences, {threads} threads, medians of 3 alternating runs\n")
    print("| model | batch 1 (sent/s) | batch 16 (sent/s) | speed-up from batching |")
    print("|---|---|---|---|")
    for name in taggers:
        one, sixteen = (statistics.median(results[(name, b)]) for b in (1, 16))
        print(f"| {name} | {one:.1f} | {sixteen:.1f} | {sixteen / one:.2f}x |")


def _memory_child(data_root: str, relative: str, length: int, mode: str) -> None:
    import torch

    from seqlab.config import load_config
    from seqlab.data.batching import make_batches
    from seqlab.data.readers import read_bmes
    from seqlab.data.sentence import Sentence
    from seqlab.tagger import Tagger

    torch.set_num_threads(2)
    cfg = load_config(ROOT / "configs/ner-ontonotes4-flat.yaml", [*NO_E5, f"model.encoders.0.relative={relative}"])
    text = [t for s in read_bmes(Path(data_root) / "ontonotes4/test.char.bmes") for t in s.tokens]
    sentence = Sentence(text[:length], ["O"] * length)
    tagger = Tagger.build(cfg, [sentence], "BMES")
    enc = tagger.encode([sentence], with_tags=True)
    batch = make_batches(enc, tagger.featurizers, 1)[0]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if mode == "inference":
        tagger.net.eval()
        with torch.inference_mode():
            tagger.net(batch)
    else:
        tagger.net.train()
        tagger.net.loss(batch).sum().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "lattice": enc[0].sizes["lexicon"],
                "base_mib": base / 1024,
                "peak_mib": peak / 1024,
                "seconds": time.perf_counter() - start,
            }
        )
    )


def memory(data_root: str) -> None:
    print("| characters | lattice spans | mode | naive R: peak MiB (s) | memory-saving R: peak MiB (s) |")
    print("|---|---|---|---|---|")
    for length in (100, 200, 400, 800):
        for mode in ("inference", "training"):
            cells, spans = [], "?"
            for relative in ("naive", "blocked"):
                proc = subprocess.run(
                    [sys.executable, __file__, "_child", relative, str(length), mode, "--data-root", data_root],
                    capture_output=True,
                    text=True,
                    timeout=1200,
                )
                if proc.returncode:
                    cells.append(f"failed (exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1][:60]})")
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                spans = r["lattice"]
                cells.append(f"{r['peak_mib']:.0f} ({r['seconds']:.1f})")
            print(f"| {length} | {spans} | {mode} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["words", "speed", "memory", "_child"])
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.what == "words":
        words(args.data_root)
    elif args.what == "speed":
        speed(args.data_root, args.threads)
    elif args.what == "memory":
        memory(args.data_root)
    else:
        relative, length, mode = args.rest
        _memory_child(args.data_root, relative, int(length), mode)


if __name__ == "__main__":
    main()
