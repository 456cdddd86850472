"""Tests of seqlab.crf.crf.CRF against brute-force enumeration on tiny inputs."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqlab.crf.crf import CRF, DISALLOWED_SCORE
from seqlab.crf.partition import alpha_recursion

SETTINGS = settings(max_examples=25, deadline=None)


# ---------------------------------------------------------------- helpers


def make_crf(num_tags: int, seed: int, constrained: bool = False, scale: float = 1.0) -> CRF:
    """A float64 CRF with random (tie-free) parameters; optionally random constraints."""
    g = torch.Generator().manual_seed(seed)
    kwargs = {}
    if constrained:
        allowed = torch.rand(num_tags, num_tags, generator=g) < 0.6
        allowed[:, 0] = True  # tag 0 is always reachable, so some path always exists
        allowed_start = torch.rand(num_tags, generator=g) < 0.6
        allowed_end = torch.rand(num_tags, generator=g) < 0.6
        allowed_start[0] = allowed_end[0] = True
        kwargs = dict(allowed=allowed, allowed_start=allowed_start, allowed_end=allowed_end)
    crf = CRF(num_tags, **kwargs).double()
    with torch.no_grad():
        crf.transitions.copy_(torch.randn(num_tags, num_tags, generator=g, dtype=torch.float64) * scale)
        crf.start_transitions.copy_(torch.randn(num_tags, generator=g, dtype=torch.float64) * scale)
        crf.end_transitions.copy_(torch.randn(num_tags, generator=g, dtype=torch.float64) * scale)
    return crf


def rand_emissions(batch: int, seq_len: int, num_tags: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 1000)
    return torch.randn(batch, seq_len, num_tags, generator=g, dtype=torch.float64) * 2


def is_allowed(crf: CRF, path: tuple[int, ...] | list[int]) -> bool:
    if crf.start_penalty[path[0]] < 0 or crf.end_penalty[path[-1]] < 0:
        return False
    return all(crf.transition_penalty[a, b] == 0 for a, b in zip(path, path[1:]))


def brute_score(crf: CRF, em: torch.Tensor, path) -> float:
    """Score of one path from the raw parameters (plus constraint penalties), em: (L, num_tags)."""
    trans = crf.transitions.detach() + crf.transition_penalty
    start = crf.start_transitions.detach() + crf.start_penalty
    end = crf.end_transitions.detach() + crf.end_penalty
    s = float(start[path[0]]) + float(end[path[-1]])
    for t, y in enumerate(path):
        s += float(em[t, y])
        if t > 0:
            s += float(trans[path[t - 1], y])
    return s


def brute_all(crf: CRF, em: torch.Tensor, only_allowed: bool = False) -> dict[tuple[int, ...], float]:
    seq_len, num_tags = em.shape
    out = {}
    for path in itertools.product(range(num_tags), repeat=seq_len):
        if only_allowed and not is_allowed(crf, path):
            continue
        out[path] = brute_score(crf, em, path)
    return out


def logsumexp(values) -> float:
    values = list(values)
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def padded_batch(lengths: list[int], num_tags: int, seed: int, pad_len: int | None = None):
    """Random emissions (batch, T, N) with a left-aligned mask for ``lengths``; padding is garbage."""
    T = pad_len or max(lengths)
    em = rand_emissions(len(lengths), T, num_tags, seed)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    em = em.masked_fill(~mask[:, :, None], 1e3)  # absurd values on padding
    return em, mask


sizes = st.tuples(st.integers(2, 4), st.integers(1, 4), st.integers(0, 10_000))


# ---------------------------------------------------------------- brute-force agreement


@SETTINGS
@given(sizes)
def test_log_partition_and_score_match_brute_force(args):
    num_tags, seq_len, seed = args
    crf = make_crf(num_tags, seed)
    em = rand_emissions(1, seq_len, num_tags, seed)
    paths = brute_all(crf, em[0])
    assert crf.log_partition(em).item() == pytest.approx(logsumexp(paths.values()), abs=1e-9)

    all_tags = torch.tensor(list(paths), dtype=torch.long).view(-1, seq_len)
    many = em.expand(len(all_tags), -1, -1)
    scores = crf.score(many, all_tags)
    expected = torch.tensor(list(paths.values()), dtype=torch.float64)
    torch.testing.assert_close(scores, expected)
    # probabilities of all sequences sum to one; every nll is >= 0
    nll = crf.nll(many, all_tags)
    assert (nll >= -1e-9).all()
    assert torch.exp(-nll).sum().item() == pytest.approx(1.0, abs=1e-9)


@SETTINGS
@given(sizes, st.integers(1, 6))
def test_decode_and_nbest_match_brute_force(args, k):
    num_tags, seq_len, seed = args
    crf = make_crf(num_tags, seed)
    em = rand_emissions(1, seq_len, num_tags, seed)
    ranked = sorted(brute_all(crf, em[0]).items(), key=lambda kv: -kv[1])

    assert crf.decode(em) == [list(ranked[0][0])]
    assert crf.viterbi_tags(em).tolist() == [list(ranked[0][0])]

    (got,) = crf.nbest(em, None, k)
    want = ranked[:k]
    assert len(got) == len(want) == min(k, num_tags**seq_len)
    for g, (w_tags, w_score) in zip(got, want):
        g_tags, g_score = g.tags, g.score
        assert g_score == pytest.approx(w_score, abs=1e-9)
        assert g_tags == list(w_tags)
    assert len({tuple(p.tags) for p in got}) == len(got)  # distinct


def test_nbest_returns_all_paths_when_k_exceeds_their_number():
    crf = make_crf(2, seed=3)
    em = rand_emissions(1, 1, 2, seed=3)
    (got,) = crf.nbest(em, None, 5)
    assert len(got) == 2
    assert sorted(p.tags for p in got) == [[0], [1]]
    assert got[0].score >= got[1].score


@SETTINGS
@given(sizes)
def test_marginals_match_brute_force(args):
    num_tags, seq_len, seed = args
    crf = make_crf(num_tags, seed)
    em = rand_emissions(1, seq_len, num_tags, seed)
    paths = brute_all(crf, em[0])
    log_z = logsumexp(paths.values())
    expected = torch.zeros(seq_len, num_tags, dtype=torch.float64)
    for path, s in paths.items():
        for t, y in enumerate(path):
            expected[t, y] += math.exp(s - log_z)
    got = crf.marginals(em)[0]
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got.sum(-1), torch.ones(seq_len, dtype=torch.float64))


# ---------------------------------------------------------------- constraints


@SETTINGS
@given(sizes, st.integers(1, 6))
def test_constraints_respected_and_match_brute_force_over_allowed(args, k):
    num_tags, seq_len, seed = args
    crf = make_crf(num_tags, seed, constrained=True)
    em = rand_emissions(1, seq_len, num_tags, seed)
    allowed = brute_all(crf, em[0], only_allowed=True)
    assert allowed  # the fixture guarantees tag 0 everywhere is allowed
    ranked = sorted(allowed.items(), key=lambda kv: -kv[1])

    (best,) = crf.decode(em)
    assert is_allowed(crf, best)
    assert best == list(ranked[0][0])

    (got,) = crf.nbest(em, None, k)
    assert len(got) == min(k, len(ranked))
    for g, (w_tags, w_score) in zip(got, ranked[:k]):
        g_tags, g_score = g.tags, g.score
        assert is_allowed(crf, g_tags)
        assert g_tags == list(w_tags)
        assert g_score == pytest.approx(w_score, abs=1e-9)

    # disallowed paths carry ~0 probability: Z over allowed paths only
    assert crf.log_partition(em).item() == pytest.approx(logsumexp(allowed.values()), abs=1e-6)
    marg = crf.marginals(em)[0]
    torch.testing.assert_close(marg.sum(-1), torch.ones(seq_len, dtype=torch.float64))


def test_constraints_beat_strong_emissions_and_keep_gradients_finite():
    # BIO-like: tag 2 ("I") may only follow 1 ("B") or 2, and may not start a sentence.
    allowed = torch.ones(3, 3, dtype=torch.bool)
    allowed[0, 2] = False
    allowed_start = torch.tensor([True, True, False])
    crf = CRF(3, allowed=allowed, allowed_start=allowed_start)
    em = torch.zeros(1, 4, 3)
    em[0, :, 2] = 50.0  # emissions scream "I" everywhere
    em[0, 2, 0] = 200.0  # ... but "O" at position 2
    with torch.no_grad():
        for p in crf.parameters():
            p.zero_()
        crf.end_transitions[1] = 1.0  # break the B/O tie at the last position
    (best,) = crf.decode(em)
    assert best == [1, 2, 0, 1]  # unconstrained it would be [2, 2, 0, 2]
    for tags in (p.tags for p in crf.nbest(em, None, 10)[0]):
        assert tags[0] != 2 and not any(a == 0 and b == 2 for a, b in zip(tags, tags[1:]))
    # the gold path below is disallowed: the loss is huge but gradients are finite
    em.requires_grad_(True)
    loss = crf.nll(em, torch.tensor([[2, 2, 0, 2]])).sum()
    loss.backward()
    assert loss.item() > 1000
    assert torch.isfinite(em.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in crf.parameters())


def test_constraint_buffers_are_saved_and_moved():
    allowed = torch.eye(3, dtype=torch.bool)
    crf = CRF(3, allowed=allowed)
    state = crf.state_dict()
    assert {"transition_penalty", "start_penalty", "end_penalty"} <= set(state)
    assert state["transition_penalty"][0, 1] == DISALLOWED_SCORE
    assert state["transition_penalty"][1, 1] == 0
    other = CRF(3)
    other.load_state_dict(state)
    assert torch.equal(other.transition_penalty, crf.transition_penalty)
    assert crf.double().transition_penalty.dtype == torch.float64


# ---------------------------------------------------------------- batching and padding


@SETTINGS
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=5),
    st.integers(2, 4),
    st.integers(0, 10_000),
    st.integers(0, 2),
    st.booleans(),
)
def test_batched_equals_one_by_one(lengths, num_tags, seed, extra_pad, constrained):
    crf = make_crf(num_tags, seed, constrained=constrained)
    em, mask = padded_batch(lengths, num_tags, seed, pad_len=max(lengths) + extra_pad)
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, num_tags, mask.shape, generator=g).masked_fill(~mask, -100)

    nll = crf.nll(em, tags, mask)
    best = crf.decode(em, mask)
    viterbi = crf.viterbi_tags(em, mask)
    nbest = crf.nbest(em, mask, 3)
    marg = crf.marginals(em, mask)
    assert viterbi.shape == mask.shape and (viterbi[~mask] == 0).all()
    assert (marg[~mask] == 0).all()

    for b, n in enumerate(lengths):
        em1, tags1 = em[b : b + 1, :n], tags[b : b + 1, :n]
        assert nll[b].item() == pytest.approx(crf.nll(em1, tags1).item(), abs=1e-9)
        assert best[b] == crf.decode(em1)[0]
        assert viterbi[b, :n].tolist() == best[b]
        (one,) = crf.nbest(em1, None, 3)
        assert [p.tags for p in nbest[b]] == [p.tags for p in one]
        assert [p.score for p in nbest[b]] == pytest.approx([p.score for p in one], abs=1e-9)
        torch.testing.assert_close(marg[b, :n], crf.marginals(em1)[0])


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(2, 4), st.integers(0, 10_000))
def test_padding_values_change_nothing_and_get_zero_gradient(lengths, num_tags, seed):
    crf = make_crf(num_tags, seed)
    em, mask = padded_batch(lengths, num_tags, seed, pad_len=max(lengths) + 1)
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, num_tags, mask.shape, generator=g)
    other = em.clone()
    other[~mask] = torch.randn(int((~mask).sum()), num_tags, generator=g, dtype=torch.float64) * 100
    other_tags = tags.masked_fill(~mask, num_tags - 1)

    torch.testing.assert_close(crf.nll(em, tags, mask), crf.nll(other, other_tags, mask))
    assert crf.decode(em, mask) == crf.decode(other, mask)
    assert torch.equal(crf.viterbi_tags(em, mask), crf.viterbi_tags(other, mask))
    assert crf.nbest(em, mask, 2) == crf.nbest(other, mask, 2)
    torch.testing.assert_close(crf.marginals(em, mask), crf.marginals(other, mask))

    em.requires_grad_(True)
    crf.nll(em, tags, mask).sum().backward()
    assert (em.grad[~mask] == 0).all()
    assert torch.isfinite(em.grad).all()
    # the gradient of log Z w.r.t. emissions is the marginals
    em2 = em.detach().clone().requires_grad_(True)
    crf.log_partition(em2, mask).sum().backward()
    torch.testing.assert_close(em2.grad, crf.marginals(em, mask).detach())


def test_one_token_sentence():
    crf = make_crf(3, seed=7)
    em = rand_emissions(1, 1, 3, seed=7)
    expected_best = int((em[0, 0] + crf.start_transitions + crf.end_transitions).argmax())
    assert crf.decode(em) == [[expected_best]]
    assert crf.viterbi_tags(em).tolist() == [[expected_best]]
    assert len(crf.nbest(em, None, 2)[0]) == 2
    torch.testing.assert_close(crf.marginals(em).sum(-1), torch.ones(1, 1, dtype=torch.float64))
    assert crf.nll(em, torch.tensor([[expected_best]])).item() >= 0
    # a one-token sentence inside a padded batch
    em2, mask = padded_batch([1, 3], 3, seed=7)
    assert len(crf.decode(em2, mask)[0]) == 1


@pytest.mark.parametrize("seed", range(30))
def test_hand_written_log_partition_gradient_equals_autograd(seed):
    """log Z's closed-form gradient (seqlab.crf.partition) against autograd through the recorded
    forward recursion: every parameter and the emissions, with padding, constraints and weights."""
    num_tags, batch, seq_len = 1 + seed % 6, 1 + seed % 4, 1 + seed % 7
    crf = make_crf(num_tags, seed, constrained=seed % 2 == 1)
    em, mask = padded_batch([seq_len] + [1 + (seed * 7 + b) % seq_len for b in range(batch - 1)], num_tags, seed)
    em.requires_grad_(True)
    weights = torch.randn(batch, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    inputs = [em, crf.transitions, crf.start_transitions, crf.end_transitions]
    log_z = crf.log_partition(em, mask)
    got = torch.autograd.grad((log_z * weights).sum(), inputs)
    trimmed, tmask, _ = crf._trim(em, mask)
    trans, start, end = crf.potentials()
    alphas = alpha_recursion(trimmed, trans, start, tmask)  # recorded by autograd, outside the Function
    reference = torch.logsumexp(alphas[:, -1] + end, dim=1)
    # the same recursion; on CPU log Z runs in NumPy, whose vectorised exp/log may round differently from torch's
    torch.testing.assert_close(log_z, reference, atol=1e-12, rtol=1e-12)
    expected = torch.autograd.grad((reference * weights).sum(), inputs, allow_unused=True)
    for g, e, x in zip(got, expected, inputs):
        torch.testing.assert_close(g, torch.zeros_like(x) if e is None else e, atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_log_partition_in_numpy_equals_the_torch_recursions(seed, monkeypatch):
    """On CPU, LogPartition runs in NumPy float64; the PyTorch recursions (kept for GPUs) give the same log Z
    and gradients: to float64 rounding on float64 inputs, to float32 rounding on the float32 a model trains in."""
    import seqlab.crf.partition as partition

    monkeypatch.setattr(partition, "PAIR_BLOCK", 1 if seed % 3 == 0 else partition.PAIR_BLOCK)  # a step a block
    num_tags, batch, seq_len = 2 + seed % 6, 1 + seed % 4, 1 + seed % 9
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-5)):
        crf = make_crf(num_tags, seed, constrained=seed % 2 == 1).to(dtype)
        em, mask = padded_batch([seq_len] + [1 + (seed * 5 + b) % seq_len for b in range(batch - 1)], num_tags, seed)
        em = em.to(dtype).requires_grad_(True)
        weights = torch.randn(batch, generator=torch.Generator().manual_seed(seed)).to(dtype)
        inputs = [em, crf.transitions, crf.start_transitions, crf.end_transitions]
        results = []
        for numpy_path in (True, False):
            monkeypatch.setattr(partition, "CPU_NUMPY", numpy_path)
            log_z = crf.log_partition(em, mask)
            results.append((log_z, *torch.autograd.grad((log_z * weights).sum(), inputs)))
        for got, expected in zip(*results):
            assert got.dtype == expected.dtype == dtype
            torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


def _partition_inputs(crf: CRF, em: torch.Tensor, mask: torch.Tensor):
    """The NumPy arrays LogPartition hands its CPU recursions: emissions, trans, start and end with the
    constraint penalties added, mask."""
    trans, start, end = crf.potentials()
    return [x.detach().numpy() for x in (em, trans, start, end, mask)]


def _compiled_partition():
    """seqlab.crf.compiled.CompiledPartition, or a skip where Numba is missing."""
    from seqlab.crf.compiled import CompiledPartition, kernels

    if kernels() is None:
        pytest.skip("numba is not installed (a dependency of seqlab): the compiled recursions are absent")
    return CompiledPartition


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
@pytest.mark.parametrize("seed", range(24))
def test_probability_space_recursions_equal_the_log_space_ones(seed, compiled):
    """On CPU, log Z and its gradients come from recursions in probability space, rescaled at each step
    (crf.host.ScaledPartition as NumPy calls, crf.compiled.CompiledPartition compiled by Numba); they equal
    the log-space recursions' (NumpyPartition) to float64 rounding: padding with absurd values, constraints,
    one-token sentences, emissions spread up to 30 apart, emissions in float32 and float64, contiguous or not."""
    from seqlab.crf.host import NumpyPartition, ScaledPartition

    scaled_class = _compiled_partition() if compiled else ScaledPartition
    num_tags, batch, seq_len = 1 + seed % 7, 1 + seed % 5, 1 + seed % 11
    crf = make_crf(num_tags, seed, constrained=seed % 2 == 1, scale=(1.0, 3.0, 10.0)[seed % 3])
    em, mask = padded_batch([seq_len] + [1 + (seed * 7 + b) % seq_len for b in range(batch - 1)], num_tags, seed)
    em = torch.where(mask[:, :, None], em * (1.0, 5.0)[seed % 2], em)
    if seed % 4 == 1:  # float32 emissions, as a model's; the recursions still run in float64
        em = em.float()
    if seed % 3 == 2:  # a view with other strides (the CRF hands over emissions trimmed, possibly transposed)
        em = em.transpose(0, 1).contiguous().transpose(0, 1)
    inputs = _partition_inputs(crf, em, mask)
    weights = torch.randn(batch, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    scaled, log_space = scaled_class(*inputs), NumpyPartition(*inputs)
    assert scaled.log_z == pytest.approx(log_space.log_z, rel=1e-12, abs=1e-11)
    for got, expected in zip(scaled.gradients(weights), log_space.gradients(weights)):
        assert got.shape == expected.shape
        torch.testing.assert_close(torch.from_numpy(got), torch.from_numpy(expected), atol=1e-12, rtol=1e-10)


def test_where_probabilities_underflow_the_log_space_recursions_take_over():
    """Tag 0 scores 1,000 above tag 1 at step 1 but cannot be entered: in probability space every reachable
    value of that step underflows float64 to 0, so log Z and its gradients come from the log-space recursions
    (and equal brute force), as do the confidences' marginals; a gradient whose marginals underflow falls back
    the same way."""
    import seqlab.crf.host as host

    allowed = torch.tensor([[False, True], [False, True]])  # nothing enters tag 0 after step 0
    crf = CRF(2, allowed=allowed).double()
    em = torch.tensor([[[0.0, 0.0], [1000.0, 0.0], [0.0, 0.5]]], dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(host.Underflow):
        host.ScaledPartition(*_partition_inputs(crf, em, mask))
    log_z = crf.log_partition(em, mask)
    assert log_z.item() == pytest.approx(logsumexp(brute_all(crf, em[0].detach(), only_allowed=True).values()))
    (grad,) = torch.autograd.grad(log_z.sum(), [em])
    assert torch.isfinite(grad).all() and grad[0, 1].tolist() == pytest.approx([0.0, 1.0])

    with torch.no_grad():  # the confidences' forward-backward (seqlab.crf.posteriors) takes the same exact path
        marginals = crf.marginals(em.detach(), mask)[0]
    paths = brute_all(crf, em[0].detach())
    expected = torch.zeros(3, 2, dtype=torch.float64)
    for path, score in paths.items():
        for t, y in enumerate(path):
            expected[t, y] += math.exp(score - logsumexp(paths.values()))
    torch.testing.assert_close(marginals, expected)

    em2, mask2 = padded_batch([4, 2, 3], 3, seed=5)
    inputs = _partition_inputs(make_crf(3, 5), em2, mask2)
    weights = torch.rand(3, generator=torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
    scaled = host.ScaledPartition(*inputs)
    scaled.alphas[1, 0] = 0.0  # as if row 0's probabilities at step 1 had underflowed
    for got, expected in zip(scaled.gradients(weights), host.NumpyPartition(*inputs).gradients(weights)):
        torch.testing.assert_close(torch.from_numpy(got), torch.from_numpy(expected), atol=1e-12, rtol=1e-10)


def test_compiled_recursions_hand_underflows_to_the_log_space_ones(monkeypatch):
    """The compiled recursions (crf.compiled) find the same underflows as the NumPy ones: the forward one raises,
    and LogPartition then takes the log-space recursions (brute force's log Z); a gradient whose marginals
    underflow comes from the log-space gradient. Without Numba, the NumPy probability-space recursions run."""
    import seqlab.crf.host as host
    import seqlab.crf.partition as partition

    compiled_class = _compiled_partition()
    allowed = torch.tensor([[False, True], [False, True]])
    crf = CRF(2, allowed=allowed).double()
    em = torch.tensor([[[0.0, 0.0], [1000.0, 0.0], [0.0, 0.5]]], dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, 3, dtype=torch.bool)
    inputs = _partition_inputs(crf, em, mask)
    with pytest.raises(host.Underflow):
        compiled_class(*inputs)
    assert isinstance(partition._cpu_partition(*inputs), host.NumpyPartition)
    log_z = crf.log_partition(em, mask)
    assert log_z.item() == pytest.approx(logsumexp(brute_all(crf, em[0].detach(), only_allowed=True).values()))

    em2, mask2 = padded_batch([4, 2, 3], 3, seed=5)
    inputs = _partition_inputs(make_crf(3, 5), em2, mask2)
    assert isinstance(partition._cpu_partition(*inputs), compiled_class)
    weights = torch.rand(3, generator=torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
    scaled = compiled_class(*inputs)
    scaled.alphas[0, 1] = 0.0  # as if row 0's probabilities at step 1 had underflowed
    for got, expected in zip(scaled.gradients(weights), host.NumpyPartition(*inputs).gradients(weights)):
        torch.testing.assert_close(torch.from_numpy(got), torch.from_numpy(expected), atol=1e-12, rtol=1e-10)

    monkeypatch.setattr(partition, "kernels", lambda: None)  # as where Numba is not installed
    assert isinstance(partition._cpu_partition(*inputs), host.ScaledPartition)


def test_pytorch_recursions_keep_states_only_disallowed_moves_reach_impossible(monkeypatch):
    """The PyTorch recursions (GPUs; marginals with gradients) in float32: tag 0 cannot be entered after step 0 and
    has an emission of 200 at step 1. exp(penalty) is 0 in float32, so that state's product underflows; its log
    must stay far below the allowed paths (it was floored at log(tiny) = -87, so 200 - 87 outweighed them and log
    Z came out near 113). log Z, its gradient and the marginals with gradients equal brute force over the
    allowed paths, and every gradient is finite."""
    import seqlab.crf.partition as partition

    monkeypatch.setattr(partition, "CPU_NUMPY", False)
    allowed = torch.tensor([[False, True], [False, True]])
    crf = CRF(2, allowed=allowed)
    em = torch.tensor([[[0.0, 0.0], [200.0, 0.0], [0.0, 0.5], [0.3, 0.1]]], requires_grad=True)
    mask = torch.ones(1, 4, dtype=torch.bool)
    paths = brute_all(crf, em[0].detach().double(), only_allowed=True)
    log_z = crf.log_partition(em, mask)
    assert log_z.item() == pytest.approx(logsumexp(paths.values()), abs=1e-4)
    (grad,) = torch.autograd.grad(log_z.sum(), [em])
    expected = torch.zeros(4, 2)
    for path, score in paths.items():
        for t, y in enumerate(path):
            expected[t, y] += math.exp(score - logsumexp(paths.values()))
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad[0], expected, atol=1e-5, rtol=1e-4)
    marginals = crf.marginals(em, mask)  # with gradients: the PyTorch alpha and beta recursions
    torch.testing.assert_close(marginals[0].detach(), expected, atol=1e-5, rtol=1e-4)
    (back,) = torch.autograd.grad(marginals[0, 2, 1], [em])
    assert torch.isfinite(back).all()


@pytest.mark.parametrize("seed", range(40))
def test_numpy_viterbi_equals_torch_viterbi_with_ties_and_padding(seed):
    """CPU decoding runs in NumPy (seqlab.crf.viterbi); it must give the PyTorch loop's paths and scores,
    ties included: small integer scores make many paths tie, and both pick the lowest tag index."""
    g = torch.Generator().manual_seed(seed)
    num_tags, batch, seq_len = 1 + seed % 6, 1 + seed % 5, 1 + seed % 8
    crf = CRF(num_tags, torch.rand(num_tags, num_tags, generator=g) < 0.7 if seed % 2 else None)
    integer = seed % 3 != 0
    with torch.no_grad():
        for p in crf.parameters():
            p.copy_(
                torch.randint(-2, 3, p.shape, generator=g).float() if integer else torch.randn(p.shape, generator=g)
            )
    em = (
        torch.randint(-2, 3, (batch, seq_len, num_tags), generator=g).float()
        if integer
        else torch.randn(batch, seq_len, num_tags, generator=g)
    )
    lengths = torch.randint(1, seq_len + 1, (batch,), generator=g)
    mask = torch.arange(seq_len)[None] < lengths[:, None]
    mask[0] = True
    tags, scores = crf.viterbi(em, mask)  # NumPy on CPU
    ref_tags, ref_scores = crf._viterbi_torch(em, mask)
    assert torch.equal(tags, ref_tags) and torch.equal(scores, ref_scores)
    for b in range(batch):  # and each path really scores what it says
        n = int(mask[b].sum())
        assert crf.score(em[b : b + 1, :n], tags[b : b + 1, :n]).item() == pytest.approx(scores[b].item(), abs=1e-4)


def integer_case(g: torch.Generator, num_tags: int, batch: int, seq_len: int, allowed: float | None):
    """A CRF (a random ``allowed`` fraction of its moves, or none constrained) with small integer scores, integer
    emissions (batch, seq_len, num_tags) and random lengths (batch,): many ties between paths."""
    crf = CRF(num_tags, torch.rand(num_tags, num_tags, generator=g) < allowed if allowed is not None else None)
    with torch.no_grad():
        for p in crf.parameters():
            p.copy_(torch.randint(-2, 3, p.shape, generator=g).float())
    em = torch.randint(-2, 3, (batch, seq_len, num_tags), generator=g).float()
    return crf, em, torch.randint(1, seq_len + 1, (batch,), generator=g)


@pytest.mark.parametrize("seed", range(6))
def test_numpy_viterbi_equals_torch_viterbi_on_large_batches(seed):
    """Batches of (batch x tags x tags) >= seqlab.crf.viterbi.TORCH_ADD_FROM take the PyTorch-add path of
    the NumPy decoder; its paths and scores are the PyTorch loop's too, ties and padding included."""
    from seqlab.crf.viterbi import TORCH_ADD_FROM

    g = torch.Generator().manual_seed(100 + seed)
    num_tags, batch, seq_len = 20 + 4 * seed, 25 + 9 * seed, 3 + 5 * seed
    assert batch * num_tags * num_tags >= TORCH_ADD_FROM
    crf, em, lengths = integer_case(g, num_tags, batch, seq_len, 0.8 if seed % 2 else None)
    lengths[0] = seq_len if seed % 3 else lengths[0]
    mask = torch.arange(seq_len)[None] < lengths[:, None]
    mask[:, 0] = True
    tags, scores = crf.viterbi(em, mask)
    ref_tags, ref_scores = crf._viterbi_torch(em, mask)
    assert torch.equal(tags, ref_tags) and torch.equal(scores, ref_scores)


@pytest.mark.parametrize("seed", range(8))
def test_max_only_viterbi_equals_the_pointer_keeping_one(seed, monkeypatch):
    """Large batches keep only maxima on the way forward and recompute the pointers on the way back
    (seqlab.crf.viterbi.MAX_ONLY_FROM): the same paths and scores as keeping every pointer and as the PyTorch
    loop, with ties (small integer scores), padding, one-token sentences and constraints."""
    import seqlab.crf.viterbi as V

    g = torch.Generator().manual_seed(300 + seed)
    num_tags, batch, seq_len = 2 + 5 * seed, 2 + 7 * seed, 1 + 4 * seed
    crf, em, lengths = integer_case(g, num_tags, batch, seq_len, 0.4 if seed % 2 else None)
    lengths[0] = seq_len
    if seed % 3 == 0:
        lengths[:] = seq_len  # no padding
    mask = torch.arange(seq_len)[None] < lengths[:, None]
    results = []
    for threshold in (0, 2**62):  # max-only at every size, then never
        monkeypatch.setattr(V, "MAX_ONLY_FROM", threshold)
        results.append(crf.viterbi(em, mask))
    ref_tags, ref_scores = crf._viterbi_torch(em, mask)
    for tags, scores in results:
        assert torch.equal(tags, ref_tags) and torch.equal(scores, ref_scores)


def test_mask_none_means_no_padding():
    crf = make_crf(3, seed=1)
    em = rand_emissions(2, 4, 3, seed=1)
    full = torch.ones(2, 4, dtype=torch.bool)
    torch.testing.assert_close(crf.log_partition(em), crf.log_partition(em, full))
    assert crf.decode(em) == crf.decode(em, full)


# ---------------------------------------------------------------- validation


def test_bad_inputs_raise_value_error():
    crf = CRF(3)
    em = torch.randn(2, 4, 3)
    mask = torch.ones(2, 4, dtype=torch.bool)
    tags = torch.zeros(2, 4, dtype=torch.long)

    with pytest.raises(ValueError, match="3 dims"):
        crf.log_partition(torch.randn(4, 3))
    with pytest.raises(ValueError, match="num_tags=3"):
        crf.decode(torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match="floating"):
        crf.log_partition(torch.zeros(2, 4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="seq_len >= 1"):
        crf.log_partition(torch.randn(2, 0, 3))
    with pytest.raises(ValueError, match="mask: expected shape"):
        crf.nll(em, tags, mask[:, :3])
    with pytest.raises(ValueError, match="torch.bool"):
        crf.nll(em, tags, mask.long())
    bad = mask.clone()
    bad[1, 0] = False
    with pytest.raises(ValueError, match="first column"):
        crf.decode(em, bad)
    gap = mask.clone()
    gap[0, 1] = False
    with pytest.raises(ValueError, match="left-aligned"):
        crf.viterbi_tags(em, gap)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        crf.nll(em, tags.masked_fill(torch.eye(2, 4, dtype=torch.bool), 3), mask)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        crf.score(em, tags - 1, mask)
    with pytest.raises(ValueError, match="torch.long"):
        crf.nll(em, tags.int(), mask)
    with pytest.raises(ValueError, match="tags: expected shape"):
        crf.nll(em, tags[:1], mask)
    with pytest.raises(ValueError, match="nbest"):
        crf.nbest(em, mask, 0)
    with pytest.raises(ValueError, match="num_tags"):
        CRF(0)
    with pytest.raises(ValueError, match="allowed: expected shape"):
        CRF(3, allowed=torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="allowed_start: expected dtype"):
        CRF(3, allowed_start=torch.ones(3))


def test_out_of_range_tags_on_padding_are_ignored():
    crf = make_crf(3, seed=2)
    em, mask = padded_batch([2, 4], 3, seed=2)
    tags = torch.zeros(2, 4, dtype=torch.long)
    tags[0, 2:] = -100
    assert torch.isfinite(crf.nll(em, tags, mask)).all()


# ---------------------------------------------------------------- training


def test_training_reduces_nll_and_fits_a_tiny_problem():
    torch.manual_seed(0)
    num_tags = 4
    crf = CRF(num_tags)
    emissions = torch.nn.Parameter(torch.randn(3, 5, num_tags) * 0.1)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    target = torch.tensor([[0, 1, 2, 3, 0], [3, 3, 1, 0, 0], [2, 0, 0, 0, 0]])
    opt = torch.optim.SGD(list(crf.parameters()) + [emissions], lr=0.5)

    losses = []
    for _ in range(30):
        opt.zero_grad()
        nll = crf.nll(emissions, target, mask)
        assert (nll >= 0).all()
        loss = nll.mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.5
    assert all(b <= a + 1e-6 for a, b in zip(losses, losses[1:]))
    lengths = mask.sum(1).tolist()
    assert crf.decode(emissions, mask) == [target[b, :n].tolist() for b, n in enumerate(lengths)]


@pytest.mark.parametrize("constrained", [False, True])
def test_numpy_forward_backward_equals_the_torch_recursions(constrained):
    """The NumPy recursions that confidences use at CPU inference (seqlab/posteriors.py) against the
    PyTorch ones that training uses, with padding and constraint penalties; and marginals with and without
    gradients (which pick one or the other) agree."""
    from seqlab.crf.partition import alpha_recursion, beta_recursion
    from seqlab.crf.posteriors import forward_backward

    crf = make_crf(6, seed=11, constrained=constrained)
    em = rand_emissions(4, 9, 6, seed=12)
    mask = torch.arange(9)[None] < torch.tensor([9, 1, 5, 8])[:, None]
    trans, start, end = crf.potentials()
    with torch.no_grad():
        alphas = alpha_recursion(em, trans, start, mask)
        betas = beta_recursion(em, trans, end, mask)
        log_z = torch.logsumexp(alphas[:, -1] + end, dim=1)
    fb = forward_backward(*(x.detach().numpy() for x in (em, mask, trans, start, end)))
    for got, want in ((fb.alphas, alphas), (fb.betas, betas), (fb.log_z, log_z)):
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-9, atol=1e-9)
    with torch.no_grad():
        fast = crf.marginals(em, mask)
    slow = crf.marginals(em.clone().requires_grad_(), mask).detach()
    torch.testing.assert_close(fast, slow, rtol=1e-9, atol=1e-9)


def test_numpy_viterbi_decodes_with_scores_changed_since_the_last_decode():
    """The CPU Viterbi keeps its potentials as NumPy arrays between calls: scores changed in place (as an optimiser
    step changes them), loaded by load_state_dict, or a constraint penalty changed, are what the next decode uses."""
    crf = make_crf(3, 7, constrained=True)
    em = rand_emissions(1, 4, 3, 7)

    def brute_best() -> list[int]:
        return list(max(brute_all(crf, em[0], only_allowed=True).items(), key=lambda kv: kv[1])[0])

    decoded = crf.viterbi_tags(em).tolist()
    assert decoded == [brute_best()]
    with torch.no_grad():
        crf.start_transitions[decoded[0][0]] -= 50.0  # in place: the best path must start elsewhere
    changed = crf.viterbi_tags(em).tolist()
    assert changed == [brute_best()] and changed != decoded
    crf.load_state_dict(make_crf(3, 8, constrained=True).state_dict())
    assert crf.viterbi_tags(em).tolist() == [brute_best()]
    with torch.no_grad():
        crf.end_penalty.fill_(0.0)  # every tag may now end a sentence
    assert crf.viterbi_tags(em).tolist() == [brute_best()]
