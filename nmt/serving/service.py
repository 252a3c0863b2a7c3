"""What the translation server translates with: the loaded model (or ensemble), a ``Translator`` per search
options, and each line's answer as JSON: its n-best with scores and, when asked, its attention in the viewer's
format (the dictionaries ``translate.py --html`` writes). No web code here: the server calls :meth:`run` from
its batcher's worker thread."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from nmt.alignment.choice import AttentionChoice
from nmt.commands import named_as_started
from nmt.data.readers import normalize
from nmt.inference.aligner import Aligner
from nmt.inference.loading import TranslationModel
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translation, Translator
from nmt.views.translation_attention import sentence_attention


@dataclass(frozen=True)
class Options:
    """What a request may choose; requests share a batch when theirs are equal."""

    beam_size: int
    nbest: int
    attention: bool = False
    align: bool = False  # each line a (source, translation) pair: aligned (forced decoding), not translated


class TranslationService:
    """One model (an ensemble, an exported model) answering batches of lines, as ``translate.py`` would with the
    same options."""

    def __init__(
        self,
        loaded: TranslationModel,
        search: SearchOptions | None = None,
        batching: Batching | None = None,
        alignment: AttentionChoice | None = None,
        reverse: TranslationModel | None = None,
        symmetrisation: str = Aligner.symmetrisation,
    ):
        self.model, self.tok, self.info = loaded.model, loaded.tokenizer, loaded.info
        self.search, self.batching = search or SearchOptions(), batching or Batching()
        self.alignment = loaded.resolve(alignment or loaded.recorded)
        self._translators: dict[tuple[int, int], Translator] = {}
        self.aligner = Aligner.of(self.translator(self.defaults), reverse, symmetrisation)
        if reverse is not None:  # what aligns besides the model: GET /model tells it
            self.info = {**self.info, "reverse": {**reverse.info, "symmetrisation": symmetrisation}}

    @property
    def defaults(self) -> Options:
        return Options(self.search.beam_size, self.search.nbest)

    def translator(self, options: Options) -> Translator:
        key = (options.beam_size, options.nbest)
        if key not in self._translators:
            search = replace(self.search, beam_size=options.beam_size, nbest=options.nbest)
            self._translators[key] = Translator(self.model, self.tok, search, self.batching, self.alignment)
        return self._translators[key]

    def long_pair(self, sources: list[str], targets: list[str]) -> str | None:
        """One line for the first pair to align that is too long to read whole where lines are split (its sources
        numbered ``src[i]``), else None (``--long-lines truncate`` cuts it, as ``translate.py`` does)."""
        forward = self.aligner.forward
        if forward.batching.long_lines != "split" or not (long := forward.long_pairs(sources, targets)):
            return None
        k, src, tgt = long[0]
        m = forward.batching.max_src_len
        return named_as_started(
            f"src[{k}]: a pair of {src} and {tgt} pieces, more than the {m} a side this server reads (serve.py "
            "--max-src-len): a pair is aligned whole, never split; send shorter pairs"
        )

    def cost(self, line: str) -> int:
        """A line's source tokens (what a batch's budget counts)."""
        text = normalize(line)
        return len(self.tok.encode_src([text])[0]) if text else 0

    def run(self, options: Options, lines: list[str] | list[tuple[str, str]]) -> list[dict[str, Any]]:
        """Each line's answer (:func:`answer`), in order; with ``options.align`` each line is a (source, translation)
        pair and its answer is that translation's, with its word links (the reverse model's symmetrised in, where
        one was given; the attention is the forward model's)."""
        with torch.inference_mode():
            if not options.align:
                translator = self.translator(options)
                return [answer(r, translator, options.attention) for r in translator.translate(lines)]
            sources, targets = zip(*lines)
            aligner, forced, links = self.aligner.run(list(sources), list(targets))
            answers = [answer(r, aligner.forward, options.attention) for r in forced]
            for a, line_links, target in zip(answers, links, targets):
                a["tgt"] = a["nbest"][0]["tgt"] = target  # the given translation, as it was given
                a["nbest"], a["links"] = a["nbest"][:1], sorted(line_links)
            return answers


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
        model, tok, choice = translator.engine, translator.tok, translator.alignment
        sentences = sentence_attention(model, tok, result.source, result.parts, choice=choice)
        out["attention"] = [s.to_json() for s in sentences]
    return out
