"""Gold word links with sure and possible marks (Och & Ney, 2003), read from the WPT-2003 (Hansards) form, and the
alignment error rate, precision and recall of predicted links against them, overall and by length bucket."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.alignment.aer import AERCounts
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import Links, turned

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


# one link of a gold line: ``e-f`` (sure), ``epf`` or ``e?f`` (possible), or ``e-f-S`` / ``e-f-P``
_LINK = re.compile(r"(\d+)([-p?])(\d+)(?:-([SP]))?")


def read_gold(path: str | Path, sources: Sequence[str], targets: Sequence[str]) -> tuple[list[Links], list[Links]]:
    """Each pair's sure and possible links ``(source word, target word)``, 0-based, from a gold file in the WPT-2003
    form (the Hansards set's ``dev.en-fr.gold``): a line per pair, links 1-based with the target (English) word
    first, ``e-f`` sure and ``epf``, ``e?f`` or ``e-f-P`` possible. A line that is not so, names a word its pair does
    not have, or a file of another length is refused in one line naming ``path:line``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if len(lines) != len(sources):
        raise ValueError(f"{path} has {len(lines)} lines but the input has {len(sources)}")
    sure: list[Links] = []
    possible: list[Links] = []
    for k, (line, src, tgt) in enumerate(zip(lines, sources, targets)):
        s, p = set(), set()
        n_src, n_tgt = len(src.split()), len(tgt.split())
        for link in line.split():
            m = _LINK.fullmatch(link)
            if m is None:
                raise ValueError(
                    f"{path}:{k + 1}: {link!r} is no gold link (e-f sure, epf, e?f or e-f-P possible: 1-based, "
                    "the English word first)"
                )
            e, f = int(m[1]), int(m[3])
            if not (1 <= e <= n_tgt and 1 <= f <= n_src):
                raise ValueError(
                    f"{path}:{k + 1}: {link!r} names a word the pair does not have ({n_tgt} English words, "
                    f"{n_src} French, numbered from 1, the English word first)"
                )
            (p if m[2] != "-" or m[4] == "P" else s).add((f - 1, e - 1))
        sure.append(s)
        possible.append(p)
    return sure, possible


def hansards(directory: str | Path) -> Gold:
    """The Hansards set (``dev.fr``, ``dev.en``, ``dev.en-fr.gold``: :func:`read_gold`)."""
    d = Path(directory)
    src, tgt = (d / "dev.fr").read_text().splitlines(), (d / "dev.en").read_text().splitlines()
    return Gold(src, tgt, *read_gold(d / "dev.en-fr.gold", src, tgt))


def corpus_gold(refs) -> Gold:
    """A prepared split's references with gold links (the built-in corpus)."""
    return Gold(list(refs.src), list(refs.tgt), [*map(parse_links, refs.sure)], [*map(parse_links, refs.possible)])
