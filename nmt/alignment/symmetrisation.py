"""Symmetrisation of two directions' word links (Och & Ney, 2003; Koehn et al., 2003).

Links are ``(source word, target word)`` pairs, both directions given in that orientation. ``grow-diag-final-and``
starts from the links both directions agree on, grows them into neighbouring links of the union that touch a word
still unlinked, then adds links of either direction whose two words are both unlinked; written from its definition
(Koehn, "Statistical Machine Translation", 2010, figure 4.13, and the Moses documentation).
"""

from __future__ import annotations

from collections.abc import Callable

Links = set[tuple[int, int]]

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: Links, reverse: Links) -> Links:
    return forward & reverse


def union(forward: Links, reverse: Links) -> Links:
    return forward | reverse


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """The intersection, grown along the union's diagonal neighbours, then each direction's links between two words
    that are both still unlinked."""
    links, both = forward & reverse, forward | reverse
    linked_src, linked_tgt = {i for i, _ in links}, {j for _, j in links}

    def add(i: int, j: int) -> None:
        links.add((i, j))
        linked_src.add(i)
        linked_tgt.add(j)

    grew = True
    while grew:  # grow-diag: until no link is added
        grew = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                new = (i + di, j + dj)
                if new in both and new not in links and (new[0] not in linked_src or new[1] not in linked_tgt):
                    add(*new)
                    grew = True
    for direction in (forward, reverse):  # final-and
        for i, j in sorted(direction):
            if i not in linked_src and j not in linked_tgt:
                add(i, j)
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
