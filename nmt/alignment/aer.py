"""Alignment error rate against gold links (Och & Ney, 2003): for a corpus, and for every attention choice at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nmt.alignment.choice import AttentionChoice, choice_at, every_map
from nmt.alignment.symmetrisation import COMBINATIONS, combined
from nmt.alignment.words import piece_words, word_attention


@dataclass
class AERCounts:
    """Sums over a corpus: ``|A∩S|``, ``|A∩P|``, ``|A|``, ``|S|``. ``AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)``."""

    a_s: int = 0
    a_p: int = 0
    a: int = 0
    s: int = 0

    def add(self, links: set[tuple[int, int]], sure: set[tuple[int, int]], possible: set[tuple[int, int]]) -> None:
        self.a_s += len(links & sure)
        self.a_p += len(links & (possible | sure))
        self.a += len(links)
        self.s += len(sure)

    def as_tensor(self) -> Tensor:
        return torch.tensor([self.a_s, self.a_p, self.a, self.s], dtype=torch.float64)

    def scores(self) -> tuple[float, float, float]:
        """AER, precision ``|A∩P| / |A|`` and recall ``|A∩S| / |S|`` (NaN where there is nothing to count)."""
        nan = float("nan")
        precision = self.a_p / self.a if self.a else nan
        recall = self.a_s / self.s if self.s else nan
        return AERCounts.aer(self.as_tensor()), precision, recall

    @staticmethod
    def aer(counts: Tensor) -> float:
        a_s, a_p, a, s = counts.tolist()
        return 1.0 - (a_s + a_p) / (a + s) if a + s else float("nan")

    @staticmethod
    def aers(counts: Tensor) -> Tensor:
        """AER of every entry of ``counts (..., 4)`` (NaN where there is nothing to count)."""
        a_s, a_p, a, s = counts.double().unbind(-1)
        return 1.0 - (a_s + a_p) / (a + s)


def aer_grid(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    sure: set[tuple[int, int]],
    possible: set[tuple[int, int]],
    words: tuple[int, int],
) -> Tensor | None:
    """AER counts of the links of every choice for one sentence pair: ``(readouts, layers, heads + 1, links, 4)``
    (``|A∩S|``, ``|A∩P|``, ``|A|``, ``|S|`` each; the first three axes :func:`every_map`'s, ``links`` following
    :data:`~nmt.alignment.symmetrisation.COMBINATIONS`), from teacher-forced attention ``(layers, heads, T + 1, S)``.

    None where the pieces do not form the ``words`` (source, target) that the gold links number.
    """
    if not src_pieces or not tgt_pieces:
        return None
    src_index, tgt_index = piece_words(src_pieces), piece_words(tgt_pieces)
    if (src_index[-1] + 1, tgt_index[-1] + 1) != tuple(words):
        return None
    maps = every_map(weights)[..., : len(tgt_pieces), : len(src_pieces)]
    w = word_attention(maps, src_index, tgt_index)  # (R, L, H + 1, target words, source words)
    forward, reverse = w.argmax(-1).tolist(), w.argmax(-2).tolist()  # each target word's source word, and back
    sure_p, counts = sure | possible, []
    for r, layer, h in np.ndindex(*w.shape[:3]):
        f = {(i, j) for j, i in enumerate(forward[r][layer][h])}
        b = {(i, j) for i, j in enumerate(reverse[r][layer][h])}
        for name in COMBINATIONS:
            links = combined(name, f, b)
            counts.append((len(links & sure), len(links & sure_p), len(links), len(sure)))
    return torch.tensor(counts, dtype=torch.int64).view(*w.shape[:3], len(COMBINATIONS), 4)


@dataclass
class AERGrid:
    """The AER of every attention choice over a corpus, added up one sentence pair at a time: ``counts`` sums
    :func:`aer_grid` ``(readouts, layers, heads + 1, links, 4)``; ``skipped`` counts the pairs whose pieces do not form
    the gold words. Validation in training and ``bench/alignment/alignment.py`` both fill one."""

    counts: Tensor | None = None
    skipped: int = 0

    def add(self, counts: Tensor | None) -> None:
        """One pair's :func:`aer_grid` (None: its pieces do not form the gold words, so it is left out)."""
        if counts is None:
            self.skipped += 1
        else:
            self.counts = counts if self.counts is None else self.counts + counts

    @staticmethod
    def merged(parts: Sequence[AERGrid]) -> AERGrid:
        """The sum of several (e.g. every rank's share of a split)."""
        counts = [p.counts for p in parts if p.counts is not None]
        return AERGrid(sum(counts[1:], counts[0]) if counts else None, sum(p.skipped for p in parts))

    def aers(self) -> Tensor | None:
        """The AER of every choice ``(readouts, layers, heads + 1, links)`` (NaN where nothing was counted), or None."""
        return None if self.counts is None else AERCounts.aers(self.counts)

    def best(self) -> tuple[AttentionChoice, float] | None:
        """The choice of lowest AER (the first of equals, in grid order) and its AER, or None."""
        aer = self.aers()
        if aer is None:
            return None
        index = tuple(int(i) for i in np.unravel_index(int(aer.nan_to_num(2.0).argmin()), aer.shape))
        return choice_at(index, aer.shape[2] - 1), float(aer[index])

