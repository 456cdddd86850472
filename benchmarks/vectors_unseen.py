"""What the prediction-time vector lookup does for words outside a model's vocabulary (issue 40, point 2).

    SEQLAB_DATA=../shared/data python benchmarks/vectors_unseen.py MODEL DATA [--json OUT.json] [--batch-size N]

A model built on pre-trained vectors gives a word outside its vocabulary that the vectors know its pre-trained
vector when it meets it (:mod:`seqlab.features.words`). This scores a labeled file (read in the model's data
format; DATA is resolved against $SEQLAB_DATA when it is not a file) twice with the same model: with that lookup
(as loaded) and without it (each words feature's ``open_vocabulary`` turned off right after loading: every word
outside the vocabulary UNK, as before the lookup existed). Besides the overall conlleval scores it reports the
"unseen" tokens, whose (normalized) word is outside the vocabulary but known to the vectors: their token accuracy,
and the span scores restricted to entities (gold or predicted) with at least one such token. The numbers mean
something for a model whose vocabulary holds its training words alone (``add_dev_test_words: false``); by default
the dev/test words with vectors are in the vocabulary, and a test set has no unseen words. Prints a Markdown table;
``--json`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def unseen_mask(tagger, sentences) -> tuple[list[list[bool]], dict]:
    """Per token: whether a words feature has its word outside the vocabulary but in its vectors; and counts."""
    from seqlab.data.vocab import normalize_word
    from seqlab.features.vectors import vector_index
    from seqlab.features.words import WordsFeaturizer

    features = [f for f in tagger.featurizers.values() if isinstance(f, WordsFeaturizer) and f.vectors]
    if not features:
        raise SystemExit("the model has no words feature built on pre-trained vectors")
    unseen: set[tuple[int, str]] = set()
    outside = 0
    for k, f in enumerate(features):
        c = f.config
        words = {normalize_word(t, c.lowercase, c.replace_digits) for s in sentences for t in s.tokens}
        new = sorted(w for w in words if w not in f.vocab.stoi)
        index = vector_index(f.vectors)
        known = index.lookup(new) if index is not None else {}
        outside += len(new)
        unseen.update((k, w) for w in known)
    mask = [
        [
            any(
                (k, normalize_word(t, f.config.lowercase, f.config.replace_digits)) in unseen
                for k, f in enumerate(features)
            )
            for t in s.tokens
        ]
        for s in sentences
    ]
    types = {w for _, w in unseen}
    return mask, {"word_types_outside_vocabulary": outside, "word_types_unseen_with_vectors": len(types)}


def close(tagger) -> None:
    """Words outside the vocabulary UNK: the words features' prediction-time lookup off (before any encoding)."""
    for f in tagger.featurizers.values():
        if getattr(f, "open_vocabulary", False):
            f.open_vocabulary = False
            f.set_vocab(f.vocab)  # no memo of ids from the lookup


def restricted(sentences, predictions, mask, scheme: str) -> dict:
    """Token accuracy on the masked tokens, and span P/R/F1 on entities holding one."""
    from seqlab.data.schemes import get_spans

    tokens = right = gold_n = pred_n = correct = 0
    for s, pred, m in zip(sentences, predictions, mask):
        tokens += sum(m)
        right += sum(g == p for g, p, x in zip(s.labels, pred, m) if x)
        gold = {sp for sp in get_spans(s.labels, scheme) if any(m[sp[1] : sp[2]])}
        found = {sp for sp in get_spans(pred, scheme) if any(m[sp[1] : sp[2]])}
        gold_n, pred_n, correct = gold_n + len(gold), pred_n + len(found), correct + len(gold & found)
    p = 100.0 * correct / pred_n if pred_n else 0.0
    r = 100.0 * correct / gold_n if gold_n else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "tokens": tokens,
        "token_accuracy": 100.0 * right / tokens if tokens else 0.0,
        "entities_gold": gold_n,
        "entities_predicted": pred_n,
        "entities_correct": correct,
        "precision": p,
        "recall": r,
        "f1": f1,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", help="a model folder (or .zip) built on pre-trained vectors")
    parser.add_argument("data", help="a labeled file in the model's data format")
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--batch-size", type=int)
    args = parser.parse_args()
    from seqlab.config import resolve_data_path
    from seqlab.data.corpus import read_file
    from seqlab.tagger import Tagger

    data = Path(args.data) if Path(args.data).is_file() else resolve_data_path(args.data, None)
    results = {"model": args.model, "data": args.data}
    for name in ("lookup", "unk"):
        tagger = Tagger.load(args.model)
        if name == "unk":
            close(tagger)
        sentences = read_file(data, tagger.config.data)
        if name == "lookup":
            mask, counts = unseen_mask(tagger, sentences)
            results.update(counts, tokens=sum(len(s) for s in sentences))
        evaluation = tagger.evaluate(sentences, args.batch_size, "score")
        sc = evaluation.scores
        results[name] = {
            "overall": {"f1": sc.f1, "precision": sc.precision, "recall": sc.recall, "accuracy": sc.accuracy},
            "unseen": restricted(sentences, evaluation.predictions, mask, tagger.scheme),
        }
    lookup = results["lookup"]
    print(
        f"{results['tokens']} tokens; {lookup['unseen']['tokens']} unseen (outside the vocabulary, known to the "
        f"vectors: {results['word_types_unseen_with_vectors']} of the {results['word_types_outside_vocabulary']} "
        f"word types outside it); {lookup['unseen']['entities_gold']} gold entities hold one\n"
    )
    print(
        "| words outside the vocabulary | test F1 | test accuracy | unseen-token accuracy | F1 on entities with one |"
    )
    print("|---|---|---|---|---|")
    for name, label in (("unk", "UNK"), ("lookup", "their pre-trained vectors")):
        r = results[name]
        print(
            f"| {label} | {r['overall']['f1']:.2f} | {r['overall']['accuracy']:.2f} | "
            f"{r['unseen']['token_accuracy']:.2f} | {r['unseen']['f1']:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
