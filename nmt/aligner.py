"""A word aligner made of translation models: the links of given (source, translation) pairs read from one model's
attention, or from two models trained in opposite directions (fr→en and en→fr) and symmetrised as a statistical
aligner's two directions are. ``translate.py --align-to`` and the server's ``ref`` both align with it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .adaptation import Adaptation, adapted
from .loading import TranslationModel
from .symmetrisation import Links, combined, turned
from .translator import Translation, Translator


@dataclass(frozen=True)
class Aligner:
    """``forward`` reads the source with its translation (forced decoding); ``backward``, a model trained the
    other way, reads the translation with its source, its links turned round and combined with ``forward``'s
    by ``symmetrisation`` (``nmt.symmetrisation.COMBINATIONS``)."""

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
        other = Translator(backward.model, backward.tokenizer, forward.search, forward.batching, choice)
        return cls(forward, other, symmetrisation)

    def adapted(
        self, sources: list[str], targets: list[str], how: Adaptation, links: list[Links] | None = None
    ) -> Aligner:
        """This aligner with each model adapted to the pairs it will align (``nmt.adaptation``): ``forward`` on
        (source, translation), ``backward`` on (translation, source); with ``links`` (each pair's (source word,
        translation word) links, a statistical aligner's) each model's recorded attention is guided towards them
        (``backward``'s turned round)."""
        if how.epochs == 0:
            return self
        fw = self.forward
        forward = reading(fw, adapted(fw.model, fw.tok, sources, targets, how, links, fw.alignment))
        backward = self.backward
        if backward is not None:
            turn = None if links is None else [turned(x) for x in links]
            model = adapted(backward.model, backward.tok, targets, sources, how, turn, backward.alignment)
            backward = reading(backward, model)
        return Aligner(forward, backward, self.symmetrisation)

    def align(self, sources: list[str], targets: list[str]) -> tuple[list[Translation], list[Links]]:
        """The forward model's reading of each pair (its score and attention) and each pair's word links."""
        results = self.forward.force(sources, targets)
        links = [self.forward.links(r) for r in results]
        if self.backward is not None:
            reverse = [turned(self.backward.links(r)) for r in self.backward.force(targets, sources)]
            links = [combined(self.symmetrisation, f, r) for f, r in zip(links, reverse)]
        return results, links


def reading(translator: Translator, model: torch.nn.Module) -> Translator:
    """``translator`` with another model of the same vocabularies and attention layout."""
    return Translator(model, translator.tok, translator.search, translator.batching, translator.alignment)
