"""#82 §8: the heatmaps TensorBoard shows are readable at its card's size, and no title is cut off."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from nmt.views.plotting import aer_grid_figure, heatmap, heatmap_grid

CARD = 500  # pixels: about the width TensorBoard's image card scales a figure down to


def texts_outside(fig) -> list[str]:
    """The texts of ``fig`` that reach beyond its canvas once drawn."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer, width, height = canvas.get_renderer(), *canvas.get_width_height()
    out = []
    for text in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible() and a.get_text()):
        box = text.get_window_extent(renderer)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1:
            out.append(text.get_text())
    return out


LONG = "a choice named at length: layer 0, mean of heads, output readout, intersection links, read from the decoder"


@pytest.mark.parametrize("shape", [(1, 1, 2), (2, 1, 2), (2, 6, 9)])
def test_the_aer_grid_s_title_and_labels_stay_inside_the_figure(shape):
    assert texts_outside(aer_grid_figure(np.random.default_rng(0).random(shape), ["input", "output"][: shape[0]],
                                         LONG)) == []  # fmt: skip


def test_the_heatmaps_titles_and_labels_stay_inside_the_figure():
    rng = np.random.default_rng(1)
    pieces = [f"▁piece{i}" for i in range(12)]
    assert texts_outside(heatmap(rng.random((12, 12)), pieces, pieces, title=f"hyp: {LONG}")) == []
    assert texts_outside(heatmap_grid(rng.random((2, 4, 12, 12)), pieces, pieces, f"hyp: {LONG}", (1, None))) == []


def test_a_heatmap_of_a_thirty_piece_sentence_keeps_readable_labels_on_tensorboard_s_card():
    fig = heatmap(np.random.default_rng(2).random((30, 30)), ["▁mot"] * 30, ["▁word"] * 30, title="hyp")
    width = fig.get_figwidth() * fig.dpi
    shown = min(1.0, CARD / width)  # the card scales the image down to its width
    label = fig.axes[0].get_xticklabels()[0].get_fontsize() * fig.dpi / 72  # pixels in the image
    assert label * shown >= 8, (width, label * shown)
