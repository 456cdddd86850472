"""Token types (seqlab.data.token_types): inference looks a batch's tokens up once and each featurizer gathers its
values by type id. The tensors must be the featurizers' own, whatever the table has seen before."""

from __future__ import annotations

import copy
import random
import threading

import numpy as np
import pytest
import torch

import seqlab.features.chars as chars_module
from seqlab.data.batching import Encoded, collate, collate_sentences
from seqlab.data.sentence import Sentence
from seqlab.data.token_types import TokenTypes, TypedTokens
from seqlab.data.vocab import Vocab
from seqlab.features.bigrams import BigramsConfig
from seqlab.features.casing import CasingConfig
from seqlab.features.chars import CharsConfig
from seqlab.features.words import WordsConfig

WORDS = ["the", "The", "a", "bank", "2,000", "x" * 45, "xxxxxxxxY", "", "of", "U.S.", "é", "naïve"] + [
    f"w{k}" for k in range(40)
]


def fitted(fit: list[Sentence]) -> dict:
    featurizers = {
        "word": WordsConfig(dim=4, pretrained=None).build("word"),
        "casing": CasingConfig().build("casing"),
        "char": CharsConfig(max_len=8).build("char"),
        "bigram": BigramsConfig(dim=4).build("bigram"),
    }
    for f in featurizers.values():
        f.fit(fit, [], 1)
    return featurizers


def own_tensors(sentences: list[Sentence], featurizers: dict):
    """Each sentence encoded by every featurizer, then collated: what training's path gives."""
    encoded = [Encoded(len(s.tokens), {n: f.encode(s) for n, f in featurizers.items()}) for s in sentences]
    return collate(encoded, list(range(len(sentences))), featurizers)


def assert_same_batch(a, b) -> None:
    assert torch.equal(a.mask, b.mask) and torch.equal(a.lengths, b.lengths) and a.index == b.index
    assert a.features.keys() == b.features.keys()
    for name, tensors in a.features.items():
        assert tensors.keys() == b.features[name].keys(), name
        for key, t in tensors.items():
            assert torch.equal(t, b.features[name][key]) and t.dtype == b.features[name][key].dtype, (name, key)


@pytest.mark.parametrize("vector_from", [10**9, 1])
def test_typed_collation_gives_the_featurizers_own_tensors(vector_from, monkeypatch):
    """Batches one after another through one table (later batches mix known and new types, tokens cut at the
    chars featurizer's max_len, an empty token, characters never seen in fitting): every tensor equals the one
    the featurizers give by encoding each sentence, for the chars featurizer on both sides of
    COLLATE_VECTOR_FROM and for a featurizer without a typed path (bigrams)."""
    monkeypatch.setattr(chars_module, "COLLATE_VECTOR_FROM", vector_from)
    rng = random.Random(7)
    fit = [Sentence([rng.choice(WORDS[:20]) for _ in range(8)]) for _ in range(5)]
    featurizers, reference = fitted(fit), fitted(fit)
    types = TokenTypes(10_000)
    for sizes in ([1], [3, 1, 4], [24] * 6, [5, 30, 1, 50, 12], [2, 2]):
        sentences = [Sentence([rng.choice(WORDS) for _ in range(n)]) for n in sizes]
        typed = collate_sentences(sentences, featurizers, types)
        assert_same_batch(own_tensors(sentences, reference), typed)
    assert len(set(types.strings)) == len(types.strings) <= len(WORDS)


def test_token_types_number_each_string_once_in_order_of_first_appearance():
    types = TokenTypes(5)
    assert types.ids(["b", "a", "b"]).tolist() == [0, 1, 0]
    assert types.ids(["c", "a", "c", "b"]).tolist() == [2, 1, 2, 0]
    assert types.strings == ["b", "a", "c"] and len(types) == 3
    assert types.ids(["a"]).tolist() == [1] and types.ids([]).tolist() == []
    assert types.ids(["d", "e", "f"]) is None  # three new strings do not fit in the two places left
    assert types.strings == ["b", "a", "c"]  # and none of them was numbered
    assert types.ids(["d", "e", "a"]).tolist() == [3, 4, 1]
    assert types.ids(["a", "e"]).tolist() == [1, 4] and types.ids(["z"]) is None


def test_a_full_table_collates_by_the_featurizers_own_lookup():
    fit = [Sentence(["the", "bank", "of", "a"])]
    featurizers = fitted(fit)
    types = TokenTypes(3)
    first = [Sentence(["the", "bank", "the"])]
    second = [Sentence(["the", "U.S.", "bank", "naïve"] * 40)]  # new strings beyond the capacity
    for batch in (first, second, first):
        assert_same_batch(own_tensors(batch, fitted(fit)), collate_sentences(batch, featurizers, types))
    assert types.strings == ["the", "bank"]
    assert TypedTokens.of(second, types) is None


def test_a_new_vocabulary_gives_its_own_ids_for_types_seen_before():
    """A featurizer's per-type values depend on its vocabulary: loading another forgets them."""
    fit = [Sentence(["the", "bank", "of"])]
    featurizers = {"word": WordsConfig(dim=4, pretrained=None).build("word"), "char": CharsConfig().build("char")}
    for f in featurizers.values():
        f.fit(fit, [], 1)
    types = TokenTypes(100)
    batch = [Sentence(["bank", "the", "zebra"] * 50)]
    before = collate_sentences(batch, featurizers, types)
    featurizers["word"].load_state({"itos": ["<pad>", "<unk>", "zebra", "the"]}, "vocab.json:word")
    featurizers["char"].load_state({"itos": ["<pad>", "<unk>", "z", "e", "b", "r", "a"]}, "vocab.json:char")
    after = collate_sentences(batch, featurizers, types)
    assert before.features["word"]["ids"][0, :3].tolist() == [2, 4, 1]  # bank, the, unknown
    assert after.features["word"]["ids"][0, :3].tolist() == [1, 3, 2]
    assert after.features["char"]["chars"][:, :5].tolist() == [[4, 6, 1, 1, 0], [1, 1, 3, 0, 0], [2, 3, 4, 5, 6]]
    assert_same_batch(own_tensors(batch, featurizers), after)


def test_featurizers_collating_from_two_threads_give_the_tensors_of_one():
    """Two threads share the table and the featurizers' per-type values, each numbering and computing new types
    while the other reads: every batch gets the tensors of a fresh single-threaded run."""
    rng = random.Random(3)
    vocabulary = [f"t{k}" for k in range(3000)] + WORDS
    fit = [Sentence(rng.sample(vocabulary, 30)) for _ in range(10)]
    batches = [
        [Sentence([rng.choice(vocabulary) for _ in range(rng.randint(1, 30))]) for _ in range(16)] for _ in range(40)
    ]
    featurizers, types = fitted(fit), TokenTypes(100_000)
    results: dict[int, object] = {}
    errors: list[Exception] = []
    barrier = threading.Barrier(2)

    def work(part: int) -> None:
        try:
            barrier.wait()
            for k in range(part, len(batches), 2):
                results[k] = collate_sentences(batches[k], featurizers, types)
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(part,)) for part in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    reference = fitted(fit)
    for k, batch in enumerate(batches):
        assert_same_batch(own_tensors(batch, reference), results[k])
    assert sorted(types.strings) == sorted({t for b in batches for s in b for t in s.tokens})


def test_typed_featurizers_and_tables_survive_deepcopy():
    """A copy (copy.deepcopy, pickle) holds no lock and no per-type values; it numbers and computes afresh."""
    fit = [Sentence(["the", "bank"])]
    featurizers, types = fitted(fit), TokenTypes(100)
    batch = [Sentence(["the", "Bank", "of"] * 50)]
    first = collate_sentences(batch, featurizers, types)
    twin, twin_types = copy.deepcopy(featurizers), copy.deepcopy(types)
    assert len(twin_types) == 0 and twin_types.capacity == 100
    assert_same_batch(first, collate_sentences(batch, twin, twin_types))
    assert_same_batch(first, collate_sentences(batch, featurizers, types))


def test_distinct_types_in_order_of_first_appearance():
    types = TokenTypes(10)
    typed = TypedTokens.of([Sentence(["c", "a", "c"]), Sentence(["b", "a"])], types)
    typed.ids = np.array([7, 3, 7, 5, 3])  # any ids: distinct() orders them by first appearance
    distinct, rows = typed.distinct()
    assert distinct.tolist() == [7, 3, 5] and rows.tolist() == [0, 1, 0, 2, 1]
    assert typed.lengths.tolist() == [3, 2] and typed.tokens == ["c", "a", "c", "b", "a"]


def test_chars_of_many_tokens_at_once_equal_each_token_s_char_ids():
    """The chars featurizer maps new types' characters by one str.translate: the ids each token gets alone, for
    unknown characters, characters outside the BMP, empty tokens, tokens cut at max_len, a vocabulary holding NUL, and
    a vocabulary too large for the translation (its ids would reach the surrogates), which maps token by token."""
    rng = random.Random(5)
    alphabet = list("abcXYZ019.,-é\x00") + ["\U0001f600", "中"]
    fit = [Sentence(["".join(rng.choice(alphabet[:12] + ["\x00"]) for _ in range(6)) for _ in range(5)])]
    small = CharsConfig(max_len=7).build("char")
    small.fit(fit, [], 1)
    large = CharsConfig(max_len=7).build("char")
    large.set_vocab(Vocab([chr(0x4E00 + k) for k in range(0xD800)] + list("abc")))
    assert small._id_chars is not None and large._id_chars is None
    for featurizer in (small, large):
        tokens = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(300)] + ["", "a"]
        ids, lengths = featurizer._char_id_rows(tokens)
        each = [featurizer._char_ids(t) for t in tokens]
        assert lengths.tolist() == [len(a) for a in each]
        assert ids.dtype == np.int64 and ids.tolist() == np.concatenate(each).tolist()
