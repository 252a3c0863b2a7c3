"""A word aligner made of translation models: the links of given (source, translation) pairs read from one model's
attention, or from two models trained in opposite directions (fr→en and en→fr) and symmetrised as a statistical
aligner's two directions are. ``align.py`` and the server's ``ref`` both align with it. Models adapted
to the pairs under a statistical aligner's guidance (:meth:`Aligner.adapted`) are then read as agrees best with the
links that guided them (:meth:`Aligner.closest`), as training records its attention choice where there is no gold."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from nmt.alignment.aer import AERCounts
from nmt.alignment.symmetrisation import COMBINATIONS, Links, combined, turned
from nmt.inference.adaptation import Adaptation, Job, adapted_together
from nmt.inference.loading import TranslationModel
from nmt.inference.translator import Translation, Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Aligner:
    """``forward`` reads the source with its translation (forced decoding); ``backward``, a model trained the
    other way, reads the translation with its source, its links turned round and combined with ``forward``'s
    by ``symmetrisation`` (``nmt.alignment.symmetrisation.COMBINATIONS``)."""

    forward: Translator
    backward: Translator | None = None
    symmetrisation: str = "grow-diag-final-and"

    @classmethod
    def of(cls, forward: Translator, backward: TranslationModel | None, symmetrisation: str) -> Aligner:
        """``forward`` alone, or with ``backward`` (a model trained the other way) read with ``forward``'s search and
        batching and the attention choice its own checkpoint recorded."""
        if backward is None:
            return cls(forward)
        choice = backward.resolve(backward.recorded, name="--reverse-ckpt's recorded ")
        other = Translator(backward.model, backward.tokenizer, forward.search, forward.batching, choice, searches=False)
        return cls(forward, other, symmetrisation)

    def adapted(
        self, sources: list[str], targets: list[str], how: Adaptation, links: list[Links] | None = None
    ) -> Aligner:
        """This aligner with each model adapted to the pairs it will align (:mod:`nmt.inference.adaptation`):
        ``forward`` on (source, translation), ``backward`` on (translation, source); with ``links`` (each pair's
        (source word, translation word) links, a statistical aligner's) each model's recorded attention is guided
        towards them (``backward``'s turned round)."""
        if how.epochs == 0:
            return self
        fw, bw, m = self.forward, self.backward, self.forward.batching.max_src_len  # longer pairs: read cut, not learnt
        jobs = [Job(fw.engine.module, fw.tok, sources, targets, how, links, fw.alignment, m)]
        if bw is not None:
            turn = None if links is None else [turned(x) for x in links]
            jobs.append(Job(bw.engine.module, bw.tok, targets, sources, how, turn, bw.alignment, m))
        models = adapted_together(jobs)
        backward = None if bw is None else reading(bw, model=models[1])
        return Aligner(reading(fw, model=models[0]), backward, self.symmetrisation)

    def closest(
        self,
        sources: list[str],
        targets: list[str],
        links: list[Links],
        readings: Sequence[str] = COMBINATIONS,
        rules: Sequence[str] = COMBINATIONS,
    ) -> Aligner:
        """This aligner with the hard links of its models' attention read (one of ``readings``, for both models) and
        joined (one of ``rules``, where there are two models) as agrees best with ``links`` (each pair's, e.g. the
        statistical aligner's that guided the models: training records its attention choice the same way where a
        corpus has no gold links); the first in order of ``readings``, then ``rules``, where several tie."""
        forward = self.forward.force(sources, targets)
        backward = None if self.backward is None else self.backward.force(targets, sources)
        scored: list[tuple[float, Aligner]] = []
        for read in readings:  # each model's links read once a reading, then joined by each rule
            one = Aligner(reading(self.forward, read), self.backward and reading(self.backward, read))
            fw, bw = one.directions(forward, backward)
            for rule in rules if bw is not None else [self.symmetrisation]:
                found = fw if bw is None else [combined(rule, f, r) for f, r in zip(fw, bw)]
                scored.append((agreement(found, links), replace(one, symmetrisation=rule)))
        score, chosen = min(scored, key=lambda x: (math.isnan(x[0]), x[0]))  # the first of the best; NaN: no link
        pair = f", the two models' combined as {chosen.symmetrisation}" if self.backward is not None else ""
        log.info("links read as %s%s: AER %.4f against the guiding links", chosen.forward.alignment.links, pair, score)
        return chosen

    def run(
        self,
        sources: list[str],
        targets: list[str],
        how: Adaptation | None = None,
        guide: list[Links] | None = None,
        reading: str | None = None,
        rule: str | None = None,
    ) -> tuple[Aligner, list[Translation], list[Links]]:
        """``align.py``'s and the server's alignments in one call: each model adapted to the pairs as
        ``how`` says (guided towards ``guide``, each pair's links, where given); with a guide, the links read and
        joined as agree best with it, but for what ``reading`` (how each model's links are read) and ``rule`` (how
        two models' are joined) fix; then every pair aligned. Returns the aligner that aligned (its ``forward`` is the
        model whose attention the views show), each pair's forced reading and its links."""
        if how is not None and how.epochs:  # before adapting (a forced reading refuses such a pair itself)
            self.check_lengths(sources, targets)
        aligner = self if how is None else self.adapted(sources, targets, how, guide)
        if guide is not None:
            readings, rules = ([x] if x else COMBINATIONS for x in (reading, rule))
            aligner = aligner.closest(sources, targets, guide, readings, rules)
        return aligner, *aligner.align(sources, targets)

    def check_lengths(self, sources: list[str], targets: list[str]) -> None:
        """A ValueError naming the first pair too long to be read whole where long lines are split (a pair is never
        split): before anything is learnt or aligned."""
        fw = self.forward
        if fw.batching.long_lines == "split" and (long := fw.long_pairs(sources, targets)):
            raise ValueError(fw.long_pair_advice(long[0], f"line {long[0][0] + 1}"))

    def align(self, sources: list[str], targets: list[str]) -> tuple[list[Translation], list[Links]]:
        """The forward model's reading of each pair (its score and attention) and each pair's word links."""
        results = self.forward.force(sources, targets)
        backward = None if self.backward is None else self.backward.force(targets, sources)
        return results, self.joined(results, backward)

    def joined(self, forward: list[Translation], backward: list[Translation] | None) -> list[Links]:
        """Each pair's links from the models' forced readings of it (``backward``'s: None without a second model)."""
        fw, bw = self.directions(forward, backward)
        return fw if bw is None else [combined(self.symmetrisation, f, r) for f, r in zip(fw, bw)]

    def directions(
        self, forward: list[Translation], backward: list[Translation] | None
    ) -> tuple[list[Links], list[Links] | None]:
        """Each pair's links read from each model's forced reading of it, ``backward``'s turned round (None
        without a second model)."""
        fw = [self.forward.links(r) for r in forward]
        return fw, None if self.backward is None else [turned(self.backward.links(r)) for r in backward]


def agreement(found: list[Links], given: list[Links]) -> float:
    """The AER of ``found`` against ``given`` taken as sure links."""
    counts = AERCounts()
    for f, g in zip(found, given):
        counts.add(f, g, g)
    return AERCounts.aer(counts.as_tensor())


def reading(translator: Translator, links: str | None = None, model: torch.nn.Module | None = None) -> Translator:
    """``translator`` with its hard links read as ``links`` says and with ``model`` (of the same vocabularies and
    attention layout), where given."""
    choice = translator.alignment if links is None else replace(translator.alignment, links=links)
    t = translator
    return Translator(model or t.engine, t.tok, t.search, t.batching, choice, searches=t.searches)
