"""PNG plots: training curves and attention heatmaps (matplotlib, no display needed)."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from seqlab.io.files import atomic_write_bytes


def _save(fig, path: str | Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def plot_curves(history: list[dict], path: str | Path, metric: str) -> None:
    """Training loss per epoch, and the dev metric against epochs and against wall-clock minutes (records
    without a clock reading, from runs before it was logged, are left out of that panel)."""
    epochs = [h["epoch"] for h in history]
    dev = [h["dev"][metric] for h in history]
    timed = [(h["elapsed"] / 60.0, h["dev"][metric]) for h in history if "elapsed" in h]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(13, 3.5))
    ax1.plot(epochs, [h["loss"] for h in history], marker="o", ms=3)
    ax1.set(xlabel="epoch", ylabel="training loss per sentence", title="loss")
    ax2.plot(epochs, dev, marker="o", ms=3, color="tab:green")
    ax2.set(xlabel="epoch", ylabel=f"dev {metric}", title=f"dev {metric} by epoch")
    ax3.plot([m for m, _ in timed], [v for _, v in timed], marker="o", ms=3, color="tab:purple")
    ax3.set(xlabel="wall-clock minutes", ylabel=f"dev {metric}", title=f"dev {metric} by time")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    _save(fig, path)


def plot_attention(tokens: list[str], weights: list[list[float]], path: str | Path, title: str = "") -> None:
    """Heatmap of an attention matrix: row i = query token i, column j = key token j."""
    n = len(tokens)
    fig, ax = plt.subplots(figsize=(1 + 0.45 * n, 1 + 0.45 * n))
    im = ax.imshow(weights, cmap="Blues", vmin=0.0)
    ax.set_xticks(range(n), tokens, rotation=90)
    ax.set_yticks(range(n), tokens)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    _save(fig, path)
