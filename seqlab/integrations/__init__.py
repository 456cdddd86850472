"""Adapters to other frameworks. Each lives in its own module and imports nothing from the framework until it is
used, so ``import seqlab`` never needs them: ``seqlab.integrations.ray`` (Ray Data)."""
