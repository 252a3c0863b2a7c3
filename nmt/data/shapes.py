"""A bounded set of training batch shapes: a GPU step captured as a CUDA graph (or compiled for static shapes) replays
one graph per shape, so each batch must have one of a few shapes, not one of its own.

Pairs fall in buckets by padded width (``max(source, target + 1)``, rounded up to ``data.pad_multiple``); a bucket of
top width ``W`` has one shape: ``max_tokens // W`` rows (the token budget holds), and the source and target widths
that the widest pairs of width ``W`` or below need. The batch plan is cut with the buckets' widths
(:meth:`~nmt.data.batching.BatchPlan.compute`), so no batch holds more rows than its bucket's shape; the collate pads
each batch to that shape, filler rows (a PAD source, no target: no loss, no gradient) after its own.
"""

from __future__ import annotations

import math
import zlib

import numpy as np


class ShapeSet:
    """At most ``n`` batch shapes ``(rows, source width, target width)``, one per bucket of padded widths; ``widths``
    ``(N,)`` are the buckets' top widths, ascending, and ``rows``, ``src``, ``tgt`` ``(N,)`` their shapes.

    :meth:`choose` picks the buckets that pad least (a small dynamic programme over the corpus's distinct widths),
    computed once from the lengths, before the plan that it cuts.
    """

    def __init__(self, widths: np.ndarray, rows: np.ndarray, src: np.ndarray, tgt: np.ndarray):
        self.widths, self.rows, self.src, self.tgt = (np.asarray(a, np.int64) for a in (widths, rows, src, tgt))
        self._shapes = list(zip(self.rows.tolist(), self.src.tolist(), self.tgt.tolist()))  # read by every batch

    @classmethod
    def choose(
        cls,
        src_lens: np.ndarray,
        tgt_lens: np.ndarray,
        max_tokens: int,
        n: int,
        multiple: int = 1,
        max_sentences: float = math.inf,
    ) -> ShapeSet:
        """The shapes of at most ``n`` buckets of the pairs' widths (multiples of ``multiple``) that pad least."""
        if n < 1:
            raise ValueError(f"data.shapes={n}: a shape set needs at least one shape (0: off)")
        counts, top_src, top_tgt = width_histogram(src_lens, tgt_lens)
        present = np.flatnonzero(counts)  # the pairs' padded widths
        candidates, which = np.unique(-(-present // multiple) * multiple, return_inverse=True)  # (K,) rounded up
        if len(candidates) and candidates[-1] > max_tokens:
            raise ValueError(
                f"max_tokens={max_tokens} is smaller than the longest pair rounded up to a multiple of "
                f"data.pad_multiple ({candidates[-1]} tokens): raise it or lower data.pad_multiple"
            )
        held = np.bincount(which, counts[present], minlength=len(candidates)).astype(np.int64)  # (K,) pairs a width
        widest = np.zeros((2, len(candidates)), np.int64)  # (2, K): each width's longest source and target + 1
        np.maximum.at(widest, (0, which), top_src[present])
        np.maximum.at(widest, (1, which), top_tgt[present])
        widest = np.maximum.accumulate(widest, axis=1)  # of every pair of that width or below: a bucket's
        cap = np.minimum(max_tokens // np.maximum(candidates, 1), max_sentences).astype(np.int64)  # (K,) rows
        top = cheapest_buckets(held, candidates, cap, n)
        src, tgt = (-(-np.maximum(w[top], 1) // multiple) * multiple for w in widest)  # a filler's PAD source fits
        return cls(candidates[top], cap[top], src, tgt)

    def __len__(self) -> int:
        return len(self.widths)

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """The shapes ``(rows, source width, target width)``, narrowest first."""
        return list(self._shapes)

    @property
    def key(self) -> str:
        """A name for the shapes, for the file names of what depends on them (a plan cut by them)."""
        return f"shapes{len(self)}-{zlib.crc32(np.stack([self.widths, self.rows]).tobytes()):08x}"

    def bucket(self, widths: np.ndarray) -> np.ndarray:
        """The top width of each padded width's bucket: what the batch plan cuts with."""
        return self.widths[np.minimum(np.searchsorted(self.widths, widths), len(self.widths) - 1)]

    def fit(self, rows: int, src: int, tgt: int) -> tuple[int, int, int]:
        """The shape a batch of ``rows`` rows whose widest source is ``src`` long and widest target ``tgt`` (BOS or EOS
        included) is padded to: its bucket's (that of its widest pair)."""
        k = int(np.searchsorted(self.widths, max(src, tgt)))
        if k == len(self.widths) or rows > self._shapes[k][0] or src > self._shapes[k][1] or tgt > self._shapes[k][2]:
            raise ValueError(
                f"a batch of {rows} rows, {src} source and {tgt} target positions fits none of the {len(self)} "
                "shapes (data.shapes): its pairs were not planned with them"
            )
        return self._shapes[k]


def width_histogram(
    src_lens: np.ndarray, tgt_lens: np.ndarray, chunk: int = 1 << 22
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """By padded width ``w`` (the index): the pairs of that width, their longest source and their longest target + 1;
    ``chunk`` pairs at a time, so memory stays flat whatever the corpus size."""
    counts, src, tgt = (np.zeros(1, np.int64) for _ in range(3))
    for a in range(0, len(src_lens), chunk):
        s, t = np.asarray(src_lens[a : a + chunk], np.int64), np.asarray(tgt_lens[a : a + chunk], np.int64) + 1
        w = np.maximum(s, t)
        if (size := int(w.max()) + 1) > len(counts):
            counts, src, tgt = (np.pad(x, (0, size - len(x))) for x in (counts, src, tgt))
        counts += np.bincount(w, minlength=len(counts))
        np.maximum.at(src, w, s)
        np.maximum.at(tgt, w, t)
    return counts, src, tgt


def cheapest_buckets(held: np.ndarray, widths: np.ndarray, cap: np.ndarray, n: int) -> np.ndarray:
    """The top widths (as indices into ``widths``, ascending, the widest last) of at most ``n`` buckets of consecutive
    ``widths`` that pad least: a bucket of top width ``W`` holding ``c`` pairs costs ``ceil(c / cap_W)`` batches of
    ``cap_W`` rows of ``W`` tokens (``held`` ``(K,)``: the pairs of each width). Exact over the ``K`` widths."""
    K = len(widths)
    total = np.concatenate([[0], np.cumsum(held)])
    pairs = total[None, 1:] - total[:-1, None]  # (K, K): pairs of widths i..k
    cost = np.ceil(pairs / cap[None, :]) * (cap * widths)[None, :]  # (K, K): tokens of a bucket i..k
    cost[np.tril_indices(K, -1)] = np.inf  # i > k: no bucket
    best, splits = [cost[0]], []  # best[j][k]: the cheapest j + 1 buckets over widths 0..k
    for _ in range(1, min(n, K)):
        options = best[-1][:-1, None] + cost[1:, :]  # (K - 1, K): j buckets over 0..i - 1 and one over i..k
        splits.append(np.argmin(options, axis=0) + 1)  # (K,) the best i for each k
        best.append(np.min(options, axis=0))
    j = int(np.argmin([b[-1] for b in best]))  # the fewest buckets of the least padding
    tops, k = [K - 1], K - 1
    for s in reversed(splits[:j]):  # back through the splits: each bucket's first width follows the last's top
        k = int(s[k]) - 1
        tops.append(k)
    return np.array(tops[::-1], np.int64)
