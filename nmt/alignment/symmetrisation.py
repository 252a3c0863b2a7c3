"""Symmetrisation of two directions' word links (Och & Ney, 2003; Koehn et al., 2003).

Links are ``(source word, target word)`` pairs, both directions given in that orientation. ``grow-diag-final-and``
follows Koehn, "Statistical Machine Translation" (2010), figure 4.13, loop for loop: the English (target) words
outside, the foreign (source) words inside, the neighbours in the book's order, an alignment that grows while the
loops run, passes until one adds nothing, then FINAL-AND on each direction in the same order.
"""

from __future__ import annotations

from collections.abc import Callable

Links = set[tuple[int, int]]

# the book's neighbouring points, as (English word, foreign word) offsets: the four sides, then the diagonals
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: Links, reverse: Links) -> Links:
    return forward & reverse


def union(forward: Links, reverse: Links) -> Links:
    return forward | reverse


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """GROW-DIAG-FINAL-AND (Koehn, 2010, figure 4.13): the intersection, grown into the union's points that
    neighbour an alignment point (sides and diagonals) and touch a word still unaligned, pass after pass until one
    adds nothing; then FINAL-AND of ``forward`` (e2f) and of ``reverse`` (f2e): each of its points whose two words are
    both still unaligned."""
    both, links = forward | reverse, forward & reverse
    if not both:
        return links
    n_src, n_tgt = 1 + max(i for i, _ in both), 1 + max(j for _, j in both)
    aligned_src, aligned_tgt = {i for i, _ in links}, {j for _, j in links}

    def add(f: int, e: int) -> None:
        links.add((f, e))
        aligned_src.add(f)
        aligned_tgt.add(e)

    added = True
    while added:  # GROW-DIAG: iterate until no new points added
        added = False
        for e in range(n_tgt):
            for f in range(n_src):
                if (f, e) not in links:
                    continue
                for de, df in NEIGHBOURS:
                    e_new, f_new = e + de, f + df
                    if (e_new not in aligned_tgt or f_new not in aligned_src) and (f_new, e_new) in both:
                        add(f_new, e_new)
                        added = True
    for direction in (forward, reverse):  # FINAL-AND(e2f), FINAL-AND(f2e)
        for e in range(n_tgt):
            for f in range(n_src):
                if e not in aligned_tgt and f not in aligned_src and (f, e) in direction:
                    add(f, e)
    return links


SYMMETRISATIONS: dict[str, Callable[[Links, Links], Links]] = {
    "intersection": intersection,
    "union": union,
    "grow-diag-final-and": grow_diag_final_and,
}
DIRECTIONS = ("forward", "reverse")  # forward: each English word's French word; reverse: each French word's English
COMBINATIONS = (*DIRECTIONS, *SYMMETRISATIONS)  # what an aligner's answer may be


def turned(links: Links) -> Links:
    """The links of a pair read the other way round: ``(target word, source word)``."""
    return {(j, i) for i, j in links}


def combined(name: str, forward: Links, reverse: Links) -> Links:
    """One direction's links, or both directions' symmetrised, as ``name`` (one of :data:`COMBINATIONS`) says."""
    if name in DIRECTIONS:
        return set(forward if name == "forward" else reverse)
    return SYMMETRISATIONS[name](forward, reverse)
