"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.heartbeat`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.serving.heartbeat import BEATS_PER_TIMEOUT, Counter, Heartbeat, Pulse, interval_for

__all__ = ["BEATS_PER_TIMEOUT", "Counter", "Heartbeat", "Pulse", "interval_for"]
