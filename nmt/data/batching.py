"""The length-bucketed token-budget sampler and its batch plan (the batches themselves: :mod:`nmt.data.collate`).

The sampler plans an epoch over an :class:`~nmt.data.encoded.EncodedCorpus` with a few bytes per
pair in numpy; the plan is computed once, at preparation, and saved beside the corpus.
"""

from __future__ import annotations

import logging
import math
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import Sampler

from nmt.data import atomic
from nmt.data.encoded import EncodedCorpus
from nmt.data.shapes import ShapeSet

log = logging.getLogger(__name__)


def cut_batches(widths: Sequence[int], max_tokens: float, max_sentences: float = math.inf) -> list[tuple[int, int]]:
    """Cut items, in the order given, into consecutive ``(start, end)`` batches under a padded-token budget.

    A batch costs its size times its widest item; a batch grows until one more item would pass
    ``max_tokens`` or ``max_sentences``. Items are usually sorted by length first, so a batch's
    items are alike and little is padding.
    """
    bounds, start, widest = [], 0, 0
    for i, w in enumerate(widths):
        widest_with = max(widest, w)
        if i > start and ((i - start + 1) * widest_with > max_tokens or i - start >= max_sentences):
            bounds.append((start, i))
            start, widest_with = i, w
        widest = widest_with
    if len(widths):
        bounds.append((start, len(widths)))
    return bounds


def plan_batches(widths: np.ndarray, max_tokens: int, max_sentences: float = math.inf) -> np.ndarray:
    """Batch bounds for items of non-decreasing padded width: ``bounds[k]:bounds[k + 1]`` is batch ``k``.

    The cut of :func:`cut_batches` (a batch grows while its size times its widest item fits), in
    numpy: within a run of equal widths every batch after the first holds ``max_tokens // width``
    items, so the loop runs once per distinct width, not once per item.
    """
    if not len(widths):
        return np.zeros(1, np.int64)
    starts = np.concatenate([[0], np.flatnonzero(widths[1:] != widths[:-1]) + 1])  # runs of equal width
    counts = np.diff(np.append(starts, len(widths)))
    values = widths[starts]
    bounds, size = [np.zeros(1, np.int64)], 0  # size: items in the open batch
    for w, s, c in zip(values.tolist(), starts.tolist(), counts.tolist()):
        cap = int(min(max_tokens // w, max_sentences))
        if size >= cap:  # the open batch cannot take an item this wide
            bounds.append(np.array([s]))
            size = 0
        take = min(c, cap - size)
        rest, size = c - take, size + take
        if rest:  # the open batch is full; the rest of the run fills batches of cap items
            full, left = divmod(rest, cap)
            bounds.append(s + take + cap * np.arange(full + (left > 0)))
            size = left or cap
    bounds.append(np.array([len(widths)]))
    return np.concatenate(bounds).astype(np.int64)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 (Steele, Lea & Flood; Vigna): the output for each state ``x``, a well-mixed 64-bit hash, vectorised.

    ``mix64(seed + i * 0x9E3779B97F4A7C15)`` is the generator's ``i``-th output from ``seed``.
    """
    with np.errstate(over="ignore"):
        x = np.asarray(x, np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def permute(x: np.ndarray, m: np.ndarray, key: np.ndarray) -> np.ndarray:
    """A keyed pseudo-random bijection of ``[0, m)`` applied to ``x``, element by element.

    A 4-round Feistel network on the fewest even number of bits that holds ``m``, applied again
    while the result is ``>= m`` (cycle walking), so any one position is permuted without the rest.
    """
    x, m, key = (np.asarray(a, np.uint64) for a in (x, m, key))
    half = (np.ceil(np.log2(np.maximum(m, 2).astype(np.float64))).astype(np.uint64) + np.uint64(1)) // np.uint64(2)
    mask = (np.uint64(1) << half) - np.uint64(1)
    out, todo = x.copy(), np.arange(len(x))
    while len(todo):
        y, h, low = out[todo], half[todo], mask[todo]
        left, right = y >> h, y & low
        for r in range(4):
            left, right = right, left ^ (mix64(right ^ (key[todo] + np.uint64(r))) & low)
        out[todo] = (left << h) | right
        todo = todo[out[todo] >= m[todo]]
    return out


class BatchPlan:
    """An epoch's cut into batches, before shuffling: pairs sorted by (padded width, target, source length).

    ``order`` (the pairs, ties in index order), ``ties`` (start and end of each run of equal lengths
    in ``order``) and ``bounds`` (``order[bounds[k]:bounds[k + 1]]`` is batch ``k``, :func:`plan_batches`).
    Saved beside a memory-mapped corpus, it is planned once per token budget, not at every start.
    """

    FILES = ("order", "ties", "bounds")

    def __init__(self, order: np.ndarray, ties: np.ndarray, bounds: np.ndarray):
        self.order, self.ties, self.bounds = order, ties, bounds

    @classmethod
    def compute(
        cls,
        src_lens: np.ndarray,
        tgt_lens: np.ndarray,
        max_tokens: int,
        max_sentences: float,
        chunk: int = 1 << 16,
        shapes: ShapeSet | None = None,
    ) -> BatchPlan:
        """Sort by length triple with a counting sort over the triples present, ``chunk`` pairs at a time: memory is
        the order (4 bytes a pair), the sorted widths (2), the distinct triples (at most one a pair, a few thousand in
        practice) and a chunk's temporaries, whatever the corpus size and however long its longest pair. With
        ``shapes`` the batches are cut by their buckets' widths, so that each batch fits its bucket's shape."""
        n = len(src_lens)
        pieces = [slice(a, a + chunk) for a in range(0, n, chunk)]

        def triples(part: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # a chunk's padded widths, tgt, src
            src, tgt = np.asarray(src_lens[part], np.int64), np.asarray(tgt_lens[part], np.int64)
            return np.maximum(src, tgt + 1), tgt, src

        def keys(part: slice) -> np.ndarray:  # (width, tgt, src) as one sortable integer (< span**3 <= 2**51)
            width, tgt, src = triples(part)
            return (width * span + tgt) * span + src

        longest = max((int(triples(p)[0].max()) for p in pieces), default=0)
        if longest > max_tokens:
            raise ValueError(
                f"max_tokens={max_tokens} is smaller than the longest pair ({longest} tokens): "
                "raise it or lower max_len"
            )
        span = longest + 1
        present, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)  # the keys present, sorted; pairs of each
        for p in pieces:
            found, found_counts = np.unique(keys(p), return_counts=True)
            present, where = np.unique(np.concatenate([present, found]), return_inverse=True)
            merged = np.zeros(len(present), np.int64)
            np.add.at(merged, where, np.concatenate([counts, found_counts]))
            counts = merged
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # where each key's pairs start in the order
        order = np.empty(n, np.int32 if n < 2**31 else np.int64)
        for p in pieces:  # stable counting sort: a chunk's pairs go after the earlier chunks' pairs of their key
            c = np.searchsorted(present, keys(p)).astype(np.uint16 if len(present) <= 2**16 else np.int64)  # its rank
            local = np.argsort(c, kind="stable")
            sc = c[local]
            runs = np.flatnonzero(np.concatenate([[True], sc[1:] != sc[:-1]]))
            rank = np.arange(len(sc)) - np.repeat(runs, np.diff(np.append(runs, len(sc))))
            order[first[sc] + rank] = p.start + local
            first += np.bincount(c, minlength=len(present))
        ends = np.cumsum(counts)
        tied = counts > 1
        ties = np.stack([(ends - counts)[tied], ends[tied]], axis=1).astype(np.int64)  # runs of equal lengths
        widths = present // span**2  # each key's padded width
        if shapes is not None:
            widths = shapes.bucket(widths)
        kind = np.uint16 if span <= 2**16 else np.uint32
        widths = np.repeat(widths.astype(kind), counts)  # the padded widths (or their buckets') in order
        return cls(order, ties, plan_batches(widths, max_tokens, max_sentences))

    @classmethod
    def cached(
        cls, corpus: EncodedCorpus, max_tokens: int, max_sentences: float, shapes: ShapeSet | None = None
    ) -> BatchPlan:
        """The plan of a corpus (cut by ``shapes`` if given), read from (or first written to) its directory; computed
        for an in-memory one."""
        if corpus.directory is None:
            return cls.compute(corpus.src_lens, corpus.tgt_lens, max_tokens, max_sentences, shapes=shapes)
        d = corpus.directory / f"plan-{max_tokens}-{max_sentences}{'' if shapes is None else '-' + shapes.key}"
        if d.is_dir() and (plan := cls._read(d, len(corpus))) is not None:
            return plan
        if d.is_dir():  # damaged: the plan is cheap to make again
            log.warning("%s: a damaged batch plan; planning again", d)
            shutil.rmtree(d, ignore_errors=True)
        plan = cls.compute(corpus.src_lens, corpus.tgt_lens, max_tokens, max_sentences, shapes=shapes)
        try:
            with atomic.folder(d) as tmp:  # a killed run leaves no half plan
                for name in cls.FILES:
                    np.save(tmp / f"{name}.npy", getattr(plan, name))
        except OSError:  # a read-only cache, or another process (a DDP rank) was first
            if not d.is_dir():
                return plan
        return cls(*(np.load(d / f"{name}.npy", mmap_mode="r") for name in cls.FILES))

    @classmethod
    def _read(cls, d: Path, pairs: int) -> BatchPlan | None:
        """The plan saved in ``d`` if it is whole and a plan of ``pairs`` pairs, else None."""
        try:
            plan = cls(*(np.load(d / f"{name}.npy", mmap_mode="r") for name in cls.FILES))
        except (OSError, ValueError):
            return None
        whole = len(plan.order) == pairs and len(plan.bounds) > 0 and int(plan.bounds[-1]) == pairs
        return plan if whole else None


class TokenBucketSampler(Sampler[list[int]]):
    """Batches of similar-length pairs under a padded-token budget, in shuffled order.

    The cut is a :class:`BatchPlan` (given, or computed from the lengths): planned once, it costs
    4 bytes a pair. Each epoch (``set_epoch``) shuffles the batch order and, batch by batch as
    they are drawn, the pairs within each run of equal lengths (a keyed bijection of the run,
    :func:`permute`), from ``seed`` and the epoch alone: an epoch costs a few bytes a batch.
    With ``world_size > 1`` each rank takes every ``world_size``-th batch, so ranks get disjoint
    shares of equal length: with ``even`` (training) the last ``len % world_size`` batches are
    dropped (the shuffled order drops different ones each epoch); without it (held-out splits)
    the largest batches are halved until the count divides, so every sentence is evaluated
    exactly once. ``skip_batches(epoch, n)`` makes that epoch start after its first ``n`` batches
    (exact resume).
    """

    def __init__(
        self,
        src_lens: np.ndarray,
        tgt_lens: np.ndarray,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        max_sentences: int | None = None,
        even: bool = True,
        plan: BatchPlan | None = None,
    ):
        plan = plan or BatchPlan.compute(src_lens, tgt_lens, max_tokens, max_sentences or math.inf)
        self.order, self.ties, self.bounds = plan.order, plan.ties, np.asarray(plan.bounds)
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size, self.even = rank, world_size, even
        self.epoch = 0
        self._skip: tuple[int, int] | None = None
        self._offset: int | None = None  # after a resume: our epoch minus the trainer's
        if not even:
            # every rank must get as many batches as the others (collectives at epoch end), none dropped:
            # split the largest batches until the count divides evenly
            while (len(self.bounds) - 1) % world_size:
                i = int(np.argmax(np.diff(self.bounds)))
                a, b = self.bounds[i], self.bounds[i + 1]
                if b - a < 2:
                    raise ValueError(f"{len(self.order)} sentences cannot be split among {world_size} ranks")
                self.bounds = np.insert(self.bounds, i + 1, (a + b) // 2)
        self._n_batches = len(self.bounds) - 1

    def set_epoch(self, epoch: int) -> None:
        """The trainer's epoch. After :meth:`skip_batches` the first one it sets is the saved epoch, whatever it
        calls it (Lightning counts an epoch that ``max_steps`` cut short as done), and later ones follow on."""
        if self._skip is not None and self._offset is None:
            self._offset = self._skip[0] - epoch
        self.epoch = epoch + (self._offset or 0)

    def skip_batches(self, epoch: int, n: int) -> None:
        """Start ``epoch`` (this sampler's count, :attr:`epoch` when saved) after its first ``n`` batches; ``n`` that
        reads the whole epoch (a state saved at its last validation, between two epochs) starts the next one."""
        if n >= len(self):
            epoch, n = epoch + 1, 0
        self._skip, self.epoch = (epoch, n), epoch

    def _rank_batches(self, epoch: int) -> np.ndarray:
        """This rank's batch numbers for ``epoch``, in order."""
        batches = np.arange(self._n_batches)
        if self.shuffle:
            np.random.default_rng([self.seed, epoch]).shuffle(batches)
        usable = len(batches) - len(batches) % self.world_size if self.even else len(batches)
        return batches[self.rank : usable : self.world_size]

    def batch(self, k: int, epoch: int) -> list[int]:
        """The pairs of batch ``k`` in ``epoch``: its positions in the plan, each run of ties permuted."""
        pos = np.arange(self.bounds[k], self.bounds[k + 1])
        if self.shuffle and len(self.ties):
            run = np.searchsorted(self.ties[:, 0], pos, side="right") - 1
            tied = (run >= 0) & (pos < self.ties[np.maximum(run, 0), 1])
            start, end = self.ties[run[tied], 0], self.ties[run[tied], 1]
            key = mix64(np.uint64(self.seed) * np.uint64(1_000_003) + np.uint64(epoch)) ^ run[tied].astype(np.uint64)
            pos[tied] = start + permute(pos[tied] - start, end - start, key).astype(np.int64)
        return self.order[pos].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        epoch, batches = self.epoch, self._rank_batches(self.epoch)
        if self._skip is not None and self._skip[0] == epoch:
            batches = batches[self._skip[1] :]
            self._skip = None
        for k in batches.tolist():
            yield self.batch(k, epoch)

    def __len__(self) -> int:
        return self._n_batches // self.world_size
