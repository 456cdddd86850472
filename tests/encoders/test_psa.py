"""Tests of the position-aware self-attention / context fusion layer (seqlab.encoders.psa)."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import TypeAdapter, ValidationError
from torch import nn

from seqlab.encoders import psa
from seqlab.encoders.psa import (
    AdditiveScores,
    PSAFusionConfig,
    PSAFusionEncoder,
    SANConfig,
    additive_scores_traced,
    gaussian_bias,
    relative_distance_index,
    signed_relative_index,
)
from seqlab.nn.context import Context

VARIANTS = ["journal", "early"]


def run(layer, x, mask):
    """The layer as the network calls it: a context made from the mask."""
    return layer(x, Context.of(mask))


def explain(layer, x, mask):
    """Output and the tensors the layer published ("attention", "gate")."""
    ctx = Context.of(mask)
    return layer(x, ctx), ctx.published


def _layer(dim: int = 6, seed: int = 0, **kw) -> PSAFusionEncoder:
    torch.manual_seed(seed)
    layer = PSAFusionConfig(**kw).build(dim)
    layer.eval()
    return layer


def _perturb_mixing(layer: PSAFusionEncoder) -> None:
    """Move the trade-off parameters off their symmetric init so a wrong coefficient shows."""
    att = layer.attention
    with torch.no_grad():
        if att.variant == "journal":
            att.alpha_logit.fill_(0.7)
            att.rel_global.bias.fill_(0.3)
        else:
            att.mix_logits.copy_(torch.tensor([0.2, -0.5, 0.9]))


def _mask(lengths: list[int], t: int) -> torch.Tensor:
    return torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]


# --------------------------------------------------------------------------------------------
# hand-computed position helpers
# --------------------------------------------------------------------------------------------


def test_gaussian_bias_matches_hand_values_k2():
    # k = 2 -> eps = 1 -> G_ij = -(i-j)^2 / 2
    expected = torch.tensor(
        [
            [0.0, -0.5, -2.0, -4.5, -8.0],
            [-0.5, 0.0, -0.5, -2.0, -4.5],
            [-2.0, -0.5, 0.0, -0.5, -2.0],
            [-4.5, -2.0, -0.5, 0.0, -0.5],
            [-8.0, -4.5, -2.0, -0.5, 0.0],
        ]
    )
    torch.testing.assert_close(gaussian_bias(5, 2), expected)
    # k = 10 -> eps = 5 -> distance 5 gives -25/50
    assert gaussian_bias(6, 10)[0, 5].item() == pytest.approx(-0.5)


def test_relative_distance_index_is_clipped_absolute_distance():
    expected = torch.tensor(
        [
            [0, 1, 2, 2, 2],
            [1, 0, 1, 2, 2],
            [2, 1, 0, 1, 2],
            [2, 2, 1, 0, 1],
            [2, 2, 2, 1, 0],
        ]
    )
    assert torch.equal(relative_distance_index(5, 2), expected)


def test_signed_relative_index_is_clipped_offset_shifted_by_r():
    # clamp(i - j, -2, 2) + 2
    expected = torch.tensor(
        [
            [2, 1, 0, 0, 0],
            [3, 2, 1, 0, 0],
            [4, 3, 2, 1, 0],
            [4, 4, 3, 2, 1],
            [4, 4, 4, 3, 2],
        ]
    )
    assert torch.equal(signed_relative_index(5, 2), expected)


# --------------------------------------------------------------------------------------------
# the attention against an explicit per-pair reference of the paper's equations
# --------------------------------------------------------------------------------------------


def _reference_attention(layer: PSAFusionEncoder, x: torch.Tensor) -> torch.Tensor:
    """Eqs. 4-11 (journal) / conf. Eqs. 7-12 (early) pair by pair, for one unpadded sentence."""
    att = layer.attention
    n, k = x.shape[0], att.window
    r, eps = k, k / 2
    w1, w2, b, w = att.w1.weight, att.w2.weight, att.w2.bias, att.score.weight[0]
    scores = torch.full((n, n), -math.inf)
    for i in range(n):
        for j in range(n):
            f = w @ torch.tanh(w1 @ x[i] + w2 @ x[j] + b)
            g = -((i - j) ** 2) / (2 * eps**2)
            if att.variant == "journal":
                m = min(abs(i - j), r)
                p = x[i] @ att.rel[m] + att.rel_global.weight[0] @ att.rel[m] + att.rel_global.bias[0]
                alpha = torch.sigmoid(att.alpha_logit)
                psi = alpha * g + (1 - alpha) * p
            else:
                c = max(-r, min(r, i - j))
                p = x[i] @ att.rel[c + r]
                a = torch.softmax(att.mix_logits, 0)  # (M, P, G)
                psi = a[1] * p + a[2] * g
            if i != j:  # M: -inf on the diagonal
                scores[i, j] = f + psi
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_attention_matches_reference_equations(variant):
    layer = _layer(dim=4, variant=variant, window=2)
    _perturb_mixing(layer)
    torch.manual_seed(1)
    x = torch.randn(1, 5, 4)
    with torch.no_grad():
        _, info = explain(layer, x, torch.ones(1, 5, dtype=torch.bool))
        expected = _reference_attention(layer, x[0])
    torch.testing.assert_close(info["attention"][0], expected, rtol=1e-5, atol=1e-6)


def test_early_variant_distinguishes_left_from_right_journal_does_not():
    """The signed W3 table gives different biases to j = i-1 and j = i+1; |i-j| indexing cannot."""
    for variant, differs in (("early", True), ("journal", False)):
        layer = _layer(dim=4, variant=variant, window=2)
        x = torch.randn(1, 5, 4)
        p = layer.attention.position_scores(x)[0]  # (T, T)
        assert (not torch.allclose(p[2, 1], p[2, 3])) == differs


# --------------------------------------------------------------------------------------------
# masking
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("self_mask", [True, False])
def test_attention_rows_normalised_over_real_tokens(variant, self_mask):
    layer = _layer(variant=variant, self_mask=self_mask)
    lengths = [7, 4, 2]
    x, mask = torch.randn(3, 7, 6), _mask(lengths, 7)
    with torch.no_grad():
        _, info = explain(layer, x, mask)
    attn = info["attention"]
    assert attn.shape == (3, 7, 7)
    for b, n in enumerate(lengths):
        torch.testing.assert_close(attn[b, :n].sum(-1), torch.ones(n))
        assert attn[b, :, n:].abs().sum() == 0  # no weight on padding keys
        assert attn[b, n:].abs().sum() == 0  # padded query rows are all-zero
        diag = torch.diagonal(attn[b, :n, :n])
        if self_mask:
            assert diag.abs().max() == 0
        else:
            assert (diag > 0).all()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("extra", [{}, {"position_encoding": "absolute"}, {"gate": False}])
def test_padding_invariance(variant, extra):
    layer = _layer(variant=variant, **extra)
    torch.manual_seed(3)
    x = torch.randn(2, 9, 6)
    mask = _mask([4, 9], 9)
    alone = x[:1, :4]
    with torch.no_grad():
        batched = run(layer, x, mask)[0, :4]
        single = run(layer, alone, torch.ones(1, 4, dtype=torch.bool))[0]
        # garbage in the padding must not leak either
        x2 = x.clone()
        x2[0, 4:] = 1e3
        batched2 = run(layer, x2, mask)[0, :4]
    torch.testing.assert_close(batched, single, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(batched2, single, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_token_sentence_has_no_nan(variant):
    torch.manual_seed(0)
    layer = PSAFusionConfig(variant=variant).build(6)  # train mode: dropout on
    x = torch.randn(2, 5, 6, requires_grad=True)
    mask = _mask([1, 5], 5)
    out, info = explain(layer, x, mask)
    assert torch.isfinite(out).all()
    assert info["attention"][0].abs().max() == 0  # the only key is the token itself: masked by M
    out[mask].pow(2).sum().backward()
    assert torch.isfinite(x.grad).all()
    for name, p in layer.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name
    # a batch made only of a 1-token sentence
    x1 = torch.randn(1, 1, 6, requires_grad=True)
    out1 = run(layer, x1, torch.ones(1, 1, dtype=torch.bool))
    out1.sum().backward()
    assert torch.isfinite(out1).all() and torch.isfinite(x1.grad).all()


# --------------------------------------------------------------------------------------------
# ablation switches
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    "switch",
    [
        {"self_mask": False},
        {"gaussian": False},
        {"position_bias": False},
        {"use_psi": False},
        {"position_encoding": "absolute"},
        {"fc_layers": False},
    ],
)
def test_each_switch_changes_the_output(variant, switch):
    full = _layer(variant=variant, window=3)
    _perturb_mixing(full)
    ablated = _layer(variant=variant, window=3, **switch)
    missing, _unexpected = ablated.load_state_dict(full.state_dict(), strict=False)
    assert not missing  # same weights wherever the ablated layer has them
    torch.manual_seed(5)
    x, mask = torch.randn(2, 6, 6), _mask([6, 5], 6)
    with torch.no_grad():
        assert not torch.allclose(run(full, x, mask), run(ablated, x, mask), atol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_use_psi_false_is_plain_additive_attention(variant):
    layer = _layer(dim=4, variant=variant, use_psi=False, window=2)
    att = layer.attention
    torch.manual_seed(2)
    x = torch.randn(1, 5, 4)
    mask = _mask([4], 5)
    with torch.no_grad():
        _, info = explain(layer, x, mask)
        q = x[0, :4] @ att.w1.weight.T
        k = x[0, :4] @ att.w2.weight.T + att.w2.bias
        f = torch.tanh(q[:, None] + k[None]) @ att.score.weight[0]  # (4, 4), diagonal allowed
        expected = torch.softmax(f, -1)
    torch.testing.assert_close(info["attention"][0, :4, :4], expected, rtol=1e-5, atol=1e-6)


def test_ablated_factor_coefficients():
    """early: sum(a) = 1 over the factors still present; journal: alpha is not renormalised."""
    logits = torch.tensor([0.2, -0.5, 0.9])  # (M, P, G)
    early = _layer(variant="early", gaussian=False)
    early.attention.mix_logits.data.copy_(logits)
    coef = early.attention.mixing()
    assert set(coef) == {"P"}
    assert coef["P"].item() == pytest.approx(torch.softmax(logits[:2], 0)[1].item())
    no_mask = _layer(variant="early", self_mask=False)
    no_mask.attention.mix_logits.data.copy_(logits)
    coef = no_mask.attention.mixing()
    assert (coef["P"] + coef["G"]).item() == pytest.approx(1.0)
    journal = _layer(variant="journal", position_bias=False)
    journal.attention.alpha_logit.data.fill_(0.7)
    assert journal.attention.mixing()["G"].item() == pytest.approx(torch.sigmoid(torch.tensor(0.7)).item())


def test_gate_off_concatenates_input_and_context():
    layer = _layer(gate=False)
    assert layer.output_dim == 12
    x, mask = torch.randn(2, 5, 6), _mask([5, 3], 5)
    with torch.no_grad():
        out, info = explain(layer, x, mask)
    assert out.shape == (2, 5, 12) and "gate" not in info
    torch.testing.assert_close(out[..., :6], x)
    expected_context = torch.tanh(layer.fc2(torch.tanh(layer.fc1(info["attention"] @ x))))
    torch.testing.assert_close(out[..., 6:], expected_context)


def test_gate_is_eq14_convex_combination():
    layer = _layer()
    x, mask = torch.randn(2, 5, 6), _mask([5, 3], 5)
    with torch.no_grad():
        out, info = explain(layer, x, mask)
        s = torch.tanh(layer.fc2(torch.tanh(layer.fc1(info["attention"] @ x))))
    lam = info["gate"]
    assert lam.shape == (2, 5, 6) and ((lam > 0) & (lam < 1)).all()
    torch.testing.assert_close(out, lam * x + (1 - lam) * s)
    torch.testing.assert_close(run(layer, x, mask), out)  # forward and explain agree


# --------------------------------------------------------------------------------------------
# parameters and gradients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_trade_off_and_position_table(variant):
    layer = _layer(variant=variant, window=3)
    layer.train()
    x, mask = torch.randn(3, 8, 6), _mask([8, 6, 2], 8)
    run(layer, x, mask).pow(2).sum().backward()
    att = layer.attention
    trade_off = att.alpha_logit if variant == "journal" else att.mix_logits
    for p in (trade_off, att.rel):
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    if variant == "journal":
        assert att.rel_global.weight.grad.abs().sum() > 0  # v of the global term
        assert 0 < att.alpha.item() < 1
    else:
        # every logit moves, the M logit through the sum-to-one normalisation
        assert (att.mix_logits.grad.abs() > 0).all()


def test_initialisation_glorot_weights_zero_biases():
    layer = _layer(dim=20)
    for name, p in layer.named_parameters():
        if name.endswith("bias"):
            assert p.abs().max() == 0, name
    w = layer.attention.w1.weight
    assert w.abs().max() <= math.sqrt(6 / 40) + 1e-6 and w.std() > 0.05


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------


def test_configs_are_strict_frozen_and_documented():
    from seqlab.encoders import ENCODERS

    assert ENCODERS.get("psa_fusion") is PSAFusionConfig and ENCODERS.get("san") is SANConfig
    for cls in (PSAFusionConfig, SANConfig):
        for name, field in cls.model_fields.items():
            assert name == "type" or field.description, f"{cls.__name__}.{name} lacks a description"
    with pytest.raises(ValidationError):
        PSAFusionConfig(windw=3)
    with pytest.raises(ValidationError):
        PSAFusionConfig(variant="late")
    with pytest.raises(ValidationError):
        PSAFusionConfig(window=0)
    cfg = PSAFusionConfig()
    with pytest.raises(ValidationError):
        cfg.window = 4  # type: ignore[misc]
    assert cfg.window == 10 and cfg.attention_dropout == 0.2 and cfg.variant == "journal"


def test_union_dispatch_on_type():
    from seqlab.encoders import ENCODERS

    adapter = TypeAdapter(list[ENCODERS.field])
    layers = adapter.validate_python([{"type": "san", "variant": "early"}, {"type": "psa_fusion", "gate": False}])
    assert isinstance(layers[0], SANConfig) and layers[0].variant == "early"
    assert isinstance(layers[1], PSAFusionConfig) and layers[1].build(8).output_dim == 16
    assert isinstance(layers[0].build(8), PSAFusionEncoder)


# --------------------------------------------------------------------------------------------
# it learns
# --------------------------------------------------------------------------------------------


def _neighbour_max_task(batch: int, t: int, vocab: int, gen: torch.Generator):
    tokens = torch.randint(0, vocab, (batch, t), generator=gen)
    left = torch.cat([torch.full((batch, 1), -1), tokens[:, :-1]], 1)  # token i-1 (none at i=0)
    right = torch.cat([tokens[:, 1:], torch.full((batch, 1), -1)], 1)  # token i+1 (none at the end)
    return tokens, torch.maximum(left, right)


@pytest.mark.parametrize("variant", VARIANTS)
def test_overfits_a_task_that_needs_context(variant):
    """Label of token i = the larger id among tokens i-1 and i+1: not a function of x_i."""
    vocab, t, batch, dim = 8, 8, 32, 16
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    tokens, labels = _neighbour_max_task(batch, t, vocab, gen)
    # the best context-free tagger (majority label per token id) is far from the target
    context_free = (
        sum(torch.bincount(labels[tokens == v], minlength=vocab).max().item() for v in range(vocab)) / labels.numel()
    )
    assert context_free < 0.5

    encoder = PSAFusionConfig(variant=variant, window=2).build(dim)
    model = nn.ModuleDict({"emb": nn.Embedding(vocab, dim), "enc": encoder, "out": nn.Linear(dim, vocab)})
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)

    def accuracy(tok: torch.Tensor, lab: torch.Tensor) -> float:
        with torch.no_grad():
            pred = model["out"](model["enc"](model["emb"](tok), Context.of(torch.ones_like(tok, dtype=torch.bool))))
        return (pred.argmax(-1) == lab).float().mean().item()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    try:
        mask = torch.ones(batch, t, dtype=torch.bool)
        for _ in range(200):
            opt.zero_grad()
            logits = model["out"](model["enc"](model["emb"](tokens), Context.of(mask)))
            nn.functional.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1)).backward()
            opt.step()
        model.eval()
        train_acc = accuracy(tokens, labels)
        held_out_acc = accuracy(*_neighbour_max_task(256, t, vocab, gen))
    finally:
        torch.set_num_threads(threads)
    assert train_acc > 0.95, train_acc
    assert held_out_acc > 0.85, held_out_acc  # it learned the rule, not the sentences


@pytest.mark.parametrize("block", [1 << 18, 40, 7, 1])  # whole batch, sentences, query rows, one row
def test_additive_scores_match_broadcasting_and_gradcheck(monkeypatch, block):
    """The block-wise scores and their hand-written backward against autograd on the plain formula."""
    monkeypatch.setattr(psa, "BLOCK_ELEMENTS", block)
    gen = torch.Generator().manual_seed(0)
    q, k, w = (
        torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)
        for shape in ((3, 4, 2), (3, 4, 2), (2,))
    )
    plain = torch.tanh(q[:, :, None] + k[:, None]) @ w  # (3, 4, 4)
    assert torch.allclose(AdditiveScores.apply(q, k, w), plain)
    assert torch.autograd.gradcheck(AdditiveScores.apply, (q, k, w))


def test_additive_scores_by_the_sigmoid_identity_are_tanh_scores_to_rounding():
    """w^T tanh(q_i + k_j) computed as 2 w^T sigmoid(2 q_i + 2 k_j) - sum(w), in float32 at the paper's size
    (d = 300): within 2e-6 of the float64 tanh scores, as close as PyTorch's float32 tanh form gets to the
    same order; the traced (export) form gives the blocks' scores; gradients as close to the float64 ones as
    the float32 tanh form's, within a factor of 4."""
    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(3, 20, 300, generator=gen) for _ in range(2))
    w = torch.randn(300, generator=gen) * 0.1
    exact = torch.tanh(q.double()[:, :, None] + k.double()[:, None]) @ w.double()  # (3, 20, 20)
    ours = AdditiveScores.apply(q, k, w)
    tanh_form = torch.tanh(q[:, :, None] + k[:, None]) @ w
    assert (ours.double() - exact).abs().max() < 2e-6
    assert (ours.double() - exact).abs().max() < 4 * (tanh_form.double() - exact).abs().max() + 1e-7
    torch.testing.assert_close(additive_scores_traced(q, k, w), ours, rtol=0, atol=1e-6)
    g = torch.randn(3, 20, 20, generator=gen)

    def grads(scores, dtype):
        leaves = [x.to(dtype).requires_grad_() for x in (q, k, w)]
        return torch.autograd.grad((scores(*leaves) * g.to(dtype)).sum(), leaves)

    tanh_scores = lambda q, k, w: torch.tanh(q[:, :, None] + k[:, None]) @ w  # noqa: E731
    exact_grads = grads(tanh_scores, torch.float64)
    for ours_g, tanh_g, exact_g in zip(
        grads(AdditiveScores.apply, torch.float32), grads(tanh_scores, torch.float32), exact_grads
    ):
        assert (ours_g.double() - exact_g).abs().max() <= 4 * (tanh_g.double() - exact_g).abs().max() + 1e-7


def test_additive_scores_empty_and_single_token():
    for shape in ((0, 3, 4), (2, 0, 4), (2, 1, 4)):
        q = torch.randn(*shape)
        assert AdditiveScores.apply(q, q, torch.randn(4)).shape == (shape[0], shape[1], shape[1])
