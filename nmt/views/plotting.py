"""Attention heatmaps (matplotlib figures, no pyplot state, so no backend is chosen here: files are drawn by Agg,
a notebook shows them inline): source pieces across, output pieces down."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

# a piece's cell, in inches at 100 dpi: as tall as its 9-point label needs and no more, so that an image scaled down
# to fit TensorBoard's card (about 500 pixels) keeps its labels readable for a sentence of some 30 pieces
CELL = 0.2
DPI = 100


def heatmap(
    weights: np.ndarray,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    title: str = "",
    x_name: str = "source (French pieces)",
    y_name: str = "output (English pieces)",
) -> Figure:
    """A labelled heatmap of ``weights`` (rows = y labels, columns = x labels) with a colour bar."""
    if isinstance(weights, torch.Tensor):  # any dtype (bf16 has no numpy type) or device
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights, dtype=np.float32)
    rows, cols = weights.shape
    fig = Figure(figsize=(max(4.0, 1.8 + CELL * cols), max(3.0, 1.4 + CELL * rows)), dpi=DPI, layout="constrained")
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


def wrapped(title: str, fig: Figure, points: float = 9) -> str:
    """``title`` broken into lines as wide as ``fig`` (a 9-point character is about half its size wide)."""
    per_line = max(20, int(fig.get_figwidth() * 72 / (0.55 * points)))
    return "\n".join(textwrap.wrap(title, per_line)) or title


def save(fig: Figure, path: str) -> None:
    fig.savefig(path)


def aer_grid_figure(aer: np.ndarray, readouts: Sequence[str], chosen: object) -> Figure:
    """AER of every attention choice, ``aer (readouts, layers, heads + 1)``: a panel per readout, layers down,
    heads across (the last column the heads' mean), each cell labelled; ``chosen`` is named in the title."""
    R, L, H1 = aer.shape
    fig = Figure(figsize=(max(4.5, 1.2 + R * (0.9 + 0.55 * H1)), 1.6 + 0.4 * L), dpi=DPI, layout="constrained")
    fig.suptitle(wrapped(f"AER per layer and head (lower is better); chosen: {chosen}", fig), fontsize=9)
    for r, name in enumerate(readouts):
        ax = fig.add_subplot(1, R, r + 1)
        image = ax.imshow(aer[r], cmap="viridis_r", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        for (i, j), v in np.ndenumerate(aer[r]):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v > 0.5 else "black")
        ax.set_xticks(range(H1), labels=[*map(str, range(H1 - 1)), "mean"], fontsize=8)
        ax.set_yticks(range(L), labels=[str(i) for i in range(L)], fontsize=8)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{name} readout", fontsize=9)
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="AER")
    return fig


def heatmap_grid(
    weights: np.ndarray, x_labels: Sequence[str], y_labels: Sequence[str], title: str = "", chosen: tuple = ()
) -> Figure:
    """Small multiples of ``weights (layers, heads, T, S)``: a row per layer, a column per head, plus each layer's
    head mean; ``chosen`` (layer, head or None) is framed in red."""
    L, H, T, S = weights.shape
    cols, size = H + 1, max(1.0, min(1.8, 0.12 * max(T, S)))
    fig = Figure(figsize=(0.8 + cols * size, 0.8 + L * size), dpi=DPI, layout="constrained")
    if title:
        fig.suptitle(wrapped(title, fig), fontsize=9)
    small = max(T, S) <= 12
    for layer in range(L):
        for h in range(cols):
            ax = fig.add_subplot(L, cols, layer * cols + h + 1)
            w = weights[layer].mean(0) if h == H else weights[layer, h]
            ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
            if layer == 0:  # heads named above the top row, layers left of the first column: few, larger labels
                ax.set_title("mean" if h == H else f"head {h}", fontsize=9)
            if h == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
            x_ticks, y_ticks = small and layer == L - 1, small and h == 0  # labels on the outer edge only
            ax.set_xticks(range(S) if x_ticks else [], labels=list(x_labels) if x_ticks else [], rotation=90)
            ax.set_yticks(range(T) if y_ticks else [], labels=list(y_labels) if y_ticks else [])
            ax.tick_params(labelsize=6)
            if chosen and (layer, None if h == H else h) == chosen:
                for spine in ax.spines.values():
                    spine.set_edgecolor("red")
                    spine.set_linewidth(2)
    return fig
