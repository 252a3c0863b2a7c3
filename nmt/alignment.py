"""Word alignments from attention, and their error rate against gold links (Och & Ney, 2003)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .data.tokenizer import WORD_START


def attention_map(weights: Tensor, layer: int = -1) -> Tensor:
    """The map that alignments, heatmaps and the viewer use: the mean of one layer's heads.

    ``(..., layers, heads, T, S)`` -> ``(..., T, S)``; the last layer unless ``layer`` says otherwise.
    """
    return weights[..., layer, :, :, :].float().mean(-3)


def piece_words(pieces: Sequence[str]) -> list[int]:
    """Whitespace-word index of every sentencepiece piece."""
    index, out = -1, []
    for i, p in enumerate(pieces):
        if p.startswith(WORD_START) or i == 0:
            index += 1
        out.append(index)
    return out


def word_attention(weights: Tensor, src_words: Sequence[int], tgt_words: Sequence[int]) -> Tensor:
    """Piece-level weights ``(T, S)`` -> word-level ``(target words, source words)``.

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


def attention_links(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    src_words: int | None = None,
    tgt_words: int | None = None,
) -> set[tuple[int, int]] | None:
    """One link per target word to its most attended source word.

    None when there is nothing to link, or when the pieces do not form ``src_words`` source and
    ``tgt_words`` target words (the word counts of the sentences the gold links number): the
    links would then name other words than the gold ones.
    """
    if not src_pieces or not tgt_pieces:
        return None
    src_index, tgt_index = piece_words(src_pieces), piece_words(tgt_pieces)
    if src_words not in (None, src_index[-1] + 1) or tgt_words not in (None, tgt_index[-1] + 1):
        return None
    return word_links(word_attention(weights[: len(tgt_pieces), : len(src_pieces)], src_index, tgt_index))


def word_links(words: Tensor) -> set[tuple[int, int]]:
    """``(target words, source words)`` attention -> each target word linked to its most attended source word."""
    return {(i, j) for j, i in enumerate(words.argmax(dim=1).tolist())}


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


def part_links(parts: Sequence[tuple[Sequence[str], Sequence[str], Tensor]]) -> set[tuple[int, int]]:
    """The hard links of a line translated in parts ``(source pieces, target pieces, attention (T, S))``,
    its words numbered across the parts."""
    links: set[tuple[int, int]] = set()
    src_offset = tgt_offset = 0
    for src_pieces, tgt_pieces, weights in parts:
        part = attention_links(weights, src_pieces, tgt_pieces) or set()
        links |= {(i + src_offset, j + tgt_offset) for i, j in part}
        src_offset += len(words_of(src_pieces))
        tgt_offset += len(words_of(tgt_pieces))
    return links
