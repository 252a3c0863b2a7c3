"""Every way the project combines two directions' links, against its definition written out here independently:
GROW-DIAG-FINAL-AND as Koehn's "Statistical Machine Translation" (2010, figure 4.13) gives it, on a matrix indexed
(English word, foreign word) as the book's loops are, on thousands of random link sets and on hand-made cases that
need the diagonal neighbours and several passes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nmt.alignment.symmetrisation import COMBINATIONS, combined, grow_diag_final_and

NEIGHBORING = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))  # figure 4.13, (e, f)


def book_grow_diag_final_and(e2f: np.ndarray, f2e: np.ndarray) -> np.ndarray:
    """Figure 4.13 on boolean matrices ``[English word, foreign word]``: GROW-DIAG, FINAL-AND(e2f), FINAL-AND(f2e)."""
    en, fn = e2f.shape
    alignment, union = e2f & f2e, e2f | f2e

    def aligned_e(e: int) -> bool:
        return 0 <= e < en and bool(alignment[e].any())

    def aligned_f(f: int) -> bool:
        return 0 <= f < fn and bool(alignment[:, f].any())

    new_points = True
    while new_points:  # iterate until no new points added
        new_points = False
        for e in range(en):
            for f in range(fn):
                if alignment[e, f]:
                    for de, df in NEIGHBORING:
                        e_new, f_new = e + de, f + df
                        inside = 0 <= e_new < en and 0 <= f_new < fn
                        if inside and (not aligned_e(e_new) or not aligned_f(f_new)) and union[e_new, f_new]:
                            alignment[e_new, f_new] = True
                            new_points = True
    for a in (e2f, f2e):
        for e_new in range(en):
            for f_new in range(fn):
                if not aligned_e(e_new) and not aligned_f(f_new) and a[e_new, f_new]:
                    alignment[e_new, f_new] = True
    return alignment


def matrix(links: set[tuple[int, int]], en: int, fn: int) -> np.ndarray:
    """(foreign word, English word) links -> the book's ``[e, f]`` matrix."""
    m = np.zeros((en, fn), dtype=bool)
    for f, e in links:
        m[e, f] = True
    return m


def definition(name: str, forward: set, reverse: set, en: int, fn: int) -> set[tuple[int, int]]:
    """What each name the project offers means, from its definition."""
    e2f, f2e = matrix(forward, en, fn), matrix(reverse, en, fn)
    m = {
        "forward": e2f,
        "reverse": f2e,
        "intersection": e2f & f2e,
        "union": e2f | f2e,
        "grow-diag-final-and": book_grow_diag_final_and(e2f, f2e),
    }[name]
    return {(int(f), int(e)) for e, f in zip(*np.nonzero(m))}


def random_links(rng: random.Random, fn: int, en: int, one_way: str | None) -> set[tuple[int, int]]:
    """Links as an aligner's direction gives them (each English word's one foreign word, or each foreign word's one
    English word, some words left out) or any set at all."""
    if one_way == "forward":
        return {(rng.randrange(fn), e) for e in range(en) if rng.random() < 0.85}
    if one_way == "reverse":
        return {(f, rng.randrange(en)) for f in range(fn) if rng.random() < 0.85}
    return {(rng.randrange(fn), rng.randrange(en)) for _ in range(rng.randrange(fn * en + 1))}


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_combination_is_its_definition_on_random_link_sets(name):
    rng = random.Random(sum(map(ord, name)))
    for _ in range(1500 if name == "grow-diag-final-and" else 500):
        fn, en = rng.randint(1, 14), rng.randint(1, 14)
        shaped = rng.random() < 0.7  # as aligners give them, or any sets at all
        forward = random_links(rng, fn, en, "forward" if shaped else None)
        reverse = random_links(rng, fn, en, "reverse" if shaped else None)
        assert combined(name, forward, reverse) == definition(name, forward, reverse, en, fn), (forward, reverse)


def test_growing_reaches_diagonal_neighbours():
    """(1,1) is only a diagonal neighbour of the intersection's (0,0): grown, and from it (1,2), a side neighbour
    whose English word 2 is unaligned, in the same pass. Without the diagonals FINAL-AND would add (1,1) but never
    (1,2), whose foreign word 1 is aligned by then."""
    forward, reverse = {(0, 0), (1, 1), (1, 2)}, {(0, 0)}
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1), (1, 2)}


def test_growing_goes_on_until_a_pass_adds_nothing():
    """A point added late in a pass (the loops go English word by English word) neighbours one that only the next
    pass can add: (1,1) is added while visiting (2,2), after English word 1's turn; (1,0) comes from (1,1) in the
    second pass, and FINAL-AND cannot add it (foreign word 1 is aligned)."""
    forward, reverse = {(2, 2), (1, 1)}, {(2, 2), (1, 0)}
    assert grow_diag_final_and(forward, reverse) == {(2, 2), (1, 1), (1, 0)}
    assert definition("grow-diag-final-and", forward, reverse, 3, 3) == {(2, 2), (1, 1), (1, 0)}


def test_the_book_s_order_decides_which_neighbour_wins():
    """Sides before diagonals: from (0,0), the side neighbour (0,1) is grown first (English word 1 unaligned), which
    aligns English word 1; the diagonal (1,1) still touches the unaligned foreign word 1 and is grown; (2,1) is a
    side neighbour of (1,1) whose foreign word 2 is unaligned: grown in the same pass."""
    forward, reverse = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (0, 1)}
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (0, 1), (1, 1), (2, 1)}


def test_final_and_takes_each_direction_in_turn():
    """FINAL-AND(e2f) before FINAL-AND(f2e): a forward point and a reverse point that share a word; the forward one
    is added, then the reverse one is not (its word is aligned by then)."""
    forward, reverse = {(0, 0)}, {(0, 1), (1, 0)}
    assert grow_diag_final_and(forward, reverse) == {(0, 0)}
    assert grow_diag_final_and(reverse, forward) == {(0, 1), (1, 0)}
