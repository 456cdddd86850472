"""An inference lever off (A) and on (B), interleaved in one process.

    python benchmarks/inference_ab.py MODEL DATA
        --lever char-memo|flat-lengths|max-only-viterbi|psa-tanh|index-select|char-collate
        [--threads 2]
        [--reps 5]
        [--batch-sizes 1,64] [--text] [--keep-memo]

Levers: ``char-memo``: the char encoders' inference memo (``seqlab.features.chars.TokenMemo``);
``flat-lengths``: FLAT's R for pairs with words by one lookup in the table of sums per span lengths, against
four lookups (``seqlab.encoders.flat.LENGTH_TABLE_ELEMENTS`` = 0); ``max-only-viterbi``: the NumPy Viterbi's
forward of maxima only with pointers recomputed on the way back, for batches from ``seqlab.viterbi.MAX_ONLY_FROM``
elements, against pointers kept at every step at every batch size; ``psa-tanh``: PSA's additive scores with
``torch.tanh_`` (A, ``benchmarks/psa_reference.py``) against the sigmoid identity (B, ``seqlab.encoders.psa``);
``index-select``: the backward LSTM direction's reversals of a
padded batch by ``torch.gather`` with an expanded index (A) against ``index_select`` of whole rows (B,
``seqlab.lstm.gather_steps``); ``char-collate``: the char featurizer's collation token by token at every batch size
(A) against whole-array operations from ``seqlab.features.chars.COLLATE_VECTOR_FROM`` tokens on (B).

Each repetition tags the whole of DATA (a labeled file in the model's format) at each batch size with
``predict_tags``, and with ``--text`` each sentence as a raw string through ``Tagger.predict`` (batch 1), with
the memo off (A) and on (B), interleaved chunk by chunk (256 sentences, or 4 batches) in the order ABBA..., so
that this host's drift falls on both alike. The memo starts empty at each repetition, so B pays for every
first sighting of a word, as tagging a file once does; with ``--keep-memo`` only the first repetition starts
empty, as in a long-running server. Prints
sentences/s per repetition, the medians and their ratio B / A, and whether A and B gave the same tags.
Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from psa_reference import TanhAdditiveScores

import seqlab.crf.viterbi as viterbi_module
import seqlab.features.chars as chars_module
import seqlab.nn.lstm as lstm_module
from seqlab.encoders import flat as flat_module
from seqlab.encoders import psa as psa_module
from seqlab.features.chars import CharFeatures
from seqlab.tagger import Tagger


def expanded_gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """seqlab.lstm.gather_steps as it was: ``torch.gather`` with the index expanded over the features."""
    return x.gather(1, index.unsqueeze(2).expand(-1, -1, x.shape[2]))


def char_modules(tagger: Tagger) -> list[CharFeatures]:
    return [m for m in tagger.net.modules() if isinstance(m, CharFeatures)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument(
        "--lever",
        choices=["char-memo", "flat-lengths", "max-only-viterbi", "psa-tanh", "index-select", "char-collate"],
        required=True,
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--batch-sizes", default="1,64")
    p.add_argument("--text", action="store_true", help="also raw text in, spans out, one sentence per call")
    p.add_argument(
        "--keep-memo",
        action="store_true",
        help="empty the memo only before the first repetition (a long-running server's warm memo)",
    )
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from seqlab.data.readers import read_bmes, read_conll

    tagger = Tagger.load(args.model)
    data = tagger.config.data
    test = read_bmes(args.data) if data.format == "bmes" else read_conll(args.data, label_column=data.label_column)
    memos = char_modules(tagger)
    assert memos or args.lever != "char-memo", "the model has no char features"
    original, length_table = CharFeatures._memoised, flat_module.LENGTH_TABLE_ELEMENTS
    max_only_from = viterbi_module.MAX_ONLY_FROM
    scores = psa_module.AdditiveScores
    gather_steps, vector_from = lstm_module.gather_steps, chars_module.COLLATE_VECTOR_FROM

    def off(self, chars):
        return self.encoder(chars)

    def set_lever(on: bool) -> None:
        CharFeatures._memoised = original if on or args.lever != "char-memo" else off
        flat_module.LENGTH_TABLE_ELEMENTS = length_table if on or args.lever != "flat-lengths" else 0
        viterbi_module.MAX_ONLY_FROM = max_only_from if on or args.lever != "max-only-viterbi" else 2**62
        psa_module.AdditiveScores = scores if on or args.lever != "psa-tanh" else TanhAdditiveScores
        lstm_module.gather_steps = gather_steps if on or args.lever != "index-select" else expanded_gather
        chars_module.COLLATE_VECTOR_FROM = vector_from if on or args.lever != "char-collate" else 2**62

    runs: dict[str, dict[str, list[float]]] = {}
    tags: dict[str, list] = {}
    texts = [" ".join(s.tokens) for s in test]
    tagger.predict_tags(test[:200], 64)  # warm-up
    sizes = [int(x) for x in args.batch_sizes.split(",")] + (["text-1"] if args.text else [])
    for rep in range(args.reps):
        for bs in sizes:
            if rep == 0 or not args.keep_memo:
                for m in memos:
                    m._memo = None
            seconds = {"A": 0.0, "B": 0.0}
            step = 256 if bs == "text-1" or bs == 1 else 4 * bs  # sentences per interleaved chunk
            for k, lo in enumerate(range(0, len(test), step)):
                for version in ("A", "B") if k % 2 == 0 else ("B", "A"):  # ABBA: drift cancels
                    set_lever(version == "B")
                    start = time.perf_counter()
                    if bs == "text-1":
                        for t in texts[lo : lo + step]:
                            tagger.predict([t], batch_size=1)
                    else:
                        tags.setdefault(f"{version}{bs}", []).extend(tagger.predict_tags(test[lo : lo + step], bs))
                    seconds[version] += time.perf_counter() - start
            for version, sec in seconds.items():
                runs.setdefault(str(bs), {"A": [], "B": []})[version].append(round(len(test) / sec, 1))
    set_lever(True)
    result = {
        "lever": args.lever,
        "model": args.model,
        "data": args.data,
        "threads": args.threads,
        "sentences": len(test),
        "memo": "warm after the first repetition" if args.keep_memo else "emptied before each repetition",
        "sentences_per_s": runs,
        "ratio_of_medians_B_over_A": {
            k: round(statistics.median(v["B"]) / statistics.median(v["A"]), 3) for k, v in runs.items()
        },
        "same_tags": all(tags[f"A{bs}"] == tags[f"B{bs}"] for bs in sizes if bs != "text-1"),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
