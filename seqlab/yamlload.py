"""Deprecated import path, kept for one release: use :mod:`seqlab.io.yamlload`. A module-level setting is read where it
lives now: set it there, not here."""

from seqlab.io.yamlload import MAX_DEPTH, MAX_NODES, UserYamlLoader, load_yaml

__all__ = ["MAX_DEPTH", "MAX_NODES", "UserYamlLoader", "load_yaml"]
