"""Trainable parameters of configs (Table 9 style), built on a corpus's training vocabulary.

    python benchmarks/param_counts.py configs/chunking-gcdt.yaml configs/gcdt/chunking-*.yaml --data-root ../shared/data

Frozen tables (pre-trained word vectors with freeze: true, one-hot casing) are not counted; word vectors are
not read (the count does not depend on their values).
"""

from __future__ import annotations

import argparse

from seqlab.config import load_config
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("configs", nargs="+")
    p.add_argument("--data-root")
    args = p.parse_args()
    corpora = {}  # each config on its own corpus's vocabulary and tags
    print("| config | trainable parameters | of which embeddings |")
    print("|---|---|---|")
    for path in args.configs:
        config = load_config(path)
        features = config.model.embedder.features
        overrides = [f"model.embedder.features.{n}.pretrained=null" for n, f in features.items() if f.type == "words"]
        config = load_config(path, overrides)
        key = config.data.model_dump_json()
        if key not in corpora:
            corpora[key] = load_corpus(config.data, args.data_root)
        corpus = corpora[key]
        net = Tagger.build(config, corpus.train, corpus.scheme).net
        if any(f.type == "words" and f.freeze for f in features.values()):
            for n, f in features.items():
                if f.type == "words" and f.freeze:
                    net.embedder._modules[n].embed.weight.requires_grad_(False)
        total = sum(q.numel() for q in net.parameters() if q.requires_grad)
        emb = sum(q.numel() for q in net.embedder.parameters() if q.requires_grad)
        print(f"| `{path}` | {total:,} | {emb:,} |")


if __name__ == "__main__":
    main()
