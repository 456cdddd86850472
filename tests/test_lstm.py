"""The padded bidirectional LSTM against PyTorch's packed bidirectional LSTM (the oracle).

The oracle gets our weights through ``BiLSTM.copy_weights_into``, which the packed inference path uses
too; the padded (grad) path never copies, so a wrong copy fails its comparison with the oracle."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.encoders.bilstm import BiLSTMEncoder
from seqlab.nn.context import Context
from seqlab.nn.lstm import BiLSTM, gather_steps, reversal_index


@pytest.mark.parametrize("grad", [True, False], ids=["padded-kernel", "packed-kernel"])
@pytest.mark.parametrize("layers", [1, 2])
def test_bilstm_equals_packed_bidirectional_lstm_on_real_steps(layers, grad):
    torch.manual_seed(0)
    ours = BiLSTM(5, 4, layers, packed_inference=True).eval()
    oracle = nn.LSTM(5, 4, num_layers=layers, batch_first=True, bidirectional=True)
    ours.copy_weights_into(oracle)
    lengths = torch.tensor([6, 1, 4, 6, 3])
    x = torch.randn(5, 6, 5)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    expected, _ = pad_packed_sequence(oracle(packed)[0], batch_first=True, total_length=6)
    with torch.set_grad_enabled(grad):  # with grad: padded rows; without: packed
        got = ours(x, lengths)
    for b, n in enumerate(lengths.tolist()):
        assert torch.allclose(got[b, :n], expected[b, :n], atol=1e-6)


def test_packed_inference_follows_weight_updates():
    """The inference path runs a cached bidirectional copy of the weights: it must be rebuilt after an
    in-place update (optimiser step, load_state_dict) and agree with the training path again."""
    torch.manual_seed(0)
    ours = BiLSTM(5, 4, 2, packed_inference=True).eval()
    lengths = torch.tensor([6, 2, 4])
    x = torch.randn(3, 6, 5)

    def agree() -> bool:
        with torch.no_grad():
            packed = ours(x, lengths)
        padded = ours(x, lengths)  # grad enabled: the padded one-way kernels
        return all(torch.allclose(packed[b, :n], padded[b, :n], atol=1e-6) for b, n in enumerate(lengths.tolist()))

    assert agree()
    with torch.no_grad():
        ours.bwd[1].weight_hh_l0.add_(0.5)  # in place, as an optimiser step does
    assert agree()
    ours.load_state_dict({k: torch.randn_like(v) for k, v in ours.state_dict().items()})
    assert agree()
    assert "_bi_cache" not in "".join(ours.state_dict())  # the copy is never saved


def test_reversal_index_reverses_real_steps_only():
    index = reversal_index(torch.tensor([3, 1, 4]), 4)
    assert index.tolist() == [[2, 1, 0, 0], [0, 0, 0, 0], [3, 2, 1, 0]]
    x = torch.arange(12.0).view(3, 4, 1)
    twice = gather_steps(gather_steps(x, index), index)
    assert twice[0, :3].flatten().tolist() == [0.0, 1.0, 2.0]  # an involution on real steps


def test_gather_steps_equals_gather_with_the_expanded_index_values_and_gradients():
    """gather_steps (whole rows by index_select) against x.gather(1, index expanded over the features)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 1, 3, 5, 2])
    index = reversal_index(lengths, 6)
    x = torch.randn(5, 6, 7, generator=g, requires_grad=True)
    weights = torch.randn(5, 6, 7, generator=g)
    ours = gather_steps(x, index)
    theirs = x.gather(1, index.unsqueeze(2).expand(-1, -1, 7))
    assert torch.equal(ours, theirs)
    grads = [torch.autograd.grad((y * weights).sum(), x)[0] for y in (ours, theirs)]
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-6)  # sums of up to 5 terms, in some order


def test_encoder_outputs_zero_on_padding_and_ignore_padding_values():
    torch.manual_seed(0)
    enc = BiLSTMEncoder(5, 8, layers=2, dropout=0.0).eval()
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    x = torch.randn(2, 5, 5)
    noisy = x.clone()
    noisy[0, 3:] = 100.0  # whatever sits in padding
    a, b = enc(x, Context.of(mask)), enc(noisy, Context.of(mask))
    assert torch.equal(a[0, 3:], torch.zeros(2, 8))
    assert torch.allclose(a, b)


def test_no_grad_in_train_mode_keeps_dropout_between_layers():
    """The packed copy has no dropout: it serves eval mode only, not a no_grad pass in train mode."""
    torch.manual_seed(0)
    ours = BiLSTM(5, 4, 2, dropout=0.5, packed_inference=True).train()
    x, lengths = torch.randn(3, 6, 5), torch.tensor([6, 2, 4])
    with torch.no_grad():
        a, b = ours(x, lengths), ours(x, lengths)
    assert not torch.allclose(a, b)  # two different dropout masks
    assert ours._bi_cache is None  # the packed copy was never built


def test_training_batch_without_padding_takes_one_bidirectional_call_on_the_same_parameters():
    """With gradients, a one-layer BiLSTM runs an unpadded batch through one bidirectional kernel call
    sharing its parameters: the outputs and every gradient equal the two one-way calls' (to rounding),
    building that call draws nothing from the random generator, and a replaced parameter is followed."""
    torch.manual_seed(0)
    m = BiLSTM(12, 8).train()
    x = torch.randn(3, 6, 12, requires_grad=True)
    g = torch.randn(3, 6, 16)
    full = torch.full((3,), 6)
    state = torch.get_rng_state()
    out = m(x, full)
    assert m._pair is not None and torch.equal(state, torch.get_rng_state())
    grads = torch.autograd.grad((out * g).sum(), [x, *m.parameters()])
    ref = torch.cat(m._per_direction(x, full), dim=-1)  # the two one-way calls
    ref_grads = torch.autograd.grad((ref * g).sum(), [x, *m.parameters()])
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    pair = m._pair[1]
    assert {id(q) for q in pair.parameters()} == {id(q) for q in m.parameters()}  # shared, not copied
    assert not any(k.startswith("_pair") for k in m.state_dict())
    other = BiLSTM(12, 8)
    m.load_state_dict(other.state_dict(), assign=True)  # new parameter objects: a new pair
    torch.testing.assert_close(m(x, full), other(x, full), rtol=0, atol=0)
    assert m._pair[1] is not pair
    padded = torch.tensor([6, 4, 6])  # padding: the per-direction path, as before
    torch.testing.assert_close(m(x, padded), torch.cat(m._per_direction(x, padded), dim=-1), rtol=0, atol=0)
