"""Deprecated import path, kept for one release: use :mod:`seqlab.features.lexicon`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.features.lexicon import JIEBA, Lexicon, Match, jieba_dict_path, read_word_file

__all__ = ["JIEBA", "Lexicon", "Match", "jieba_dict_path", "read_word_file"]
