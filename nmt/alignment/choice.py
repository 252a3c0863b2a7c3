"""Which attention a word alignment, a heatmap or the viewer reads: the choice of layer, head, readout, links and
pass, and the maps it picks out of the attention."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from nmt.alignment.symmetrisation import COMBINATIONS

READOUTS = ("output", "input")


CONTEXTS = ("causal", "full")  # the decoder pass attention is read from: as it translates, or seeing the whole target


@dataclass(frozen=True)
class AttentionChoice:
    """Which attention alignments, heatmaps and the viewer read: one ``layer`` (negative: from the last), one
    ``head`` of it or the mean of its heads (None), and a ``readout``: ``output``, the row of the step that
    outputs target piece j, or ``input``, the row of the step whose input is piece j ("Shift-Att", Chen et al.,
    2020); and how hard links are read from the word-level map, ``links``: ``forward``, each target word's most
    attended source word, ``reverse``, each source word's most attending target word, or a symmetrisation of the two
    (:data:`~nmt.alignment.symmetrisation.COMBINATIONS`); ``context``: the decoder pass it is read from, ``causal``
    (as it translates) or ``full`` (a pass that sees the whole target: ``loss.align_full_context``, Transformer only).
    Training measures every choice's AER and records the best in the checkpoint."""

    layer: int = -1
    head: int | None = None
    readout: str = "output"
    links: str = "forward"
    context: str = "causal"

    def check(self, layers: int, heads: int, name: str = "") -> AttentionChoice:
        """``self`` if the attention has this layer and head, else a ValueError naming the setting and range."""
        if not -layers <= self.layer < layers:
            raise ValueError(f"{name}layer={self.layer}: the model has {layers} attention layer(s): 0 to {layers - 1}")
        if self.head is not None and not 0 <= self.head < heads:
            raise ValueError(f"{name}head={self.head}: the model has {heads} head(s): 0 to {heads - 1}, or the mean")
        if self.readout not in READOUTS:
            raise ValueError(f"{name}readout={self.readout!r}: must be one of {', '.join(READOUTS)}")
        if self.links not in COMBINATIONS:
            raise ValueError(f"{name}links={self.links!r}: must be one of {', '.join(COMBINATIONS)}")
        if self.context not in CONTEXTS:
            raise ValueError(f"{name}context={self.context!r}: must be one of {', '.join(CONTEXTS)}")
        return self

    def __str__(self) -> str:
        head = "mean of heads" if self.head is None else f"head {self.head}"
        full = ", full-context pass" if self.context == "full" else ""
        return f"layer {self.layer}, {head}, {self.readout} readout, {self.links} links{full}"

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULT_CHOICE = AttentionChoice()


def attention_map(weights: Tensor, choice: AttentionChoice = DEFAULT_CHOICE) -> Tensor:
    """The map that alignments, heatmaps and the viewer use: ``(..., layers, heads, T, S)`` -> ``(..., T, S)``.

    One layer's head, or the mean of its heads; with the ``input`` readout row j is the step whose input is
    piece j (the row after it), and the last row (the end of sentence, never an input) is zero.
    """
    w = weights[..., choice.layer, :, :, :].float()  # (..., heads, T, S)
    w = w.mean(-3) if choice.head is None else w[..., choice.head, :, :]
    return shifted(w) if choice.readout == "input" else w


def shifted(rows: Tensor) -> Tensor:
    """``(..., T, S)``: row j takes row j + 1, the last row is zero (the Shift-Att readout)."""
    return torch.cat([rows[..., 1:, :], torch.zeros_like(rows[..., :1, :])], dim=-2)


def every_map(weights: Tensor) -> Tensor:
    """Every choice at once: ``(layers, heads, T, S)`` -> ``(readouts, layers, heads + 1, T, S)``; index ``heads``
    on the third axis is the mean of the layer's heads, the first axis follows ``READOUTS``."""
    w = weights.float()
    maps = torch.cat([w, w.mean(1, keepdim=True)], 1)  # (L, H + 1, T, S)
    return torch.stack([maps, shifted(maps)])


def choice_at(index: tuple[int, int, int, int], heads: int) -> AttentionChoice:
    """The choice at ``(readout, layer, head, links)`` of :func:`aer_grid`'s grid (the first three are
    :func:`every_map`'s, the last indexes :data:`~nmt.alignment.symmetrisation.COMBINATIONS`)."""
    r, layer, h, k = index
    return AttentionChoice(layer, None if h == heads else h, READOUTS[r], COMBINATIONS[k])

