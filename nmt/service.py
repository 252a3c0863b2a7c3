"""What the translation server translates with: the loaded model (or ensemble), a ``Translator`` per search
options, and each line's answer as JSON: its n-best with scores and, when asked, its attention in the viewer's
format (the dictionaries ``translate.py --html`` writes). No web code here: the server calls :meth:`run` from
its batcher's worker thread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from . import checkpoint, ensemble
from .alignment import AttentionChoice
from .data.readers import normalize
from .search import SearchOptions
from .translation_attention import sentence_attention
from .translator import Batching, Translation, Translator


@dataclass(frozen=True)
class Options:
    """What a request may choose; requests share a batch when theirs are equal."""

    beam_size: int
    nbest: int
    attention: bool = False


class TranslationService:
    """One model (or an ensemble) answering batches of lines, as ``translate.py`` would with the same options."""

    def __init__(
        self,
        members: Sequence[checkpoint.Loaded],
        search: SearchOptions | None = None,
        batching: Batching | None = None,
        alignment: AttentionChoice | None = None,
    ):
        self.model, self.tok, recorded = ensemble.assemble(members)
        self.search, self.batching = search or SearchOptions(), batching or Batching()
        self.alignment = (alignment or recorded).check(*self.model.attention_layout, name="--align-")
        self.info = model_info(members, self.model)
        self._translators: dict[tuple[int, int], Translator] = {}

    @property
    def defaults(self) -> Options:
        return Options(self.search.beam_size, self.search.nbest)

    def translator(self, options: Options) -> Translator:
        key = (options.beam_size, options.nbest)
        if key not in self._translators:
            search = replace(self.search, beam_size=options.beam_size, nbest=options.nbest)
            self._translators[key] = Translator(self.model, self.tok, search, self.batching, self.alignment)
        return self._translators[key]

    def cost(self, line: str) -> int:
        """A line's source tokens (what a batch's budget counts)."""
        text = normalize(line)
        return len(self.tok.encode_src([text])[0]) if text else 0

    def run(self, options: Options, lines: list[str]) -> list[dict[str, Any]]:
        """Each line's answer (:func:`answer`), in order."""
        translator = self.translator(options)
        with torch.inference_mode():
            return [answer(r, translator, options.attention) for r in translator.translate(lines)]


def answer(result: Translation, translator: Translator, attention: bool) -> dict[str, Any]:
    """``{"src", "tgt", "score", "nbest": [{"tgt", "score"}, ...]}`` and with ``attention`` the viewer's
    sentences of the line (one per part of a split line, each hypothesis with every layer's and head's map).
    A line with nothing to translate gets the empty translation, score 0, at every rank (as OpenNMT-py's server)."""
    texts, scores = result.texts, result.scores
    if not texts:
        texts, scores = [""] * translator.search.nbest, [0.0] * translator.search.nbest
    out: dict[str, Any] = {
        "src": result.source,
        "tgt": texts[0],
        "score": scores[0],
        "nbest": [{"tgt": t, "score": s} for t, s in zip(texts, scores)],
    }
    if attention:
        model, tok, choice = translator.model, translator.tok, translator.alignment
        sentences = sentence_attention(model, tok, result.source, result.parts, choice=choice)
        out["attention"] = [s.to_json() for s in sentences]
    return out


def model_info(members: Sequence[checkpoint.Loaded], model: torch.nn.Module) -> dict[str, Any]:
    """What ``GET /model`` tells: per checkpoint (file name only) its model settings, training step and
    recorded validation BLEU; the parameters, both vocabularies and the attention layout of what translates."""
    layers, heads = model.attention_layout
    tok = members[0].tokenizer
    return {
        "kind": "ensemble" if len(members) > 1 else members[0].checkpoint.model_settings.get("name"),
        "parameters": sum(p.numel() for p in model.parameters()),
        "attention": {"layers": layers, "heads": heads},
        "vocabulary": {"source": tok.src_vocab_size, "target": tok.tgt_vocab_size},
        "checkpoints": [member_info(m) for m in members],
    }


def member_info(member: checkpoint.Loaded) -> dict[str, Any]:
    saved = member.checkpoint
    bleu = saved.best_score if saved.monitor == "val/bleu" else None
    return {
        "file": member.path.name,
        "model": saved.model_settings,
        "step": saved.step,
        "epoch": saved.epoch,
        "validation_bleu": None if bleu is None else round(bleu, 2),
        "alignment": saved.alignment_record,
    }
