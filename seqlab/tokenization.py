"""Deprecated import path, kept for one release: use :mod:`seqlab.data.tokenization`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.data.tokenization import ENGLISH, TOKENIZERS, Offsets, model_tokenizer, text_sentence, tokenize, tokens_of

__all__ = ["ENGLISH", "TOKENIZERS", "Offsets", "model_tokenizer", "text_sentence", "tokenize", "tokens_of"]
