"""How much a trained tagger's scores hang on one table's ``<unk>`` row: dev and test F1 with the row as trained,
zeroed, set to the mean of the other rows, and drawn again at random.

    SEQLAB_DATA=../shared/data python benchmarks/unk_row.py MODEL_DIR FEATURE [FEATURE ...]

MODEL_DIR: a model folder. FEATURE: the name of a ``words``, ``bigrams`` or ``lattice`` feature in its config (each
measured alone, the others as trained). Dev and test are the model's config's. Where the row was never trained
(``unk_dropout`` 0 and ``min_count`` 1), the items unseen in training read a random vector, and the spread of these
scores is what that costs in noise (BENCHMARKS.md, "Weight decay, a trained <unk>, and the default on this session's
machine").
"""

from __future__ import annotations

import argparse

import torch

from seqlab.config import resolve_data_path
from seqlab.data.corpus import read_file
from seqlab.tagger import Tagger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("features", nargs="+")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tagger = Tagger.load(args.model)
    data = tagger.config.data
    splits = {split: read_file(resolve_data_path(getattr(data, split), None), data) for split in ("dev", "test")}
    modules = dict(tagger.net.embedder.named_children())

    def scores() -> str:
        return " ".join(f"{s} {tagger.evaluate(sents, unseen='score').scores.f1:.2f}" for s, sents in splits.items())

    for name in args.features:
        table = modules[name].embed.weight  # (rows, dim); row 1: <unk>
        unk = tagger.featurizers[name].vocab.unk_index
        trained = table.data[unk].clone()  # (dim,)
        generator = torch.Generator().manual_seed(0)
        variants = {
            "as trained": trained,
            "zeros": torch.zeros_like(trained),
            "the mean of the other rows": table.data[unk + 1 :].mean(0),
            "another N(0, 1) draw": torch.randn(trained.shape, generator=generator),
        }
        for label, row in variants.items():
            table.data[unk] = row
            print(f"{name} <unk> {label}: {scores()}", flush=True)
        table.data[unk] = trained


if __name__ == "__main__":
    main()
