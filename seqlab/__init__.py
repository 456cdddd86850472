"""seqlab: neural sequence labeling (BiLSTM-CRF, position-aware self-attention, ...), fast on CPU.

    from seqlab import Tagger, CRF, train, evaluate, load_config
"""

__version__ = "0.1.0"

from seqlab.config import ExperimentConfig, load_config  # noqa: E402
from seqlab.crf import CRF  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.tagger import Prediction, Span, Tagger  # noqa: E402
from seqlab.training import evaluate, train  # noqa: E402

__all__ = ["CRF", "ExperimentConfig", "Prediction", "SeqlabError", "Span", "Tagger", "evaluate", "load_config",
           "train", "__version__"]
