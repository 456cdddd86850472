"""Dropout whose mask is drawn as uniform numbers on CPU, a drop-in for ``torch.nn.Dropout``.

On CPU, PyTorch's dropout draws its mask with ``bernoulli_``, which took about twice as long as drawing
uniform numbers and comparing them with p: on the chunker's (10, 25, 200) BiLSTM output, 810 against 320
microseconds forward, 970 against 530 forward and backward (2 threads). The two dropouts of a BiLSTM-CRF
training step cost more than its CRF. This module keeps each element with probability 1 - p and scales the
kept ones by 1 / (1 - p), as ``nn.Dropout`` does, from ``torch.rand_like``: the same distribution, a
different random stream, so a seed gives other masks than ``nn.Dropout`` would. On other devices, at
p = 0 or 1, and outside training it is ``nn.Dropout``. It has no weights: model files do not change.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Dropout(nn.Dropout):
    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or self.p == 1.0 or self.inplace or not x.is_floating_point():
            return super().forward(x)
        keep = torch.rand_like(x).ge_(self.p)  # (same shape as x) 1.0 with probability 1 - p, else 0.0
        return x * keep.mul_(1.0 / (1.0 - self.p))


def unk_dropout(ids: Tensor, p: float, unk: int, training: bool) -> Tensor:
    """In training, each real id (not the padding 0) read as ``unk`` with probability ``p``.

    An embedding table's ``<unk>`` row is what every item unseen in training reads at prediction time. Trained only
    through this, it is a vector the tagger has learnt to read; untrained, it stays its random initial row, and what
    the tagger makes of that row is chance (Resume's test has 12% of its character bigrams outside the training
    set). Lample et al. (2016) replace training singletons by ``<unk>``; here any item, like flair's word dropout
    but to ``<unk>`` instead of zeros. Outside training, or at ``p`` 0, ``ids`` itself."""
    if not training or p == 0.0:
        return ids
    hit = (torch.rand(ids.shape, device=ids.device) < p) & (ids > 0)  # (same shape as ids) bool
    return ids.masked_fill(hit, unk)
