"""The linear-chain CRF: the layer (:mod:`seqlab.crf.crf`), its log partition function with a hand-written
gradient (:mod:`~seqlab.crf.partition`, run in NumPy on the host by :mod:`~seqlab.crf.host` or compiled by Numba in
:mod:`~seqlab.crf.compiled`), forward-backward for confidences (:mod:`~seqlab.crf.posteriors`) and Viterbi
decoding in NumPy (:mod:`~seqlab.crf.viterbi`). It imports nothing of seqlab's but :mod:`seqlab.nn` and
:mod:`seqlab.runtime.blas`.

The names of the former module ``seqlab.crf`` are re-exported here (``from seqlab.crf import CRF``). Its switch
``GPU_HOST_VITERBI_ROWS`` is read where it lives: set ``seqlab.crf.crf.GPU_HOST_VITERBI_ROWS``.
"""

from seqlab.crf.crf import CRF, DISALLOWED_SCORE, GPU_HOST_VITERBI_ROWS, TagPath, kbest_paths

__all__ = ["CRF", "DISALLOWED_SCORE", "GPU_HOST_VITERBI_ROWS", "TagPath", "kbest_paths"]
