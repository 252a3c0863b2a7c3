"""Gold word links for the alignment benchmark: the Hansards development part and the built-in corpus's test split;
AER overall and by length bucket; eflomal's own links on the same lines, trained on the models' training pairs."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.alignment.aer import AERCounts
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS, Links, combined, turned
from nmt.data.eflomal import align_after

BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 1000))  # French words of a line


@dataclass
class Gold:
    """Lines with their sure and possible links ``(French word, English word)``, 0-based."""

    src: list[str]
    tgt: list[str]
    sure: list[Links]
    possible: list[Links]

    def subset(self, indices: Sequence[int]) -> Gold:
        """The lines of ``indices``, in that order."""
        pick = lambda xs: [xs[k] for k in indices]  # noqa: E731
        return Gold(pick(self.src), pick(self.tgt), pick(self.sure), pick(self.possible))

    def turned(self) -> Gold:
        """The lines the other way round: English first, the links turned with them."""
        return Gold(self.tgt, self.src, [*map(turned, self.sure)], [*map(turned, self.possible)])

    def cross_validated(self, found: dict[int, list[Links | None]], halvings: int) -> dict:
        """Each of ``found``'s keys (an adaptation's epochs E: each line's links after E) chosen on the gold of a random
        half of the lines and scored on the other half, and the other way round (every line scored once), for
        ``halvings`` seeded halvings: each halving's choices and AER, and the mean, min and max AER."""
        scored = []
        for seed in range(halvings):
            order = list(range(len(self.src)))
            random.Random(seed).shuffle(order)
            halves = sorted(order[: len(order) // 2]), sorted(order[len(order) // 2 :])
            links: list = [None] * len(self.src)
            chosen = []
            for pick, score in (halves, halves[::-1]):
                on = self.subset(pick)
                best = min(found, key=lambda e: on.aer([found[e][k] for k in pick])["aer"])
                chosen.append(best)
                for k in score:
                    links[k] = found[best][k]
            scored.append({"epochs": chosen, **self.aer(links)})
        aers = [x["aer"] for x in scored]
        return {"halvings": scored, "aer_mean": round(statistics.mean(aers), 4), "aer_min": min(aers),
                "aer_max": max(aers)}  # fmt: skip

    def aer(self, links: Sequence[Links | None]) -> dict:
        """AER of predicted links (None: a line left out) overall and by the French line's length."""
        total, by = AERCounts(), {f"{a}-{b}" if b < 1000 else f"{a}+": AERCounts() for a, b in BUCKETS}
        skipped = 0
        for k, found in enumerate(links):
            if found is None:
                skipped += 1
                continue
            n = len(self.src[k].split())
            bucket = next(f"{a}-{b}" if b < 1000 else f"{a}+" for a, b in BUCKETS if a <= n <= b)
            for counts in (total, by[bucket]):
                counts.add(found, self.sure[k], self.possible[k])
        aer = lambda c: round(AERCounts.aer(c.as_tensor()), 4)  # noqa: E731
        return {"aer": aer(total), "skipped": skipped, "by_length": {b: aer(c) for b, c in by.items() if c.s}}


def hansards(directory: str | Path) -> Gold:
    """The Hansards set (``dev.fr``, ``dev.en``, ``dev.en-fr.gold``: ``e-f`` sure, ``epf`` possible, 1-based)."""
    d = Path(directory)
    src, tgt = (d / "dev.fr").read_text().splitlines(), (d / "dev.en").read_text().splitlines()
    sure, possible = [], []
    for line in (d / "dev.en-fr.gold").read_text().split("\n")[: len(src)]:
        s, p = set(), set()
        for link in line.split():
            kind = p if "p" in link else s
            e, f = link.replace("p", "-").split("-")
            kind.add((int(f) - 1, int(e) - 1))
        sure.append(s)
        possible.append(p)
    return Gold(src, tgt, sure, possible)


def corpus_gold(refs) -> Gold:
    """A prepared split's references with gold links (the built-in corpus)."""
    return Gold(list(refs.src), list(refs.tgt), [*map(parse_links, refs.sure)], [*map(parse_links, refs.possible)])


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
