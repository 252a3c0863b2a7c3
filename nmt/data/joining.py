"""Training rows made of several consecutive pairs of a batch, so that short corpora still train long inputs; the
rows of a batch in the order the recurrent encoder packs them.

Attention over long sources (and the positions in them) is only trained where the corpus has long pairs: a model
trained on Tatoeba (median 6 words a side) aligns lines of 21-30 words about half as well as lines of 1-10 words
(``docs/alignment.md``). Joining pairs into one row ("Il pleut. Je reste ici." -> "It is raining. I stay here.")
makes long inputs out of short ones; the links of joined pairs are their own, shifted by the words before them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from nmt.bounds import Range, check_fields

MAX_PAIRS = 1024  # data.join.max_pairs's bound (pairs per row; prepare.max_len bounds the row anyway)


@dataclass(frozen=True)
class Joining:
    """Rows of 1 to ``max_pairs`` pairs each (sizes drawn uniformly, 1: off), in the batch's order; a row drawn to
    hold several pairs keeps them with probability ``share`` (else it holds one): with ``share`` s a row is joined
    with probability s (1 - 1 / max_pairs). The draw is seeded by ``seed`` and the batch's pair indices, so a resumed
    run sees the rows it would have seen."""

    max_pairs: Annotated[int, Range(1, MAX_PAIRS, integer=True)] = 1
    share: Annotated[float, Range(0, 1)] = 1.0
    seed: int = 0

    def __post_init__(self):
        check_fields(self, "data.join.")

    def groups(self, indices: np.ndarray) -> list[slice]:
        """The rows of a batch of pairs ``indices``: consecutive slices of it."""
        n = len(indices)
        if self.max_pairs == 1:
            return [slice(k, k + 1) for k in range(n)]
        rng = np.random.default_rng(zlib.crc32(np.asarray(indices, dtype=np.int64).tobytes(), self.seed))
        out, start = [], 0
        while start < n:
            size = int(rng.integers(1, self.max_pairs + 1))
            if size > 1 and self.share < 1 and rng.random() >= self.share:
                size = 1
            end = min(n, start + size)
            out.append(slice(start, end))
            start = end
        return out

    def sizes(self, indices: np.ndarray) -> np.ndarray:
        """The pairs each row of :meth:`groups` holds, ``(R,)`` int64 (without joining: ones, with no loop)."""
        if self.max_pairs == 1:
            return np.ones(len(indices), np.int64)
        return np.array([g.stop - g.start for g in self.groups(indices)], np.int64)


def longest_source_first(lengths: np.ndarray) -> np.ndarray:
    """The order of a batch's rows by their source lengths ``(R,)``, longest first (ties in their order): the recurrent
    encoder packs such rows as they are, with no order to copy to a GPU."""
    return np.argsort(-np.asarray(lengths, np.int64), kind="stable")
