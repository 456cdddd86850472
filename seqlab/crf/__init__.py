"""The linear-chain CRF: the layer, its log partition function, forward-backward and Viterbi decoding.

The names of the former module ``seqlab.crf`` are re-exported here (``from seqlab.crf import CRF``).
"""

from seqlab.crf.crf import CRF, DISALLOWED_SCORE, GPU_HOST_VITERBI_ROWS, TagPath, kbest_paths

__all__ = ["CRF", "DISALLOWED_SCORE", "GPU_HOST_VITERBI_ROWS", "TagPath", "kbest_paths"]
