"""Sentences, the files they come from, tag schemes, vocabularies and batches."""
