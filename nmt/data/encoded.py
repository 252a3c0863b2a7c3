"""Encoded corpora on disk: one flat id array per side plus offsets and lengths, memory-mapped for training.

An :class:`EncodedCorpus` keeps all ids in one flat array per side plus offsets, memory-mapped
from disk, so a corpus of tens of millions of pairs costs a training process only the pages its
batches touch. :class:`CorpusWriter` appends encoded blocks during preparation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nmt.data.readers import CorpusError


def length_dtype(longest: int) -> np.dtype:
    """The smallest unsigned type that holds lengths up to ``longest``."""
    return np.dtype(np.uint8 if longest < 256 else np.uint16 if longest < 65536 else np.uint32)


def damaged(path: Path, reason: str) -> CorpusError:
    """The one line for a damaged file of a prepared corpus (``data/prepared/<key>/...``): which, why, what to do."""
    root = next((p for p in path.parents if p.parent.name == "prepared"), path.parent)
    return CorpusError(f"{path}: damaged prepared data ({reason}); delete {root} and run again to prepare it anew")


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.int32)


class EncodedCorpus:
    """Source and target ids of one split: ``flat[offsets[i]:offsets[i + 1]]`` is sentence ``i``.

    On disk a corpus is a directory of raw arrays (``{src,tgt}.{ids,offsets,lens}`` and ``meta.json``
    with their types); :meth:`load` maps them into memory, so a process holds only the pages its
    batches touch and processes on one machine share them through the page cache.
    """

    FILES = ("src.ids", "src.offsets", "src.lens", "tgt.ids", "tgt.offsets", "tgt.lens")
    OPTIONAL = ("lines",)  # the training split's: each pair's line number in its input

    def __init__(
        self, arrays: dict[str, np.ndarray], directory: Path | None = None, vocab: tuple[int, int] | None = None
    ):
        self.arrays, self.directory, self.vocab = arrays, directory, vocab
        self.src_flat, self.src_offsets, self.src_lens = arrays["src.ids"], arrays["src.offsets"], arrays["src.lens"]
        self.tgt_flat, self.tgt_offsets, self.tgt_lens = arrays["tgt.ids"], arrays["tgt.offsets"], arrays["tgt.lens"]
        self.lines: np.ndarray | None = arrays.get("lines")

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
        meta["max_id"] = {side: int(self.arrays[f"{side}.ids"].max(initial=0)) for side in ("src", "tgt")}
        (d / "meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: str | Path, vocab: tuple[int, int] | None = None) -> EncodedCorpus:
        """The corpus saved in ``directory``, memory-mapped read-only, after checks that cost no pass over the ids:
        every file of the size its type and count give, offsets that span the ids, and (with ``vocab``, the source
        and target vocabulary sizes) no id outside the vocabularies. A defect raises a CorpusError naming the file."""
        d = Path(directory)
        try:
            meta = json.loads((d / "meta.json").read_text())
            names = [*cls.FILES, *(n for n in cls.OPTIONAL if n in meta)]
            types = {name: (np.dtype(meta[name][0]), int(meta[name][1])) for name in names}
            max_id = {side: int(meta["max_id"][side]) for side in ("src", "tgt")}
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            raise damaged(d / "meta.json", f"unreadable: {type(e).__name__}") from None
        arrays = {}
        for name, (dtype, n) in types.items():
            path = d / name
            size = path.stat().st_size if path.is_file() else None
            if size != n * dtype.itemsize:
                raise damaged(path, "missing" if size is None else f"{size} bytes, {n * dtype.itemsize} expected")
            arrays[name] = np.memmap(path, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype)
        for side, limit in zip(("src", "tgt"), vocab or (None, None)):
            offsets, ids = arrays[f"{side}.offsets"], arrays[f"{side}.ids"]
            if len(offsets) and (offsets[0] != 0 or offsets[-1] != len(ids)):
                raise damaged(d / f"{side}.offsets", f"ends at {offsets[-1]}, the ids at {len(ids)}")
            if limit is not None and max_id[side] >= limit:
                raise damaged(d / f"{side}.ids", f"ids up to {max_id[side]}, the vocabulary has {limit}")
        return cls(arrays, d, vocab)

    def check_ids(self, side: str, largest: int, indices: Sequence[int]) -> None:
        """Raise a CorpusError naming the file unless ``largest``, the largest id read for pairs ``indices`` of
        ``side``, is in its vocabulary: the ids themselves are checked where they are read, at no extra pass."""
        limit = None if self.vocab is None else self.vocab[0 if side == "src" else 1]
        if limit is not None and largest >= limit:
            read = self.src if side == "src" else self.tgt
            bad = next(i for i in indices if int(read(i).max(initial=0)) >= limit)  # an empty sentence has no max
            where = (self.directory or Path(".")) / f"{side}.ids"
            raise damaged(where, f"pair {bad} has id {largest}, the vocabulary has {limit}")

    def __getstate__(self) -> dict:  # a mapped corpus travels to DataLoader workers as its path, not its data
        return {"directory": self.directory, "vocab": self.vocab} if self.directory else {"arrays": self.arrays}

    def __setstate__(self, state: dict) -> None:
        if state.get("directory"):
            self.__dict__.update(EncodedCorpus.load(state["directory"], state.get("vocab")).__dict__)
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
        } | {"lines": open(self.directory / "lines", "wb")}
        self.pairs, self.tokens, self.max_id = 0, {"src": 0, "tgt": 0}, {"src": 0, "tgt": 0}

    def append(
        self, src_flat: np.ndarray, src_lens: np.ndarray, tgt_flat: np.ndarray, tgt_lens: np.ndarray, lines: np.ndarray
    ) -> None:
        """Pairs of a block: their ids end to end, lengths, and line numbers in their input."""
        self.files["lines"].write(np.asarray(lines, np.int64).tobytes())
        for side, flat, lens in (("src", src_flat, src_lens), ("tgt", tgt_flat, tgt_lens)):
            self.files[f"{side}.ids"].write(np.asarray(flat, self.dtypes["ids"]).tobytes())
            self.files[f"{side}.lens"].write(np.asarray(lens, self.dtypes["lens"]).tobytes())
            self.tokens[side] += len(flat)
            self.max_id[side] = max(self.max_id[side], int(np.max(flat, initial=0)))
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
        meta["lines"] = ["int64", self.pairs]
        meta["max_id"] = dict(self.max_id)
        (self.directory / "meta.json").write_text(json.dumps(meta))
