"""Sentences and the files they come from: column files (:mod:`~seqlab.data.readers`, their format guessed by
:mod:`~seqlab.data.formats`), annotation formats (:mod:`~seqlab.data.annotations`: doccano, Label Studio, spaCy)
and tokenizers for raw text (:mod:`~seqlab.data.tokenization`); tag schemes (:mod:`~seqlab.data.schemes`),
vocabularies, token types, long-sentence splitting, batches (:mod:`~seqlab.data.batching`), and the corpus a config
names (:mod:`~seqlab.data.corpus`, the one module here that reads the config).
"""
