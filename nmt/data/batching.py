"""Compact encoded corpora, the length-bucketed token-budget sampler and padding.

An :class:`EncodedCorpus` keeps all ids in one flat array per side plus offsets, memory-mapped
from disk, so a corpus of tens of millions of pairs costs a training process only the pages its
batches touch, and the sampler plans an epoch with a few bytes per pair in numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ..specials import BOS, EOS, PAD
from .tokenizer import SubwordSampler


def length_dtype(longest: int) -> np.dtype:
    """The smallest unsigned type that holds lengths up to ``longest``."""
    return np.dtype(np.uint8 if longest < 256 else np.uint16 if longest < 65536 else np.uint32)


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.int32)


class EncodedCorpus:
    """Source and target ids of one split: ``flat[offsets[i]:offsets[i + 1]]`` is sentence ``i``.

    On disk a corpus is a directory of raw arrays (``{src,tgt}.{ids,offsets,lens}`` and ``meta.json``
    with their types); :meth:`load` maps them into memory, so a process holds only the pages its
    batches touch and processes on one machine share them through the page cache.
    """

    FILES = ("src.ids", "src.offsets", "src.lens", "tgt.ids", "tgt.offsets", "tgt.lens")

    def __init__(self, arrays: dict[str, np.ndarray], directory: Path | None = None):
        self.arrays, self.directory = arrays, directory
        self.src_flat, self.src_offsets, self.src_lens = arrays["src.ids"], arrays["src.offsets"], arrays["src.lens"]
        self.tgt_flat, self.tgt_offsets, self.tgt_lens = arrays["tgt.ids"], arrays["tgt.offsets"], arrays["tgt.lens"]

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], vocab_size: int) -> EncodedCorpus:
        arrays = {}
        for side, seqs in (("src", src), ("tgt", tgt)):
            lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
            offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            flat = np.fromiter((i for s in seqs for i in s), dtype=id_dtype(vocab_size), count=int(offsets[-1]))
            arrays |= {f"{side}.ids": flat, f"{side}.offsets": offsets}
            arrays[f"{side}.lens"] = lengths.astype(length_dtype(int(lengths.max(initial=0))))
        return cls(arrays)

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def src(self, i: int) -> np.ndarray:
        return self.src_flat[self.src_offsets[i] : self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_flat[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name in self.FILES:
            self.arrays[name].tofile(d / name)
        meta = {name: [str(self.arrays[name].dtype), len(self.arrays[name])] for name in self.FILES}
        (d / "meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: str | Path) -> EncodedCorpus:
        """The corpus saved in ``directory``, memory-mapped read-only."""
        d = Path(directory)
        meta = json.loads((d / "meta.json").read_text())
        arrays = {}
        for name, (dtype, n) in meta.items():
            arrays[name] = np.memmap(d / name, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype)
        return cls(arrays, d)

    def __getstate__(self) -> dict:  # a mapped corpus travels to DataLoader workers as its path, not its data
        return {"directory": self.directory} if self.directory else {"arrays": self.arrays}

    def __setstate__(self, state: dict) -> None:
        if state.get("directory"):
            self.__dict__.update(EncodedCorpus.load(state["directory"]).__dict__)
        else:
            self.__init__(state["arrays"])


class CorpusWriter:
    """Appends encoded pairs to a corpus directory block by block; :meth:`close` writes the offsets and types."""

    def __init__(self, directory: str | Path, vocab_size: int, max_len: int):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.dtypes = {"ids": id_dtype(vocab_size), "lens": length_dtype(max_len)}
        self.files = {
            f"{side}.{kind}": open(self.directory / f"{side}.{kind}", "wb")
            for side in ("src", "tgt")
            for kind in ("ids", "lens")
        }
        self.pairs, self.tokens = 0, {"src": 0, "tgt": 0}

    def append(self, src_flat: np.ndarray, src_lens: np.ndarray, tgt_flat: np.ndarray, tgt_lens: np.ndarray) -> None:
        for side, flat, lens in (("src", src_flat, src_lens), ("tgt", tgt_flat, tgt_lens)):
            self.files[f"{side}.ids"].write(np.asarray(flat, self.dtypes["ids"]).tobytes())
            self.files[f"{side}.lens"].write(np.asarray(lens, self.dtypes["lens"]).tobytes())
            self.tokens[side] += len(flat)
        self.pairs += len(src_lens)

    def close(self, chunk: int = 1 << 22) -> None:
        for f in self.files.values():
            f.close()
        meta = {}
        for side in ("src", "tgt"):
            lens = np.memmap(self.directory / f"{side}.lens", self.dtypes["lens"], "r", shape=(self.pairs,))
            with open(self.directory / f"{side}.offsets", "wb") as out:
                total = np.zeros(1, np.int64)
                out.write(total.tobytes())
                for a in range(0, self.pairs, chunk):  # cumulative sums a chunk at a time: memory stays flat
                    part = np.cumsum(lens[a : a + chunk], dtype=np.int64) + total[0]
                    out.write(part.tobytes())
                    total[0] = part[-1]
            del lens
            meta |= {
                f"{side}.ids": [str(self.dtypes["ids"]), self.tokens[side]],
                f"{side}.offsets": ["int64", self.pairs + 1],
                f"{side}.lens": [str(self.dtypes["lens"]), self.pairs],
            }
        (self.directory / "meta.json").write_text(json.dumps(meta))


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


class TokenBucketSampler(Sampler[list[int]]):
    """Batches of similar-length pairs under a padded-token budget, in shuffled order.

    Pairs are sorted by padded width (the longer of source and target + EOS), then target, then
    source length, and cut into batches of at most ``max_tokens`` padded tokens (:func:`plan_batches`).
    The cut is planned once; each epoch (``set_epoch``) shuffles the pairs within groups of equal
    lengths and the batch order, from ``seed`` and the epoch alone. The plan costs 8 bytes a pair
    (the canonical and the epoch's order) and a few bytes a batch, all in numpy.
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
    ):
        src = np.asarray(src_lens, dtype=np.int32)  # int32: 4 bytes a pair while planning
        tgt = np.asarray(tgt_lens, dtype=np.int32)
        width = np.maximum(src, tgt + 1)  # padded width of each pair
        longest = int(width.max(initial=0))
        if longest > max_tokens:
            raise ValueError(
                f"max_tokens={max_tokens} is smaller than the longest pair ({longest} tokens): "
                "raise it or lower max_len"
            )
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size, self.even = rank, world_size, even
        self.epoch = 0
        self._skip: tuple[int, int] | None = None
        span = longest + 1
        key_type = np.int32 if span**3 < 2**31 else np.int64
        key = (width.astype(key_type) * span + tgt) * span + src  # (width, target, source) as one sortable integer
        del src, tgt
        present = np.bincount(key, minlength=span**3) > 0
        if present.sum() <= 2**16:  # few distinct length triples (the usual case): a 16-bit key sorts by radix, O(n)
            key = (np.cumsum(present) - 1).astype(np.uint16)[key]
        order = np.argsort(key, kind="stable")
        self.order = order.astype(np.int32 if len(order) < 2**31 else np.int64)  # canonical: ties in index order
        key = key[order]
        del order
        change = np.flatnonzero(key[1:] != key[:-1]) + 1
        starts, ends = np.concatenate([[0], change]), np.concatenate([change, [len(key)]])
        tied = ends - starts > 1
        self.ties = np.stack([starts[tied], ends[tied]], axis=1)  # groups of equal lengths, shuffled each epoch
        self.bounds = plan_batches(width[self.order], max_tokens, max_sentences or math.inf)
        self._epoch_order = self.order
        if not even:
            # every rank must get as many batches as the others (collectives at epoch end), none dropped:
            # split the largest batches until the count divides evenly
            while (len(self.bounds) - 1) % world_size:
                i = int(np.argmax(np.diff(self.bounds)))
                a, b = self.bounds[i], self.bounds[i + 1]
                if b - a < 2:
                    raise ValueError(f"{len(self.order)} sentences cannot be shared by {world_size} ranks")
                self.bounds = np.insert(self.bounds, i + 1, (a + b) // 2)
        self._n_batches = len(self.bounds) - 1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def skip_batches(self, epoch: int, n: int) -> None:
        self._skip = (epoch, n)

    def _rank_batches(self, epoch: int) -> np.ndarray:
        """This rank's batch numbers for ``epoch``, in order; ``_epoch_order`` is the canonical order, ties shuffled."""
        batches = np.arange(self._n_batches)
        if self.shuffle:
            rng = np.random.default_rng([self.seed, epoch])
            order = self.order.copy()  # an epoch's order depends on (seed, epoch) alone
            for a, b in self.ties.tolist():
                order[a:b] = order[a:b][rng.permutation(b - a)]
            self._epoch_order = order
            rng.shuffle(batches)
        usable = len(batches) - len(batches) % self.world_size if self.even else len(batches)
        return batches[self.rank : usable : self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._rank_batches(self.epoch)
        if self._skip is not None and self._skip[0] == self.epoch:
            batches = batches[self._skip[1] :]
            self._skip = None
        order = self._epoch_order
        for k in batches.tolist():
            yield order[self.bounds[k] : self.bounds[k + 1]].tolist()

    def __len__(self) -> int:
        return self._n_batches // self.world_size


class BatchDataset(Dataset):
    """Indexed by a list of pair indices; returns the padded batch as tensors.

    ``src (B,S)``, ``src_len (B,)``, ``tgt_in (B,T)`` = BOS + target, ``tgt_out (B,T)`` =
    target + EOS, ``tgt_len (B,)`` = T per row, ``idx (B,)`` the pair indices; PAD elsewhere.
    With ``subwords`` (training only) each pair is re-segmented at random before padding.
    """

    def __init__(self, corpus: EncodedCorpus, subwords: SubwordSampler | None = None):
        self.corpus, self.subwords = corpus, subwords

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        c = self.corpus
        idx = np.asarray(indices, dtype=np.int64)
        src, tgt = [c.src(i) for i in idx.tolist()], [c.tgt(i) for i in idx.tolist()]
        if self.subwords is not None:
            src, tgt = self.subwords(src, tgt, idx)
        return {
            "src": pad(src),
            "src_len": torch.tensor([len(s) for s in src], dtype=torch.int64),
            "tgt_in": pad(tgt, bos=True),
            "tgt_out": pad(tgt, eos=True),
            "tgt_len": torch.tensor([len(t) + 1 for t in tgt], dtype=torch.int64),
            "idx": torch.from_numpy(idx),
        }
