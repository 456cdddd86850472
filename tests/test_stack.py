"""Stack v2: a new model is new files. A featurizer, an encoder that publishes a side tensor and named
columns, and a decoder that reads it are registered from this file alone, trained, saved, loaded and used."""

from __future__ import annotations

import random
from typing import Any, Literal

import numpy as np
import pytest
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.batching import make_batches
from seqlab.data.readers import read_conll
from seqlab.decoders import DECODERS, Decoded, Decoder, DecoderConfig, NoExactNBest, TagSet
from seqlab.encoders import ENCODERS, Encoder, EncoderConfig
from seqlab.errors import SeqlabError
from seqlab.features import FEATURES, FeatureConfig, FeatureModule, Featurizer
from seqlab.nn.context import Context
from tests.conftest import tiny_config, train_tiny

# ----- a toy featurizer: the token's length, bucketed; it reports a length of its own -----------------


@FEATURES.register
class ToyLengthConfig(FeatureConfig):
    type: Literal["toy_length"] = "toy_length"
    dim: int = Field(4, gt=0, le=64, description="embedding size of a length bucket")
    buckets: int = Field(8, gt=1, le=64, description="lengths >= buckets - 1 share the last bucket")

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> ToyLengthFeaturizer:
        return ToyLengthFeaturizer(name, self)


class ToyLengthEmbedding(FeatureModule):
    def __init__(self, buckets: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(buckets + 1, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        return self.embed(inputs["bucket"])


class ToyLengthFeaturizer(Featurizer):
    config: ToyLengthConfig

    def state(self) -> dict:
        return {"buckets": self.config.buckets}

    def load_state(self, state: Any, where: str) -> None:
        if state != {"buckets": self.config.buckets}:
            raise SeqlabError(f"{where}: bucket count differs from the config")

    def encode(self, sentence) -> np.ndarray:
        return np.array([1 + min(len(t), self.config.buckets - 1) for t in sentence.tokens], dtype=np.int64)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        out = torch.zeros(len(items), seq_len, dtype=torch.long)
        for i, a in enumerate(items):
            out[i, : len(a)] = torch.from_numpy(a)
        return {"bucket": out}

    def size(self, encoded: np.ndarray) -> int:
        return 2 * len(encoded)  # e.g. a lattice: more positions than tokens

    def module(self) -> ToyLengthEmbedding:
        return ToyLengthEmbedding(self.config.buckets, self.config.dim)


# ----- a toy encoder: a projection, the sentence mean published and appended as named columns -------


@ENCODERS.register
class ToyMeanConfig(EncoderConfig):
    type: Literal["toy_mean"] = "toy_mean"
    size: int = Field(16, gt=0, le=1024, description="projection size")

    def output_dim(self, input_dim: int) -> int:
        return 2 * self.size

    def published_sizes(self, input_dim: int) -> dict[str, int]:
        return {"sentence_mean": self.size}

    def build(self, input_dim: int) -> ToyMeanEncoder:
        return ToyMeanEncoder(input_dim, self.size)


class ToyMeanEncoder(Encoder):
    def __init__(self, input_dim: int, size: int):
        super().__init__()
        self.proj = nn.Linear(input_dim, size)
        self.output_dim = 2 * size
        self.columns = {"local": (0, size), "global": (size, 2 * size)}

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        h = torch.tanh(self.proj(x)) * ctx.mask.unsqueeze(-1)  # (batch, seq, size)
        g = h.sum(1) / ctx.lengths.unsqueeze(-1)  # (batch, size): mean over real tokens
        ctx.publish("sentence_mean", g)
        return torch.cat([h, g.unsqueeze(1).expand_as(h)], dim=-1)


# ----- a toy decoder: softmax over [features; the published mean] -----------------------------------


@DECODERS.register
class ToyDecoderConfig(DecoderConfig):
    type: Literal["toy_softmax"] = "toy_softmax"

    def build(self, input_dim: int, tags: TagSet, published: dict[str, int]) -> ToyDecoder:
        return ToyDecoder(input_dim, len(tags))


class ToyDecoder(Decoder):
    def __init__(self, input_dim: int, num_tags: int):
        super().__init__()
        self.proj = nn.Linear(input_dim + input_dim // 2, num_tags)  # [features; sentence mean]
        self.seen_global = False

    def _logits(self, features: Tensor, ctx: Context) -> Tensor:
        g = ctx.latest("sentence_mean")  # published by the encoder
        self.seen_global = g is not None
        return self.proj(torch.cat([features, g.unsqueeze(1).expand(-1, features.shape[1], -1)], -1))

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        nll = nn.functional.cross_entropy(self._logits(features, ctx).transpose(1, 2), tags, reduction="none")
        return (nll * mask).sum(1)

    def decode(self, features: Tensor, mask: Tensor, ctx: Context) -> Decoded:
        best = self._logits(features, ctx).log_softmax(-1).max(-1)
        return Decoded(best.indices.masked_fill(~mask, 0), (best.values * mask).sum(1))


def toy_config(path):
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["toy"] = {"type": "toy_length", "dim": 4}
    raw["model"]["encoders"] = [{"type": "bilstm", "hidden": 32, "dropout": 0.0}, {"type": "toy_mean", "size": 24}]
    raw["model"]["decoder"] = {"type": "toy_softmax"}
    raw["train"].update(batch_length="toy", batch_tokens=120, batch_size=10, max_epochs=25)
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "toy", toy_config)


def test_toy_model_trains_saves_loads_predicts(toy_run, tmp_path):
    path, run, result = toy_run
    assert result.dev["f1"] > 90.0  # it learned
    tagger = Tagger.load(run / "model")
    assert tagger.net.decoder.seen_global is False
    sentences = read_conll(path, label_column=None)
    before = tagger.predict_tags(sentences)
    assert tagger.net.decoder.seen_global  # the decoder read the tensor the encoder published
    tagger.save(tmp_path / "copy")
    again = Tagger.load(tmp_path / "copy")
    assert again.predict_tags(sentences) == before
    assert again.predict_tags(sentences, batch_size=1) == before
    assert again.info()["features"] == {"word": "words", "char": "chars", "casing": "casing", "toy": "toy_length"}


def test_toy_batches_budget_by_the_featurizer_length(toy_run):
    path, run, _ = toy_run
    tagger = Tagger.load(run / "model")
    encoded = tagger.encode(read_conll(path, label_column=2), with_tags=True)
    assert all(e.sizes["toy"] == 2 * e.length for e in encoded)
    batches = make_batches(
        encoded, tagger.featurizers, batch_tokens=120, shuffle=True, rng=random.Random(0), length="toy"
    )
    assert sorted(i for b in batches for i in b.index) == list(range(len(encoded)))
    for b in batches:
        assert len(b.index) == 1 or len(b.index) * 2 * b.mask.shape[1] <= 120


def test_toy_named_columns_can_be_ablated(toy_run):
    path, run, _ = toy_run
    tagger = Tagger.load(run / "model")
    assert tagger.net.column_names() == {"local": 1, "global": 1}
    batch = make_batches(tagger.encode(read_conll(path, label_column=None)[:4]), tagger.featurizers, 4)[0]
    tagger.net.eval()
    with torch.no_grad():
        full = tagger.net(batch)
        ablated = tagger.net(batch, ablate=("global",))
    assert torch.equal(ablated.features[..., 24:], torch.zeros_like(ablated.features[..., 24:]))
    assert torch.equal(ablated.features[..., :24], full.features[..., :24])
    assert "encoders.1.sentence_mean" in full.published
    with pytest.raises(SeqlabError, match="local, global"):
        tagger.net(batch, ablate=("C1",))


def test_decoder_without_exact_nbest_says_so(toy_run):
    _, run, _ = toy_run
    tagger = Tagger.load(run / "model")
    one = tagger.predict(["He reckons the deficit will narrow ."], nbest=1)[0]
    assert len(one.nbest) == 1 and one.nbest[0].tags == one.tags
    with pytest.raises(NoExactNBest, match="exact 3-best"):
        tagger.predict(["He reckons the deficit will narrow ."], nbest=3)


def test_unregistered_type_in_a_config_names_the_key():
    raw = {"data": {"train": "x.txt"}, "model": {"encoders": [{"type": "bilstm"}, {"type": "transformer_xl"}]}}
    with pytest.raises(SeqlabError, match=r"model\.encoders\.1'.*unknown encoder type 'transformer_xl'"):
        config_from_dict(raw)
