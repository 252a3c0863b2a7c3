"""The interactive alignment viewer: one self-contained HTML file (``templates/alignments.html`` + the data as JSON).

Each hypothesis carries the cross-attention of every layer and head, and for the chosen one (an
:class:`~nmt.alignment.AttentionChoice`: what alignments read) the map at the piece level and at the
word level (the aggregation the AER uses), the hard links (each target word to its most attended
source word) and, for a decoder with self-attention, the look-ahead map of the chosen layer. The page
lets one pick any layer, head (or a layer's head mean) and readout, and recomputes the word map and
links from it as :mod:`nmt.alignment` does. No network, no external script.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .alignment import DEFAULT_CHOICE, AttentionChoice, attention_map, piece_words, word_attention, word_links, words_of
from .data.tokenizer import Tokenizer
from .search import Decodable, Hypothesis

TEMPLATE = Path(__file__).with_name("templates") / "alignments.html"
# inside <script>, markup ("</script>", "<!--") changes how the page parses, and U+2028/U+2029 end a line in
# older JavaScript: JSON allows every one of them as a \uXXXX escape, which no text can turn back into markup
SCRIPT_SAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def _rounded(a: np.ndarray | torch.Tensor) -> list[list[float]]:
    return np.asarray(a, dtype=np.float64).round(4).tolist()


def sentence_views(
    model: Decodable,
    tok: Tokenizer,
    source: str,
    parts: Sequence[tuple[Sequence[int], Sequence[Hypothesis]]],
    reference: str | None = None,
    choice: AttentionChoice = DEFAULT_CHOICE,
) -> list[dict]:
    """The viewer's sentences for one line: each part (one unless the line was split) with its n-best, each
    hypothesis with its cross-attention and, where the decoder has it, its self-attention (re-read teacher-forced).

    The one way attention is exported: ``translate.py --html``/``--attention-dir`` and training's viewer and
    TensorBoard heatmaps all build on these dictionaries.
    """
    device = next(model.parameters()).device
    sentences = []
    for k, (src_ids, hyps) in enumerate(parts):
        src = torch.tensor([list(src_ids)], device=device)
        views = []
        for hyp in hyps:
            _, _, self_map = model.read(src, torch.tensor([len(src_ids)], device=device), hyp.tokens)
            views.append(hypothesis_view(tok, src_ids, hyp, self_map, choice))
        title = source if len(parts) == 1 else f"{source} (part {k + 1} of {len(parts)})"
        sentence = {"source": title, "hypotheses": views}
        if reference is not None:
            sentence["reference"] = reference
        sentences.append(sentence)
    return sentences


def hypothesis_view(
    tok: Tokenizer,
    src_ids: Sequence[int],
    hyp: Hypothesis,
    self_attention: Tensor | None,
    choice: AttentionChoice = DEFAULT_CHOICE,
) -> dict:
    """What the viewer draws for one hypothesis of one source: the maps of :func:`~nmt.alignment.attention_map`
    for ``choice``, and every layer's and head's cross-attention ``(layers, heads, T + 1, S)`` for the selector."""
    cross = attention_map(hyp.attention, choice)  # (T + 1, S)
    layers = hyp.attention.shape[0]
    src_pieces, out_pieces = tok.src_pieces(src_ids), tok.output_labels(hyp.tokens)
    tgt_pieces = out_pieces[:-1]  # words and links leave the end of sentence out, as the AER does
    view = {
        "text": tok.decode_tgt([hyp.tokens])[0],
        "score": hyp.score,
        "src_pieces": src_pieces,
        "out_pieces": out_pieces,
        "cross": _rounded(cross),
        "src_words": words_of(src_pieces),
        "out_words": words_of(tgt_pieces),
        "word_cross": [],
        "links": [],
        "self": None,
        "in_pieces": tok.input_labels(hyp.tokens),
        "heads": _rounded(hyp.attention),  # (layers, heads, T + 1, S)
        "choice": {**choice.as_dict(), "layer": choice.layer % layers},
        "src_word_of": piece_words(src_pieces) if src_pieces else [],
        "out_word_of": piece_words(tgt_pieces) if tgt_pieces else [],
    }
    if self_attention is not None:  # the chosen layer's look-ahead map, output rows (no readout shift)
        view["self"] = _rounded(attention_map(self_attention.cpu(), AttentionChoice(choice.layer, choice.head)))
    if src_pieces and tgt_pieces:
        words = word_attention(cross[: len(tgt_pieces)], piece_words(src_pieces), piece_words(tgt_pieces))
        view["word_cross"] = _rounded(words)
        view["links"] = sorted(word_links(words))  # what attention_links gives, from the words computed here
    return view


def render(data: dict) -> str:
    """The viewer page with ``data`` (``{"title", "steps": [{"label", "sentences"}], "live" (optional)}``) inside.

    ``live`` (the server's page): ``{"beam_size", "nbest", "max_beam", "max_lines", "max_chars"}``; the page then
    has a form that posts to ``translate`` and draws the answer's sentences.
    """
    payload = json.dumps(data, ensure_ascii=False).translate(SCRIPT_SAFE)
    return TEMPLATE.read_text(encoding="utf-8").replace("__DATA__", payload)


def write_report(path: str | Path, steps: list[tuple[str, list[dict]]], title: str) -> None:
    """Write the viewer for ``steps`` (label, sentences); several steps get a slider.

    A sentence is ``{"source", "reference" (optional), "hypotheses": [hypothesis_view, ...]}``.
    """
    html = render({"title": title, "steps": [{"label": label, "sentences": sentences} for label, sentences in steps]})
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
