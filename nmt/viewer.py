"""The interactive alignment viewer: one self-contained HTML file (``templates/alignments.html`` + the data as JSON).

Each hypothesis carries its cross-attention at the piece level and at the word level (the
aggregation the AER uses), the hard links (each target word to its most attended source word),
and, for a decoder with self-attention, its look-ahead map. No network, no external script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .alignment import attention_links, piece_words, word_attention, word_links
from .data.tokenizer import WORD_START, Tokenizer
from .search import Hypothesis

TEMPLATE = Path(__file__).with_name("templates") / "alignments.html"


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


def _rounded(a: np.ndarray | torch.Tensor) -> list[list[float]]:
    return np.asarray(a, dtype=np.float64).round(4).tolist()


def hypothesis_view(
    tok: Tokenizer, src_ids: Sequence[int], hyp: Hypothesis, self_attention: np.ndarray | None = None
) -> dict:
    """What the viewer draws for one hypothesis of one source."""
    src_pieces, out_pieces = tok.src_pieces(src_ids), tok.output_labels(hyp.tokens)
    tgt_pieces = out_pieces[:-1]  # words and links leave the end of sentence out, as the AER does
    view = {
        "text": tok.decode_tgt([hyp.tokens])[0],
        "score": hyp.score,
        "src_pieces": src_pieces,
        "out_pieces": out_pieces,
        "cross": _rounded(hyp.attention),
        "src_words": words_of(src_pieces),
        "out_words": words_of(tgt_pieces),
        "word_cross": [],
        "links": [],
        "self": None if self_attention is None else _rounded(self_attention),
        "in_pieces": tok.input_labels(hyp.tokens),
    }
    if src_pieces and tgt_pieces:
        words = word_attention(hyp.attention[: len(tgt_pieces)], piece_words(src_pieces), piece_words(tgt_pieces))
        view["word_cross"] = _rounded(words)
        view["links"] = sorted(word_links(words))  # what attention_links gives, from the words computed here
    return view


def write_report(path: str | Path, steps: list[tuple[str, list[dict]]], title: str) -> None:
    """Write the viewer for ``steps`` (label, sentences); several steps get a slider.

    A sentence is ``{"source", "reference" (optional), "hypotheses": [hypothesis_view, ...]}``.
    """
    data = {"title": title, "steps": [{"label": label, "sentences": sentences} for label, sentences in steps]}
    # inside <script>, "</" would end the element: JSON allows the escaped form
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    html = TEMPLATE.read_text(encoding="utf-8").replace("__DATA__", payload)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)


def pharaoh(links: set[tuple[int, int]] | Sequence[tuple[int, int]]) -> str:
    """``{(0, 0), (2, 1)}`` -> ``"0-0 2-1"``: source (French) word - target (English) word, 0-based."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def line_links(tok: Tokenizer, parts: Sequence[tuple[Sequence[int], Sequence[Hypothesis]]]) -> set[tuple[int, int]]:
    """The hard links of a line's best translation; a line translated in parts numbers its words across the parts."""
    links: set[tuple[int, int]] = set()
    src_offset = tgt_offset = 0
    for src_ids, hyps in parts:
        src_pieces, tgt_pieces = tok.src_pieces(src_ids), tok.tgt_pieces(hyps[0].tokens)
        part = attention_links(hyps[0].attention, src_pieces, tgt_pieces) or set()
        links |= {(i + src_offset, j + tgt_offset) for i, j in part}
        src_offset += len(words_of(src_pieces))
        tgt_offset += len(words_of(tgt_pieces))
    return links
