"""A batch of pairs as training, validation and test take it: ids gathered from a memory-mapped corpus in one index
and padded in one assignment per array (no loop over sentences), the rows longest source first, the lengths counted
on the host; with a shape set, padded to its bucket's shape.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
from torch.utils.data import Dataset

from nmt.data.encoded import EncodedCorpus
from nmt.data.joining import Joining, longest_source_first
from nmt.data.shapes import ShapeSet
from nmt.data.tokenizer import SubwordSampler
from nmt.data.training_links import TrainingLinks
from nmt.specials import BOS, EOS, PAD


def ragged(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The spans ``flat[starts[i] : starts[i] + lens[i]]`` one after the other, ``(lens.sum(),)``, in one fancy index
    (``flat`` may be memory-mapped: only the pages of the spans are read)."""
    ends = np.cumsum(lens)  # (B,) where each span ends in the output
    at = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - (ends - lens), lens)  # (N,) into flat
    return np.asarray(flat[at])


def padded(
    flat: np.ndarray,
    lens: np.ndarray,
    bos: bool = False,
    eos: bool = False,
    multiple: int = 1,
    width: int | None = None,
    rows: int | None = None,
) -> np.ndarray:
    """``(rows, width)`` int64: row ``i`` holds the ``i``-th span of ``flat`` (the rows' ids one after the other,
    ``lens`` ``(B,)`` long each) after BOS and/or before EOS if asked, PAD after; ``width`` by default the longest
    row's rounded up to a ``multiple``, ``rows`` by default ``B`` (more: rows of PAD after them)."""
    lens = np.asarray(lens, np.int64)
    lead, n = int(bos), len(lens)
    if width is None:
        width = -(-(int(lens.max()) + lead + int(eos)) // multiple) * multiple
    out = np.full((n if rows is None else rows, width), PAD, dtype=np.int64)
    body = out[:n, lead:]  # (B, width - lead): the ids' positions
    body[np.arange(width - lead) < lens[:, None]] = flat  # row-major: the spans in order, each from its row's start
    if bos:
        out[:n, 0] = BOS
    if eos:
        out[np.arange(n), lead + lens] = EOS
    return out


def pad(seqs: Sequence[Sequence[int]], bos: bool = False, eos: bool = False, multiple: int = 1) -> torch.Tensor:
    """``(B, longest)`` int64 tensor of the sequences, each after BOS and/or before EOS if asked, PAD after; the
    length rounded up to a ``multiple`` (a compiled step sees a bounded set of shapes)."""
    return torch.from_numpy(padded(*flattened(seqs), bos, eos, multiple))


@dataclass(frozen=True)
class HostLengths:
    """A batch's lengths as the loader counted them, on the host: what a training step would otherwise read back from
    the GPU (each read a host sync)."""

    src: torch.Tensor  # (B,) int64 on the CPU, each row's source length: the recurrent encoder packs by them
    tgt_tokens: int  # real target tokens, EOS included: what the loss is computed on


@dataclass
class Batch:
    """A padded batch of pairs, as :class:`BatchDataset` gives it to training, validation and test (PAD beyond each
    row's length)."""

    src: torch.Tensor  # (B, S) source ids
    src_len: torch.Tensor  # (B,) int64
    tgt_in: torch.Tensor  # (B, T): BOS + target, the decoder's input
    tgt_out: torch.Tensor  # (B, T): target + EOS, what it predicts
    tgt_len: torch.Tensor  # (B,) real target tokens per row, EOS included
    idx: torch.Tensor  # the pairs' indices in the corpus: more than B where a row joins pairs (data.join)
    align: torch.Tensor | None = None  # (B, T, S): each target piece's link distribution (guided alignment only)
    host: HostLengths | None = None  # the lengths on the host (stays there when the tensors move)

    def __len__(self) -> int:
        return len(self.src)

    def _tensors(self) -> dict[str, torch.Tensor]:
        return {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)}

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The batch on ``device`` (the training module's transfer asks ``non_blocking``: from pinned memory the copy
        then overlaps the GPU's work; the heatmap callback calls this too)."""
        return replace(self, **{k: v.to(device, non_blocking=non_blocking) for k, v in self._tensors().items()})

    def pin_memory(self) -> Batch:
        """The batch in page-locked memory, as a DataLoader's ``pin_memory`` asks of a custom batch type."""
        return replace(self, **{k: v.pin_memory() for k, v in self._tensors().items()})


class BatchDataset(Dataset):
    """Indexed by a list of pair indices; returns the padded :class:`Batch`, its rows longest source first.

    The pairs' ids are gathered from the corpus's flat arrays, checked and padded in a few numpy operations a batch,
    with no loop over its sentences. With ``subwords`` (training only) each pair is re-segmented at random before
    padding; with ``joining`` (training only) a row may hold several pairs one after the other (``idx`` then has more
    entries than rows); with ``links`` (guided alignment, training only) ``align (B, T, S)`` holds each target piece's
    link distribution; with ``shapes`` (training only) a batch is padded to the shape of its width's bucket, rows of
    filler after its own (:class:`~nmt.data.shapes.ShapeSet`).
    """

    def __init__(
        self,
        corpus: EncodedCorpus,
        subwords: SubwordSampler | None = None,
        links: TrainingLinks | None = None,
        pad_multiple: int = 1,
        joining: Joining | None = None,
        shapes: ShapeSet | None = None,
    ):
        self.corpus, self.subwords, self.links, self.multiple = corpus, subwords, links, pad_multiple
        self.joining, self.shapes = joining or Joining(), shapes

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, indices: list[int]) -> Batch:
        c = self.corpus
        drawn = np.asarray(indices, dtype=np.int64)  # (N,) the pairs as the sampler drew them
        src_n, tgt_n = c.src_lens[drawn].astype(np.int64), c.tgt_lens[drawn].astype(np.int64)  # (N,) their lengths
        src_flat, src_at, tgt_flat, tgt_at = c.src_flat, c.src_offsets[drawn], c.tgt_flat, c.tgt_offsets[drawn]
        if self.subwords is not None:  # sentencepiece re-segments pair by pair: its pieces become the ids padded
            src_ids, tgt_ids = ragged(src_flat, src_at, src_n), ragged(tgt_flat, tgt_at, tgt_n)
            self._check(src_ids, tgt_ids, drawn)
            src, tgt = self.subwords(split(src_ids, src_n), split(tgt_ids, tgt_n), drawn)
            (src_flat, src_n), (tgt_flat, tgt_n) = flattened(src), flattened(tgt)
            src_at, tgt_at = np.cumsum(src_n) - src_n, np.cumsum(tgt_n) - tgt_n
        sizes = self.joining.sizes(drawn)  # (R,) pairs per row, rows in the order drawn
        first = np.cumsum(sizes) - sizes  # (R,) each row's first pair
        joined = len(sizes) < len(drawn)
        rows = longest_source_first(np.add.reduceat(src_n, first) if joined else src_n)  # (R,)
        sizes = sizes[rows]
        starts = np.cumsum(sizes) - sizes  # (R,) each row's first pair, rows in their new order
        pairs = (np.arange(len(drawn)) + np.repeat(first[rows] - starts, sizes)) if joined else rows  # (N,) row by row
        idx, src_n, tgt_n = drawn[pairs], src_n[pairs], tgt_n[pairs]
        src_ids, tgt_ids = ragged(src_flat, src_at[pairs], src_n), ragged(tgt_flat, tgt_at[pairs], tgt_n)
        if self.subwords is None:  # the stored ids, checked once for the whole batch
            self._check(src_ids, tgt_ids, drawn)
        row_src, row_tgt = src_n, tgt_n  # (R,) each row's lengths: its pairs' summed
        if joined:
            row_src, row_tgt = np.add.reduceat(src_n, starts), np.add.reduceat(tgt_n, starts)
        R, S, T = len(sizes), int(row_src.max()), int(row_tgt.max()) + 1  # the widest row's lengths, T with BOS/EOS
        if self.shapes is not None:
            B, S, T = self.shapes.fit(R, S, T)
        else:
            m = self.multiple
            B, S, T = R, -(-S // m) * m, -(-T // m) * m
        src_len = np.ones(B, np.int64)  # filler rows (beyond R): a source of one PAD, which every encoder reads
        src_len[:R] = row_src
        tgt_len = np.zeros(B, np.int64)  # ... and no target: no loss, no gradient
        tgt_len[:R] = row_tgt + 1
        batch = Batch(
            src=torch.from_numpy(padded(src_ids, row_src, width=S, rows=B)),
            src_len=torch.from_numpy(src_len),
            tgt_in=torch.from_numpy(padded(tgt_ids, row_tgt, bos=True, width=T, rows=B)),
            tgt_out=torch.from_numpy(padded(tgt_ids, row_tgt, eos=True, width=T, rows=B)),
            tgt_len=torch.from_numpy(tgt_len),
            idx=torch.from_numpy(idx),
            host=HostLengths(torch.from_numpy(src_len.copy()), int(tgt_len.sum())),
        )
        if self.links is not None:  # guided alignment: (B, T, S) link distributions
            groups = [slice(a, a + n) for a, n in zip(starts.tolist(), sizes.tolist())]
            batch.align = self.links.targets(idx, split(src_ids, src_n), split(tgt_ids, tgt_n), (B, T, S), groups)
        return batch

    def _check(self, src_ids: np.ndarray, tgt_ids: np.ndarray, drawn: np.ndarray) -> None:
        """Ids beyond the vocabulary are damage, named here: one check a side for the whole batch."""
        for side, ids in (("src", src_ids), ("tgt", tgt_ids)):
            self.corpus.check_ids(side, int(ids.max(initial=0)), drawn)


def split(flat: np.ndarray, lens: np.ndarray) -> list[np.ndarray]:
    """The spans of ``flat``, ``lens`` long each, one after the other: one array a sentence."""
    return np.split(flat, np.cumsum(lens)[:-1])


def flattened(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Sequences as their ids one after the other, int64, and their lengths ``(B,)``."""
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    return np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lens.sum())), lens
