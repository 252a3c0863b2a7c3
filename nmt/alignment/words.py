"""From piece-level attention to word-level attention and hard word links."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from nmt.alignment.symmetrisation import combined
from nmt.specials import WORD_START


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
    n_src, n_tgt, on = max(src_words) + 1, max(tgt_words) + 1, {"device": w.device}
    src_map = torch.zeros(len(src_words), n_src, **on)
    src_map[torch.arange(len(src_words), **on), torch.tensor(src_words, **on)] = 1.0
    tgt_map = torch.zeros(n_tgt, len(tgt_words), **on)
    tgt_map[torch.tensor(tgt_words, **on), torch.arange(len(tgt_words), **on)] = 1.0
    tgt_map /= tgt_map.sum(1, keepdim=True)
    return tgt_map @ w @ src_map


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
    it most; or both symmetrised (:data:`~nmt.alignment.symmetrisation.COMBINATIONS`)."""
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

