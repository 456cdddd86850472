"""Deprecated import path, kept for one release: use :mod:`seqlab.integrations.spacy`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.integrations.spacy import EXTENSION, MODES, SeqlabComponent, make_component

__all__ = ["EXTENSION", "MODES", "SeqlabComponent", "make_component"]
