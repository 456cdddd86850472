"""What an ensemble of trained CRF taggers would score: each model's span F1, and the ensemble's.

    SEQLAB_DATA=../shared/data python benchmarks/ensemble.py FILE MODEL_DIR [MODEL_DIR ...]

FILE: a labelled file in the models' data format (a path, or one relative to ``$SEQLAB_DATA`` as configs'
are). MODEL_DIR: a model folder, or a run folder holding one in ``model/``. The models must share their tag set and
have a CRF decoder. The ensemble is a product of experts: the mean of the models' emission scores and of their
transition scores, decoded by Viterbi. A measurement, not a feature: seqlab ships no ensembles (BENCHMARKS.md,
"Ensembles of seeds, measured").
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import torch

from seqlab.config import resolve_data_path
from seqlab.data.batching import collate
from seqlab.data.corpus import read_file
from seqlab.decoders.crf import CRFDecoder
from seqlab.evaluation.metrics import span_f1
from seqlab.tagger import Tagger

CHUNK = 32  # sentences a forward pass


def load(path: Path) -> Tagger:
    return Tagger.load(path / "model" if (path / "model").is_dir() else path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("models", type=Path, nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(1)
    taggers = [load(p) for p in args.models]
    first = taggers[0]
    for path, t in zip(args.models, taggers):
        if t.tags.itos != first.tags.itos or not isinstance(t.net.decoder, CRFDecoder):
            raise SystemExit(f"{path}: not a CRF tagger with the first model's tag set")
        t.net.eval()
    path = args.file if args.file.exists() else resolve_data_path(str(args.file), None)
    sentences = [s for s in read_file(path, first.config.data) if s.tokens]
    crfs = [t.net.decoder.crf for t in taggers]
    mean_crf = copy.deepcopy(crfs[0])
    paths: list[list[list[int]]] = [[] for _ in range(len(taggers) + 1)]  # per model, then the ensemble
    with torch.no_grad():
        for name in ("transitions", "start_transitions", "end_transitions"):
            getattr(mean_crf, name).copy_(torch.stack([getattr(c, name) for c in crfs]).mean(0))
        for start in range(0, len(sentences), CHUNK):
            chunk = sentences[start : start + CHUNK]
            scores = []
            for i, t in enumerate(taggers):
                encoded = t.encode(chunk)
                batch = collate(encoded, list(range(len(encoded))), t.featurizers)
                x, _ = t.net.encode(batch)  # (batch, seq_len, dim)
                emissions = t.net.decoder.proj(x)  # (batch, seq_len, num_tags)
                scores.append(emissions)
                paths[i] += crfs[i].best_paths(emissions, batch.mask)[0].tolist()
            paths[-1] += mean_crf.best_paths(torch.stack(scores).mean(0), batch.mask)[0].tolist()
    gold = [s.labels for s in sentences]
    for name, rows in zip([*map(str, args.models), f"ensemble of {len(taggers)}"], paths):
        pred = [first.to_labels(row[: len(s.tokens)]) for row, s in zip(rows, sentences)]
        print(f"{span_f1(gold, pred, scheme=first.scheme).f1:6.2f}  {name}")


if __name__ == "__main__":
    main()
