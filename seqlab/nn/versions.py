"""Whether weights changed since something was made from them.

Three caches are made from a network's weights and must be remade when they change: the char encoders'
inference memo (:mod:`seqlab.features.chars`), the BiLSTM's bidirectional copy for inference
(:mod:`seqlab.nn.lstm`) and the onnxruntime engine's exported graph (:mod:`seqlab.runtime.engine`). Each keeps the key
below from when it was made and compares it with the current one.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor


def weights_key(params: Iterable[Tensor]) -> tuple:
    """Each tensor's storage and version counter: ``load_state_dict``, ``.to()`` and any counted in-place change
    bump one of them. A write that autograd does not count leaves the key as it was: one through ``.data``, or
    PyTorch's fused optimiser kernels (its fused SGD; :class:`seqlab.training.optim.SGD` bumps the counters after its
    step for that reason). A few microseconds for tens of tensors; pass a kept list rather than walking
    ``module.parameters()`` on a hot path (50 us for the chunker)."""
    return tuple((q.data_ptr(), q._version) for q in params)
