"""Gold word links for the alignment benchmark (:mod:`nmt.alignment.gold`: the Hansards development part, the
built-in corpus's test split, AER overall and by length bucket); eflomal's own links on the same lines, trained on
the models' training pairs."""

from __future__ import annotations

import time
from pathlib import Path

from nmt.alignment.gold import BUCKETS, Gold, corpus_gold, hansards, read_gold
from nmt.alignment.symmetrisation import COMBINATIONS, Links, combined
from nmt.data.eflomal import align_after

__all__ = ["BUCKETS", "Gold", "corpus_gold", "eflomal_aer", "hansards", "read_gold", "tsv_words"]


def tsv_words(path: str | Path) -> list[tuple[list[str], list[str]]]:
    """A TSV corpus's pairs as whitespace words (its raw text, as eflomal's users give it)."""
    rows = (line.split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines())
    return [(r[0].split(), r[1].split()) for r in rows if len(r) >= 2]


def eflomal_aer(
    train: list[tuple[list[str], list[str]]], gold: Gold, draws: int = 1
) -> tuple[dict, dict[str, list[Links]]]:
    """eflomal trained on ``train`` with the gold lines appended (``draws`` runs, voted, as eflomal is used): the gold
    lines' AER for each direction and symmetrisation with the seconds the runs took, and the links themselves."""
    start = time.perf_counter()
    lines = [(s.split(), t.split()) for s, t in zip(gold.src, gold.tgt)]
    forward, reverse = align_after(train, lines, draws=draws)
    seconds = time.perf_counter() - start
    links = {name: [combined(name, f, r) for f, r in zip(forward, reverse)] for name in COMBINATIONS}
    out = {name: gold.aer(found) for name, found in links.items()}
    return {"pairs": len(train), "draws": draws, "seconds": round(seconds, 1), "aer": out}, links
