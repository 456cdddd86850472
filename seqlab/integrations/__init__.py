"""Adapters to other frameworks, each in its own module, which ``import seqlab`` never imports:
``seqlab.integrations.ray`` (Ray Data; imports nothing from Ray until it is used) and
``seqlab.integrations.spacy`` (the spaCy pipeline component, ``nlp.add_pipe("seqlab")``; needs spaCy).
"""
