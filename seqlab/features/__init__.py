"""Input features: each a featurizer (vocabulary, encoding, collation, saved state) plus its embedding
module. The built-in families register themselves on import; see :mod:`seqlab.features.base`."""

from seqlab.features.base import FEATURES, FeatureConfig, FeatureModule, Featurizer
from seqlab.features.bigrams import BigramsConfig
from seqlab.features.casing import CasingConfig
from seqlab.features.chars import CharCNN, CharLSTM, CharsConfig
from seqlab.features.columns import ColumnConfig
from seqlab.features.contextual import ContextualConfig
from seqlab.features.lac import LacConfig
from seqlab.features.lattice import LatticeConfig
from seqlab.features.words import WordsConfig

__all__ = [
    "FEATURES",
    "BigramsConfig",
    "CasingConfig",
    "CharCNN",
    "CharLSTM",
    "CharsConfig",
    "ColumnConfig",
    "ContextualConfig",
    "FeatureConfig",
    "FeatureModule",
    "Featurizer",
    "LacConfig",
    "LatticeConfig",
    "WordsConfig",
]
