"""Compact encoded corpora, the length-bucketed token-budget sampler and padding.

An :class:`EncodedCorpus` keeps all ids in one flat array per side plus offsets, so a
corpus of millions of pairs costs a few bytes per token instead of a Python object each.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ..specials import BOS, EOS, PAD


class EncodedCorpus:
    """Source and target ids of one split: ``flat[offsets[i]:offsets[i + 1]]`` is sentence ``i``."""

    def __init__(self, src_flat: np.ndarray, src_offsets: np.ndarray, tgt_flat: np.ndarray, tgt_offsets: np.ndarray):
        self.src_flat, self.src_offsets = src_flat, src_offsets
        self.tgt_flat, self.tgt_offsets = tgt_flat, tgt_offsets

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], vocab_size: int) -> EncodedCorpus:
        dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32

        def pack(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
            lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
            offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            flat = np.fromiter((i for s in seqs for i in s), dtype=dtype, count=int(offsets[-1]))
            return flat, offsets

        return cls(*pack(src), *pack(tgt))

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lens(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.src_flat, self.src_offsets, self.tgt_flat, self.tgt_offsets))

    def src(self, i: int) -> np.ndarray:
        return self.src_flat[self.src_offsets[i] : self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_flat[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]

    def save(self, path) -> None:
        np.savez(
            path,
            src_flat=self.src_flat,
            src_offsets=self.src_offsets,
            tgt_flat=self.tgt_flat,
            tgt_offsets=self.tgt_offsets,
        )

    @classmethod
    def load(cls, path) -> EncodedCorpus:
        with np.load(path) as z:
            return cls(z["src_flat"], z["src_offsets"], z["tgt_flat"], z["tgt_offsets"])


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


def pad(seqs: Sequence[Sequence[int]], bos: bool = False, eos: bool = False) -> torch.Tensor:
    """``(B, longest)`` int64 tensor of the sequences, each after BOS and/or before EOS if asked, PAD after."""
    lead = int(bos)
    out = np.full((len(seqs), max(len(s) for s in seqs) + lead + int(eos)), PAD, dtype=np.int64)
    for row, s in enumerate(seqs):
        out[row, lead : lead + len(s)] = s
        if bos:
            out[row, 0] = BOS
        if eos:
            out[row, lead + len(s)] = EOS
    return torch.from_numpy(out)


class TokenBucketSampler(Sampler[list[int]]):
    """Batches of similar-length pairs under a padded-token budget, in shuffled order.

    Pairs are sorted by target then source length (ties broken at random), cut greedily into
    batches of at most ``max_tokens`` padded tokens, and the batch order is shuffled. Both
    depend only on ``seed`` and the epoch (``set_epoch``). With ``world_size > 1`` each rank
    takes every ``world_size``-th batch, so ranks get disjoint shares of equal length: with
    ``even`` (training) the last ``len % world_size`` batches are dropped (the shuffled order
    drops different ones each epoch); without it (held-out splits) the largest batches are
    halved until the count divides, so every sentence is evaluated exactly once.
    ``skip_batches(epoch, n)`` makes that epoch start after its first ``n`` batches (exact resume).
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
    ):
        self.src_lens, self.tgt_lens = np.asarray(src_lens), np.asarray(tgt_lens)
        longest = max(int(self.src_lens.max(initial=0)), int(self.tgt_lens.max(initial=0)) + 1)
        if longest > max_tokens:
            raise ValueError(
                f"max_tokens={max_tokens} is smaller than the longest pair ({longest} tokens): "
                "raise it or lower max_len"
            )
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size, self.even = rank, world_size, even
        self.max_sentences = max_sentences or math.inf
        self.epoch = 0
        self._skip: tuple[int, int] | None = None
        self._n_batches = len(self._batches(0))  # the same every epoch: only ties are shuffled

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def skip_batches(self, epoch: int, n: int) -> None:
        self._skip = (epoch, n)

    def _batches(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        tie = rng.random(len(self.src_lens)) if self.shuffle else np.arange(len(self.src_lens))
        order = np.lexsort((tie, self.src_lens, self.tgt_lens))
        width = np.maximum(self.src_lens[order], self.tgt_lens[order] + 1)  # padded width of each pair
        batches = [order[a:b] for a, b in cut_batches(width.tolist(), self.max_tokens, self.max_sentences)]
        if not self.even:
            # every rank must get as many batches as the others (collectives at epoch end), none dropped:
            # split the largest batches until the count divides evenly
            while len(batches) % self.world_size:
                i = max(range(len(batches)), key=lambda k: len(batches[k]))
                if len(batches[i]) < 2:
                    raise ValueError(f"{len(self.src_lens)} sentences cannot be shared by {self.world_size} ranks")
                b = batches.pop(i)
                batches[i:i] = [b[: len(b) // 2], b[len(b) // 2 :]]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _rank_batches(self, epoch: int) -> list[np.ndarray]:
        batches = self._batches(epoch)
        usable = len(batches) - len(batches) % self.world_size if self.even else len(batches)
        return batches[self.rank : usable : self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._rank_batches(self.epoch)
        if self._skip is not None and self._skip[0] == self.epoch:
            batches = batches[self._skip[1] :]
            self._skip = None
        return iter([b.tolist() for b in batches])

    def __len__(self) -> int:
        return self._n_batches // self.world_size


class BatchDataset(Dataset):
    """Indexed by a list of pair indices; returns the padded batch as tensors.

    ``src (B,S)``, ``src_len (B,)``, ``tgt_in (B,T)`` = BOS + target, ``tgt_out (B,T)`` =
    target + EOS, ``tgt_len (B,)`` = T per row, ``idx (B,)`` the pair indices; PAD elsewhere.
    """

    def __init__(self, corpus: EncodedCorpus):
        self.corpus = corpus

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        c = self.corpus
        idx = np.asarray(indices, dtype=np.int64)
        src, tgt = [c.src(i) for i in idx.tolist()], [c.tgt(i) for i in idx.tolist()]
        return {
            "src": pad(src),
            "src_len": torch.from_numpy(c.src_offsets[idx + 1] - c.src_offsets[idx]),
            "tgt_in": pad(tgt, bos=True),
            "tgt_out": pad(tgt, eos=True),
            "tgt_len": torch.from_numpy(c.tgt_offsets[idx + 1] - c.tgt_offsets[idx] + 1),
            "idx": torch.from_numpy(idx),
        }
