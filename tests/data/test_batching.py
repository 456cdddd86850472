"""Batching, vocabularies and the held-out dev split."""

from __future__ import annotations

import random

import numpy as np
import pytest

from seqlab.config import DataConfig
from seqlab.data.batching import Encoded, make_batches, split_padding
from seqlab.data.corpus import load_corpus
from seqlab.data.vocab import CASING_CLASSES, UNK, Vocab, casing_class, normalize_word
from tests.conftest import SAMPLE


def _fake(lengths):
    return [Encoded(n, {}, np.zeros(n, dtype=np.int64)) for n in lengths]


def test_token_budget_and_coverage():
    lengths = [random.Random(i).randint(1, 60) for i in range(300)]
    batches = make_batches(_fake(lengths), {}, batch_tokens=200, shuffle=True, rng=random.Random(0))
    seen = sorted(i for b in batches for i in b.index)
    assert seen == list(range(300))  # every sentence exactly once
    for b in batches:
        assert len(b.index) == 1 or b.mask.shape[0] * b.mask.shape[1] <= 200  # padded size within budget


def test_sentence_count_batches_are_length_bucketed():
    lengths = [5, 50, 6, 49, 7, 48]
    batches = make_batches(_fake(lengths), {}, batch_size=3)
    assert sorted(sorted(lengths[i] for i in b.index) for b in batches) == [[5, 6, 7], [48, 49, 50]]
    assert all(b.mask.sum(1).tolist() == [lengths[i] for i in b.index] for b in batches)


def _parts_cost(sizes, cuts, overhead):
    bounds = [0, *cuts, len(sizes)]
    return sum(overhead + (b - a) * sizes[b - 1] for a, b in zip(bounds, bounds[1:]))


def test_split_padding_is_optimal_against_every_cut():
    import itertools

    rng = random.Random(3)
    for _ in range(60):
        sizes = sorted(rng.randint(1, 40) for _ in range(rng.randint(1, 8)))
        overhead = rng.choice([0, 3, 20, 200])
        brute = min(
            _parts_cost(sizes, list(c), overhead)
            for r in range(len(sizes))
            for c in itertools.combinations(range(1, len(sizes)), r)
        )
        cuts = split_padding(sizes, overhead)
        assert cuts == sorted(set(cuts)) and all(0 < c < len(sizes) for c in cuts)
        assert _parts_cost(sizes, cuts, overhead) == brute, (sizes, overhead)


def test_padding_split_batches_cover_everything_once():
    lengths = [4] * 40 + [60, 5, 30, 31, 3]
    plain = make_batches(_fake(lengths), {}, batch_size=64)
    split = make_batches(_fake(lengths), {}, batch_size=64, pad_overhead=64)
    assert len(plain) == 1 and len(split) > 1
    assert sorted(i for b in split for i in b.index) == list(range(len(lengths)))
    assert sum(b.mask.numel() for b in split) + 64 * (len(split) - 1) < plain[0].mask.numel()
    homogeneous = make_batches(_fake([20, 21, 22] * 20), {}, batch_size=64, pad_overhead=64)
    assert len(homogeneous) == 1  # little padding: not cut


def test_vocab_min_count_and_unk():
    from collections import Counter

    v = Vocab.from_counts(Counter({"a": 3, "b": 1, "c": 2}), min_count=2)
    assert v.itos[:2] == ["<pad>", UNK] and "b" not in v and v.index("b") == v.index("zzz") == 1
    assert Vocab.from_list(v.to_list()).stoi == v.stoi


def test_lowercase_lookup_keeps_casing_feature():
    assert normalize_word("Paris", lowercase=True, replace_digits=False) == "paris"
    assert normalize_word("A1b2", lowercase=False, replace_digits=True) == "A0b0"
    names = {w: CASING_CLASSES[casing_class(w)] for w in ("Paris", "paris", "EU", "1996", "A4", ",", "McDonald")}
    assert names == {
        "Paris": "title",
        "paris": "lower",
        "EU": "upper",
        "1996": "numeric",
        "A4": "has_digit",
        ",": "punct",
        "McDonald": "mixed",
    }


def test_dev_hold_out_is_fixed_by_seed():
    cfg = DataConfig(train=str(SAMPLE), label_column=2, dev_from_train=100, dev_seed=7)
    a, b = load_corpus(cfg), load_corpus(cfg)
    assert [s.tokens for s in a.dev] == [s.tokens for s in b.dev] and len(a.dev) == 100
    assert len(a.train) + len(a.dev) == 2500
    other = load_corpus(DataConfig(train=str(SAMPLE), label_column=2, dev_from_train=100, dev_seed=8))
    assert [s.tokens for s in other.dev] != [s.tokens for s in a.dev]
    assert not {tuple(s.tokens) for s in a.dev} & {tuple(s.tokens) for s in a.train} - {
        tuple(s.tokens) for s in a.dev
    }  # held-out sentences are removed from training


@pytest.mark.parametrize("scheme", ["BIO"])
def test_detected_scheme_of_sample(scheme):
    assert load_corpus(DataConfig(train=str(SAMPLE), label_column=2, dev_from_train=10)).scheme == scheme


@pytest.mark.parametrize("sizes", [[1], [3, 1, 4], [24] * 6, [5, 30, 1, 50, 12]])
def test_collate_sentences_gives_collate_of_the_encoded_sentences(sizes, monkeypatch):
    """Inference encodes and collates each batch at once (collate_sentences): the same batch as encoding each
    sentence and collating, for the featurizers with a whole-batch path (words, casing, chars on both sides of
    COLLATE_VECTOR_FROM) and one without (bigrams), with tokens never seen in fitting; each memo's contents too."""
    import torch

    import seqlab.features.chars as chars_module
    from seqlab.data.batching import collate, collate_sentences
    from seqlab.data.sentence import Sentence
    from seqlab.features.bigrams import BigramsConfig
    from seqlab.features.casing import CasingConfig
    from seqlab.features.chars import CharsConfig
    from seqlab.features.words import WordsConfig

    rng = random.Random(sum(sizes))
    words = ["the", "The", "a", "bank", "2,000", "x" * 45, "", "of", "U.S."] + [f"w{k}" for k in range(40)]
    fit = [Sentence([rng.choice(words[:20]) for _ in range(8)]) for _ in range(5)]
    sentences = [Sentence([rng.choice(words) for _ in range(n)]) for n in sizes]  # some never seen in fit
    for vector_from in (10**9, 1):
        monkeypatch.setattr(chars_module, "COLLATE_VECTOR_FROM", vector_from)
        outputs = []
        for whole_batch in (False, True):
            featurizers = {
                "word": WordsConfig(dim=4, pretrained=None).build("word"),
                "casing": CasingConfig().build("casing"),
                "char": CharsConfig(max_len=8).build("char"),
                "bigram": BigramsConfig(dim=4).build("bigram"),
            }
            for f in featurizers.values():
                f.fit(fit, [], 1)
            if whole_batch:
                outputs.append(collate_sentences(sentences, featurizers))
            else:
                encoded = [Encoded(len(s.tokens), {n: f.encode(s) for n, f in featurizers.items()}) for s in sentences]
                outputs.append(collate(encoded, list(range(len(sentences))), featurizers))
            outputs[-1].memos = {n: dict(getattr(f, "_cache", {})) for n, f in featurizers.items()}
        one, whole = outputs
        assert torch.equal(one.mask, whole.mask) and torch.equal(one.lengths, whole.lengths)
        assert one.index == whole.index and whole.tags is None
        for name, tensors in one.features.items():
            assert tensors.keys() == whole.features[name].keys()
            for key, t in tensors.items():
                assert torch.equal(t, whole.features[name][key]) and t.dtype == whole.features[name][key].dtype
        assert one.memos.keys() == whole.memos.keys()
        for name in one.memos:
            assert one.memos[name].keys() == whole.memos[name].keys()
