"""seqlab: neural sequence labeling (BiLSTM-CRF, position-aware self-attention, ...), fast on CPU.

    from seqlab import Tagger, CRF, train, evaluate, load_config

The packages, lowest layer first; a module imports from its own layer and lower ones (tests/test_layout.py has
the exact layers and checks them):

    io            atomic writes, safe JSON and YAML readers
    data          sentences, file formats, tokenizers, tag schemes, vocabularies, batches
    nn, crf       network building blocks (LSTM, DT cells, dropout); the linear-chain CRF
    features      featurizers and their embeddings (words, characters, casing, lattices, ...)
    encoders      encoder layers (BiLSTM, PSA, FLAT, GCDT, ...)
    decoders      CRF, softmax and GCDT decoders
    config        the experiment config (a module)
    evaluation    scores, calibration, error analyses, plots
    runtime       devices and threads, memory cost, the onnxruntime engine
    tagging       the tagger's parts: network, inference, confidences, model files
    tagger        Tagger, the public API over them (a module)
    training      the training loop, optimisers, checkpoints, data-parallel runs
    serving       the HTTP server, prediction in processes, exported networks
    integrations  Ray Data and spaCy
    cli           the command line (a module)
"""

from seqlab.config import ExperimentConfig, load_config
from seqlab.crf import CRF
from seqlab.errors import SeqlabError
from seqlab.tagger import Prediction, Span, Tagger
from seqlab.training import evaluate, train
from seqlab.version import __version__

__all__ = [
    "CRF",
    "ExperimentConfig",
    "Prediction",
    "SeqlabError",
    "Span",
    "Tagger",
    "__version__",
    "evaluate",
    "load_config",
    "train",
]
