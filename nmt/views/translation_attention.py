"""The attention of a translation: one type for what every view of attention shows.

A :class:`HypothesisAttention` is one hypothesis of one source with its cross-attention (every layer and head, and
the map that the :class:`~nmt.alignment.choice.AttentionChoice` reads), its word-level map and hard links, and, for a
decoder with self-attention, the look-ahead map of the chosen layer. A :class:`SentenceAttention` is one source (or
one part of a split line) with its n-best. The viewer, ``translate.py --html``/``--attention-dir``, the server's
answers and training's heatmaps all build on them; JSON is made only at those edges (:meth:`to_json`).

Weights are kept to 4 decimals, the precision every export shows, so a heatmap drawn from a view and the JSON
written from it agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nmt.alignment.choice import DEFAULT_CHOICE, AttentionChoice, attention_map
from nmt.alignment.words import piece_words, word_attention, word_links, words_of
from nmt.data.tokenizer import Tokenizer
from nmt.inference.engine import InferenceEngine, as_engine
from nmt.inference.search import Decodable, Hypothesis


def exported(weights: np.ndarray | Tensor) -> np.ndarray:
    """Weights as every export shows them: float64, 4 decimals (a tensor of any dtype or device, on the host)."""
    if isinstance(weights, Tensor):
        weights = weights.detach().double().cpu().numpy()
    return np.asarray(weights, dtype=np.float64).round(4)


@dataclass(frozen=True)
class HypothesisAttention:
    """One hypothesis and its attention. Pieces: ``src_pieces`` (S), ``out_pieces`` (the T + 1 outputs, the end of
    sentence last), ``in_pieces`` (the decoder's inputs); maps: ``heads (layers, heads, T + 1, S)``, ``cross
    (T + 1, S)`` (the ``choice``'s map, its layer counted from 0), ``word_cross (target words, source words)``
    (None where either side has no piece), ``self_map (T + 1, T + 1)`` or None; ``links``: the word links read from
    ``word_cross`` as the choice says (e.g. each target word's most attended source word), ``(source word, target
    word)`` sorted."""

    text: str
    score: float
    src_pieces: list[str]
    out_pieces: list[str]
    in_pieces: list[str]
    heads: np.ndarray
    choice: AttentionChoice
    cross: np.ndarray
    word_cross: np.ndarray | None = None
    self_map: np.ndarray | None = None
    links: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        tok: Tokenizer,
        src_ids: Sequence[int],
        hyp: Hypothesis,
        self_attention: Tensor | None,
        choice: AttentionChoice = DEFAULT_CHOICE,
    ) -> HypothesisAttention:
        """The attention of ``hyp`` (its cross-attention ``(layers, heads, T + 1, S)``) read with ``choice``; the
        self-attention is the teacher-forced re-read's, or None."""
        cross = attention_map(hyp.attention, choice)  # (T + 1, S)
        src_pieces, out_pieces = tok.src_pieces(src_ids), tok.output_labels(hyp.tokens)
        tgt_pieces = out_pieces[:-1]  # words and links leave the end of sentence out, as the AER does
        word_cross, links = None, []
        if src_pieces and tgt_pieces:
            words = word_attention(cross[: len(tgt_pieces)], piece_words(src_pieces), piece_words(tgt_pieces))
            word_cross, links = exported(words), sorted(word_links(words, choice.links))  # what attention_links gives
        self_map = None
        if self_attention is not None:  # the chosen layer's look-ahead map, output rows (no readout shift)
            self_map = exported(attention_map(self_attention.cpu(), AttentionChoice(choice.layer, choice.head)))
        layers = hyp.attention.shape[0]
        return cls(
            text=tok.decode_tgt([hyp.tokens])[0],
            score=hyp.score,
            src_pieces=src_pieces,
            out_pieces=out_pieces,
            in_pieces=tok.input_labels(hyp.tokens),
            heads=exported(hyp.attention),
            choice=replace(choice, layer=choice.layer % layers),
            cross=exported(cross),
            word_cross=word_cross,
            self_map=self_map,
            links=links,
        )

    @property
    def src_words(self) -> list[str]:
        return words_of(self.src_pieces)

    @property
    def out_words(self) -> list[str]:
        return words_of(self.out_pieces[:-1])

    def to_json(self) -> dict[str, Any]:
        """The viewer's, the server's and ``--attention-dir``'s form of it."""
        tgt_pieces = self.out_pieces[:-1]
        return {
            "text": self.text,
            "score": self.score,
            "src_pieces": self.src_pieces,
            "out_pieces": self.out_pieces,
            "cross": self.cross.tolist(),
            "src_words": self.src_words,
            "out_words": self.out_words,
            "word_cross": [] if self.word_cross is None else self.word_cross.tolist(),
            "links": [list(link) for link in self.links],
            "self": None if self.self_map is None else self.self_map.tolist(),
            "in_pieces": self.in_pieces,
            "heads": self.heads.tolist(),
            "choice": self.choice.as_dict(),
            "src_word_of": piece_words(self.src_pieces) if self.src_pieces else [],
            "out_word_of": piece_words(tgt_pieces) if tgt_pieces else [],
        }


@dataclass(frozen=True)
class SentenceAttention:
    """One source line (or one part of a split line: ``source`` says which) with its hypotheses' attention."""

    source: str
    hypotheses: list[HypothesisAttention]
    reference: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "hypotheses": [h.to_json() for h in self.hypotheses]}
        if self.reference is not None:
            out["reference"] = self.reference
        return out


def sentence_attention(
    model: InferenceEngine | Decodable,
    tok: Tokenizer,
    source: str,
    parts: Sequence[tuple[Sequence[int], Sequence[Hypothesis]]],
    reference: str | None = None,
    choice: AttentionChoice = DEFAULT_CHOICE,
) -> list[SentenceAttention]:
    """The attention of one line's translation: each part (one unless the line was split) with its n-best, each
    hypothesis with its cross-attention and, where the decoder has it, its self-attention (re-read teacher-forced;
    both from the pass that sees the whole output where ``choice`` reads that one)."""
    engine = as_engine(model)  # a PyTorch model is run by PyTorchEngine
    device = engine.device
    sentences = []
    full = choice.context == "full"
    for k, (src_ids, hyps) in enumerate(parts):
        src = torch.tensor([list(src_ids)], device=device)
        views = []
        for hyp in hyps:
            _, cross, self_map = engine.read(src, torch.tensor([len(src_ids)], device=device), hyp.tokens, full)
            hyp = replace(hyp, attention=cross.cpu()) if full else hyp
            views.append(HypothesisAttention.of(tok, src_ids, hyp, self_map, choice))
        title = source if len(parts) == 1 else f"{source} (part {k + 1} of {len(parts)})"
        sentences.append(SentenceAttention(title, views, reference))
    return sentences
