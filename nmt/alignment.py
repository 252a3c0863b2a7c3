"""Word alignments from attention, and their error rate against gold links (Och & Ney, 2003)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

from .data.tokenizer import WORD_START
from .symmetrisation import COMBINATIONS, combined

READOUTS = ("output", "input")
CONTEXTS = ("causal", "full")  # the decoder pass attention is read from: as it translates, or seeing the whole target


@dataclass(frozen=True)
class AttentionChoice:
    """Which attention alignments, heatmaps and the viewer read: one ``layer`` (negative: from the last), one
    ``head`` of it or the mean of its heads (None), and a ``readout``: ``output``, the row of the step that
    outputs target piece j, or ``input``, the row of the step whose input is piece j ("Shift-Att", Chen et al.,
    2020); and how hard links are read from the word-level map, ``links``: ``forward``, each target word's most
    attended source word, ``reverse``, each source word's most attending target word, or a symmetrisation of the two
    (:data:`~nmt.symmetrisation.COMBINATIONS`); ``context``: the decoder pass it is read from, ``causal`` (as it
    translates) or ``full`` (a pass that sees the whole target: ``loss.align_full_context``, Transformer only).
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
    :func:`every_map`'s, the last indexes :data:`~nmt.symmetrisation.COMBINATIONS`)."""
    r, layer, h, k = index
    return AttentionChoice(layer, None if h == heads else h, READOUTS[r], COMBINATIONS[k])


def piece_words(pieces: Sequence[str]) -> list[int]:
    """Whitespace-word index of every sentencepiece piece."""
    index, out = -1, []
    for i, p in enumerate(pieces):
        if p.startswith(WORD_START) or i == 0:
            index += 1
        out.append(index)
    return out


def word_attention(weights: Tensor, src_words: Sequence[int], tgt_words: Sequence[int]) -> Tensor:
    """Piece-level weights ``(..., T, S)`` -> word-level ``(..., target words, source words)``.

    A target word's row is the mean of its pieces' rows; a source word's column is the sum of
    its pieces' columns, so each row is still a distribution over source words.
    """
    w = weights.float()
    n_src, n_tgt = max(src_words) + 1, max(tgt_words) + 1
    src_map = torch.zeros(len(src_words), n_src)
    src_map[torch.arange(len(src_words)), torch.tensor(src_words)] = 1.0
    tgt_map = torch.zeros(n_tgt, len(tgt_words))
    tgt_map[torch.tensor(tgt_words), torch.arange(len(tgt_words))] = 1.0
    tgt_map /= tgt_map.sum(1, keepdim=True)
    return tgt_map @ w @ src_map


def parse_links(text: str) -> set[tuple[int, int]]:
    """``"0-0 1-2"`` -> ``{(0, 0), (1, 2)}`` (source word, target word)."""
    return {(int(i), int(j)) for i, j in (link.split("-") for link in text.split())}


@dataclass
class AERCounts:
    """Sums over a corpus: |A∩S|, |A∩P|, |A|, |S|. AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|)."""

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
    (|A∩S|, |A∩P|, |A|, |S| each; the first three axes :func:`every_map`'s, ``links`` following
    :data:`~nmt.symmetrisation.COMBINATIONS`), from teacher-forced attention ``(layers, heads, T + 1, S)``.

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
    the gold words. Validation in training and ``bench/alignment.py`` both fill one."""

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


def attention_links(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    src_words: int | None = None,
    tgt_words: int | None = None,
    links: str = "forward",
) -> set[tuple[int, int]] | None:
    """The word links of a ``(T, S)`` map, read as ``links`` says (:func:`word_links`).

    None when there is nothing to link, or when the pieces do not form ``src_words`` source and
    ``tgt_words`` target words (the word counts of the sentences the gold links number): the
    links would then name other words than the gold ones.
    """
    if not src_pieces or not tgt_pieces:
        return None
    src_index, tgt_index = piece_words(src_pieces), piece_words(tgt_pieces)
    if src_words not in (None, src_index[-1] + 1) or tgt_words not in (None, tgt_index[-1] + 1):
        return None
    return word_links(word_attention(weights[: len(tgt_pieces), : len(src_pieces)], src_index, tgt_index), links)


def word_links(words: Tensor, links: str = "forward") -> set[tuple[int, int]]:
    """``(target words, source words)`` attention -> ``(source word, target word)`` links: ``forward``, each target
    word linked to its most attended source word; ``reverse``, each source word to the target word that attends to
    it most; or both symmetrised (:data:`~nmt.symmetrisation.COMBINATIONS`)."""
    forward = {(i, j) for j, i in enumerate(words.argmax(dim=1).tolist())}
    reverse = {(i, j) for i, j in enumerate(words.argmax(dim=0).tolist())}
    return combined(links, forward, reverse)


def words_of(pieces: Sequence[str]) -> list[str]:
    """The whitespace words that sentencepiece pieces form (as ``piece_words`` groups them)."""
    out: list[str] = []
    for piece, index in zip(pieces, piece_words(pieces)):
        text = piece.replace(WORD_START, "")
        if index == len(out):
            out.append(text)
        else:
            out[-1] += text
    return out


def pharaoh(links: set[tuple[int, int]] | Sequence[tuple[int, int]]) -> str:
    """``{(0, 0), (2, 1)}`` -> ``"0-0 2-1"``: source (French) word - target (English) word, 0-based."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def part_links(
    parts: Sequence[tuple[Sequence[str], Sequence[str], Tensor]], links: str = "forward"
) -> set[tuple[int, int]]:
    """The hard links (read as ``links`` says) of a line translated in parts ``(source pieces, target pieces,
    attention (T, S))``, its words numbered across the parts."""
    found: set[tuple[int, int]] = set()
    src_offset = tgt_offset = 0
    for src_pieces, tgt_pieces, weights in parts:
        part = attention_links(weights, src_pieces, tgt_pieces, links=links) or set()
        found |= {(i + src_offset, j + tgt_offset) for i, j in part}
        src_offset += len(words_of(src_pieces))
        tgt_offset += len(words_of(tgt_pieces))
    return found
