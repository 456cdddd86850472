"""GCDT (paper 004): the L-GRU and T-GRU equations, deep transition, global context pooling, and the
label decoder's beam search against exhaustive search; the whole model learns, saves and loads."""

from __future__ import annotations

import itertools

import pytest
import torch

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.readers import read_conll
from seqlab.decoders import LabelDTConfig, TagSet
from seqlab.encoders import GlobalContextConfig
from seqlab.errors import SeqlabError
from seqlab.nn.context import Context
from seqlab.nn.dt import DTRNN, BiDTRNN, TGRUCell
from seqlab.nn.lstm import gather_steps, reversal_index
from tests.conftest import (
    assert_same_on_two_threads,
    assert_save_load_identical,
    tiny_config,
    train_tiny,
)

sig = torch.sigmoid


def test_lgru_equations():
    torch.manual_seed(0)
    n, d = 4, 3
    rnn = DTRNN(d, n, transitions=0)
    for p in rnn.parameters():  # non-zero biases too
        torch.nn.init.normal_(p)
    x, h = torch.randn(2, d), torch.randn(2, n)
    W = rnn.x_proj.weight.split(n)  # W_xr, W_xz, W_xl, W_xh, W_x
    bx = rnn.x_proj.bias.split(n)
    U = rnn.lgru.hh.weight.split(n)  # W_hr, W_hz, W_hl, W_hh
    bu = rnn.lgru.hh.bias.split(n)
    lin = lambda i, v, j, u: v @ W[i].T + bx[i] + u @ U[j].T + bu[j]  # noqa: E731
    r, z, l_gate = sig(lin(0, x, 0, h)), sig(lin(1, x, 1, h)), sig(lin(2, x, 2, h))  # Eqs. 18-20
    cand = torch.tanh(x @ W[3].T + bx[3] + r * (h @ U[3].T + bu[3])) + l_gate * (x @ W[4].T + bx[4])  # Eq. 17
    want = (1 - z) * h + z * cand  # Eq. 16
    torch.testing.assert_close(rnn.lgru(rnn.x_proj(x), h), want)


def test_tgru_equations():
    torch.manual_seed(1)
    cell = TGRUCell(4)
    torch.nn.init.normal_(cell.hh.bias)
    h = torch.randn(3, 4)
    Wr, Wz, Wh = cell.hh.weight.split(4)
    br, bz, bh = cell.hh.bias.split(4)
    r, z = sig(h @ Wr.T + br), sig(h @ Wz.T + bz)  # Eqs. 23-24
    want = (1 - z) * h + z * torch.tanh(r * (h @ Wh.T + bh))  # Eqs. 21-22
    torch.testing.assert_close(cell(h), want)


def test_dt_with_no_transition_is_an_lgru_and_transitions_chain():
    torch.manual_seed(2)
    x = torch.randn(2, 5, 3)
    rnn = DTRNN(3, 4, transitions=2)
    h = torch.zeros(2, 4)
    outs = []
    for t in range(5):  # Eqs. 14-15 written out: one L-GRU, then T-GRU 1 and 2, per token
        h = rnn.tgrus[1](rnn.tgrus[0](rnn.lgru(rnn.x_proj(x[:, t]), h)))
        outs.append(h)
    torch.testing.assert_close(rnn(x), torch.stack(outs, 1))
    plain = DTRNN(3, 4, transitions=0)
    h = torch.zeros(2, 4)
    for t in range(5):
        h = plain.lgru(plain.x_proj(x[:, t]), h)
    torch.testing.assert_close(plain(x)[:, -1], h)


def _per_direction(rnn: BiDTRNN, x, lengths):
    """BiDTRNN written as its two DTRNNs one after the other (the computation before the fused loop)."""
    index = reversal_index(lengths, x.shape[1])
    back = gather_steps(rnn.bwd(gather_steps(x, index)), index)
    return torch.cat([rnn.fwd(x), back], dim=-1)


BIDT_CASES = [
    {"transitions": 0},
    {"transitions": 1},
    {"transitions": 4},
    {"transitions": 0, "layer_norm": True},
    {"transitions": 1, "layer_norm": True},
    {"transitions": 4, "layer_norm": True},
    {"transitions": 2, "position_signal": True},
    {"transitions": 2, "cell": "gru"},
]


def _bidt(seed, options):
    torch.manual_seed(seed)
    rnn = BiDTRNN(5, 6, **options)
    with torch.no_grad():  # the two directions and every gain and bias different, so a swap would show
        for p in rnn.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn_like(p))
    lengths = torch.tensor([7, 3, 5, 1])
    mask = torch.arange(7)[None, :] < lengths[:, None]  # (4, 7), right-padded
    x = torch.randn(4, 7, 5)
    x = torch.where(mask[..., None], x, 5 * torch.randn_like(x))  # large values at padded positions
    return rnn, x, lengths, mask


@pytest.mark.parametrize("options", BIDT_CASES, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_fused_bidt_equals_the_two_directions_run_apart(options):
    """The one-loop BiDTRNN gives the outputs of its two DTRNNs run one after the other, and the same
    gradient for every parameter and for the input, on a right-padded batch of four lengths."""
    rnn, x, lengths, mask = _bidt(5, options)
    weights = torch.randn(4, 7, 12) * mask[..., None]  # a loss that reads every real output
    results = []
    for run in (rnn, lambda x, lengths: _per_direction(rnn, x, lengths)):
        rnn.zero_grad()
        xg = x.clone().requires_grad_()
        out = run(xg, lengths)
        (out * weights).sum().backward()
        grads = {name: p.grad.clone() for name, p in rnn.named_parameters()}
        results.append((out.detach(), xg.grad, grads))
    (out, xgrad, grads), (want, want_xgrad, want_grads) = results
    assert out.shape == (4, 7, 12)
    torch.testing.assert_close(out[mask], want[mask], rtol=0, atol=1e-5)
    torch.testing.assert_close(xgrad, want_xgrad, rtol=0, atol=1e-5)
    assert grads.keys() == want_grads.keys() and all(n.startswith(("fwd.", "bwd.")) for n in grads)
    for name in grads:
        assert grads[name].abs().sum() > 0, name  # each parameter is reached
        torch.testing.assert_close(grads[name], want_grads[name], rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize("options", BIDT_CASES, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_fused_bidt_outputs_do_not_depend_on_padding(options):
    rnn, x, lengths, _ = _bidt(6, options)
    with torch.no_grad():
        batch = rnn(x, lengths)
        for b, n in enumerate(lengths.tolist()):
            alone = rnn(x[b : b + 1, :n], lengths[b : b + 1])
            torch.testing.assert_close(batch[b, :n], alone[0], rtol=0, atol=1e-5)


def test_fused_bidt_cell_dropout_masks_each_direction():
    """In training, cell dropout reaches both directions (one draw of (2, batch, hidden) per transition)."""
    rnn, x, lengths, mask = _bidt(7, {"transitions": 2, "cell_dropout": 0.5})
    with torch.no_grad():
        plain = rnn.eval()(x, lengths)
        torch.manual_seed(0)
        dropped = rnn.train()(x, lengths)
    assert dropped.shape == plain.shape
    for half in (slice(0, 6), slice(6, 12)):
        assert not torch.allclose(dropped[..., half][mask], plain[..., half][mask])


@pytest.mark.parametrize("pooling", ["mean", "max", "attention"])
def test_global_context_ignores_padding(pooling):
    torch.manual_seed(3)
    layer = GlobalContextConfig(hidden=6, transitions=1, pooling=pooling, dropout=0.0).build(5).eval()
    x = torch.randn(1, 4, 5)
    padded = torch.cat([x, 9 * torch.randn(1, 3, 5)], 1)
    a, b = Context.of(torch.ones(1, 4, dtype=torch.bool)), Context.of(torch.tensor([[1] * 4 + [0] * 3]).bool())
    with torch.no_grad():
        out_a, out_b = layer(x, a), layer(padded, b)
    torch.testing.assert_close(a.published["global"], b.published["global"])
    torch.testing.assert_close(out_a, out_b[:, :4])
    assert out_a.shape == (1, 4, 11) and layer.columns["g"] == (5, 11)


# ----- beam search ------------------------------------------------------------------------------------

TAGS = TagSet(["O", "B-X", "I-X"], "BIO")


def _decoder(seed, **kw):
    torch.manual_seed(seed)
    dec = LabelDTConfig(hidden=6, label_dim=3, transitions=1, dropout=0.0, **kw).build(5, TAGS, {}).eval()
    feats = torch.randn(3, 3, 5)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    return dec, feats, mask, Context.of(mask)


def _exhaustive(dec, feats, mask, ctx, b):
    """Every label sequence of sentence b with its log-probability, from teacher forcing, best first."""
    n = int(mask[b].sum())
    seqs = []
    for y in itertools.product(range(3), repeat=n):
        tags = torch.zeros(1, 3, dtype=torch.long)
        tags[0, :n] = torch.tensor(y)
        with torch.no_grad():
            score = -dec.loss(feats[b : b + 1], tags, mask[b : b + 1], ctx).item()
        seqs.append((list(y), score))
    return sorted(seqs, key=lambda s: -s[1])


@pytest.mark.parametrize("seed", range(3))
def test_full_beam_equals_exhaustive_search(seed):
    dec, feats, mask, ctx = _decoder(seed, beam=9)  # 9 = 3 labels ^ (3 tokens - 1): every prefix kept
    with torch.no_grad():
        paths = dec.nbest(feats, mask, ctx, 5)
        best = dec.decode(feats, mask, ctx)
    for b in range(3):
        want = _exhaustive(dec, feats, mask, ctx, b)[:5]
        assert [p.tags for p in paths[b]] == [w for w, _ in want]
        assert [p.score for p in paths[b]] == pytest.approx([s for _, s in want], abs=1e-4)
        scores = [p.score for p in paths[b]]
        assert scores == sorted(scores, reverse=True)
        assert best.tags[b, : int(mask[b].sum())].tolist() == want[0][0]


@pytest.mark.parametrize("seed", range(3))
def test_beam_one_is_greedy(seed):
    dec, feats, mask, ctx = _decoder(seed, beam=1)
    with torch.no_grad():
        got = dec.decode(feats, mask, ctx).tags
    for b in range(3):
        n = int(mask[b].sum())
        prefix: list[int] = []
        for t in range(n):  # the best next label given the greedy prefix, by teacher-forced scores

            def score(y):
                tags = torch.zeros(1, 3, dtype=torch.long)
                tags[0, : t + 1] = torch.tensor(prefix + [y])  # noqa: B023 - called in this iteration
                m = torch.zeros(1, 3, dtype=torch.bool)
                m[0, : t + 1] = True  # noqa: B023
                with torch.no_grad():
                    return -dec.loss(feats[b : b + 1], tags, m, ctx).item()  # noqa: B023

            prefix.append(max(range(3), key=score))
        assert got[b, :n].tolist() == prefix


def test_constrained_beam_gives_valid_sequences_and_batch_invariance():
    dec, feats, mask, ctx = _decoder(4, beam=3, constrained=True)
    with torch.no_grad():
        paths = dec.nbest(feats, mask, ctx, 3)
        for b in range(3):
            one = dec.nbest(
                feats[b : b + 1, : int(mask[b].sum())],
                mask[b : b + 1, : int(mask[b].sum())],
                Context.of(mask[b : b + 1, : int(mask[b].sum())]),
                3,
            )[0]
            assert [p.tags for p in one] == [p.tags for p in paths[b]]
    for sentence in paths:
        for p in sentence:
            assert not (p.tags[0] == 2 or any(a == 0 and c == 2 for a, c in zip(p.tags, p.tags[1:])))


def test_decoder_needing_global_without_the_layer(tmp_path):
    raw = tiny_config(tmp_path / "x.txt").model_dump(mode="json")
    raw["model"]["decoder"] = {"type": "label_dt", "global_input": "softmax_input"}
    with pytest.raises(SeqlabError, match=r"model\.decoder\.global_input'.*needs a global_context"):
        config_from_dict(raw)


# ----- the whole model --------------------------------------------------------------------------------


def gcdt_config(path, placement="encoder_input", global_input="none"):
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["encoders"] = [
        {"type": "global_context", "hidden": 16, "transitions": 2, "dropout": 0.0, "placement": placement},
        {"type": "dt", "hidden": 32, "transitions": 2, "dropout": 0.0},
    ]
    raw["model"]["decoder"] = {
        "type": "label_dt",
        "hidden": 24,
        "label_dim": 8,
        "transitions": 1,
        "beam": 3,
        "dropout": 0.0,
        "global_input": global_input,
    }
    raw["train"]["max_epochs"] = 30
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def gcdt_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "gcdt", gcdt_config)


def test_gcdt_overfits_saves_loads(gcdt_run, tmp_path):
    path, run_dir, result = gcdt_run
    assert result.dev["f1"] > 97.0
    tagger = assert_save_load_identical(run_dir / "model", path, tmp_path)
    pred = tagger.predict(["He reckons the deficit will narrow ."], nbest=3)[0]
    assert pred.nbest[0].tags == pred.tags and len(pred.nbest) == 3
    assert pred.nbest[0].score >= pred.nbest[1].score >= pred.nbest[2].score
    pred = tagger.predict(["He reckons the deficit will narrow ."], confidence=True)[0]
    assert pred.confidence_kind.startswith("unavailable: the LabelDTDecoder has no exact")  # says why, no guess
    assert pred.token_confidence is None and all(s.confidence is None for s in pred.spans)


def test_gcdt_batches_side_by_side_predict_what_one_thread_does(gcdt_run):
    path, run_dir, _ = gcdt_run
    sentences = read_conll(path, label_column=None)
    assert_same_on_two_threads(Tagger.load(run_dir / "model"), sentences, nbest=3)


@pytest.mark.parametrize(
    "placement,global_input", [("decoder_input", "decoder_input"), ("softmax_input", "softmax_input")]
)
def test_other_global_placements_learn(tmp_path, placement, global_input):
    from seqlab import train
    from tests.conftest import SAMPLE, first_sentences

    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = gcdt_config(path, placement, global_input).model_dump(mode="json")
    raw["train"]["max_epochs"] = 12
    result = train(config_from_dict(raw), tmp_path / "run", progress=False)
    assert result.dev["f1"] > 80.0
