"""Attention heatmaps (matplotlib, Agg, no pyplot state): source pieces across, output pieces down."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def heatmap(
    weights: np.ndarray,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    title: str = "",
    x_name: str = "source (French pieces)",
    y_name: str = "output (English pieces)",
) -> Figure:
    """A labelled heatmap of ``weights`` (rows = y labels, columns = x labels) with a colour bar."""
    weights = np.asarray(weights, dtype=np.float32)
    rows, cols = weights.shape
    cell = 0.32
    fig = Figure(figsize=(max(4.0, 1.8 + cell * cols), max(3.0, 1.4 + cell * rows)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    ax.set_xticks(range(cols), labels=list(x_labels), rotation=90, fontsize=9)
    ax.set_yticks(range(rows), labels=list(y_labels), fontsize=9)
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    if title:
        ax.set_title(title, fontsize=9, loc="left", wrap=True)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    return fig


def save(fig: Figure, path: str) -> None:
    fig.savefig(path)
