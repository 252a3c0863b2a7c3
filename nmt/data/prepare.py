"""Streaming corpus preparation: read, normalise, split, sample, encode and write a corpus block by block.

Memory stays flat whatever the corpus size: no pass holds more than a few blocks of text.

1. **Sample**: a uniform sample of the training pairs for sentencepiece, the pairs of smallest
   key (a hash of the input, line number and seed: the same sample whatever the block size or
   the number of processes). The reading process keeps only the raw lines whose key may still
   make the sample; ``num_proc`` processes parse those few (a bad one stops here already),
   split off valid/test by a hash of the French and drop pairs with an empty side.
2. Train sentencepiece on the sample.
3. **Encode** the blocks again in parallel: check every line (file:line errors, or counted and
   logged skips), split, encode (a BPE model encodes each distinct word of a block once:
   :func:`~nmt.data.tokenizer.encode_flat`), filter (each rule counted and logged) and append the
   training ids to the on-disk arrays in input order; held-out pairs, which are few, are kept with
   their text for the references. Blocks travel to the workers as one bytes object each.

Everything is written under a temporary name and renamed when complete, so an interrupted
preparation leaves nothing a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .batching import CorpusWriter, EncodedCorpus, mix64
from .readers import Block, CorpusError, Pairs, Skips, parallel_blocks, parse_parallel, parse_tsv, tsv_blocks
from .tokenizer import Tokenizer, train_tokenizer

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Stream:
    """One input: a TSV file (``path``, columns ``cols``) or two parallel files (``src``, ``tgt``).

    ``split`` is where its pairs go: ``train``, ``valid`` or ``test``, or None to split them by hash.
    ``align_cols`` are the sure/possible gold-alignment columns of a TSV file (the built-in corpus).
    """

    path: str | None = None
    src: str | None = None
    tgt: str | None = None
    cols: tuple[int, int] = (0, 1)
    align_cols: tuple[int, int] | None = None
    split: str | None = None

    def blocks(self, block_lines: int) -> Iterator[Block]:
        if self.path:
            return tsv_blocks(self.path, block_lines)
        return parallel_blocks(self.src, self.tgt, block_lines)

    def skips(self, on_bad_line: str) -> list[Skips]:
        return [Skips(p, on_bad_line) for p in ([self.path] if self.path else [self.src, self.tgt])]

    def parse(self, block: Block, skips: list[Skips]) -> tuple[Pairs, list[int]]:
        if self.path:
            return parse_tsv(block, skips[0], *self.cols, self.align_cols)
        return parse_parallel(block, *skips)


@dataclass(frozen=True)
class Rules:
    """What preparation does to every pair (the ``conf/data`` settings it needs)."""

    on_bad_line: str
    valid: float  # held-out shares of hash-split inputs
    test: float
    max_len: int
    max_ratio: float
    ratio_min_len: int
    sample: int  # training pairs drawn for sentencepiece
    seed: int


def hash_split(src: list[str], valid: float, test: float) -> list[str]:
    """Deterministic split by a hash of the source sentence: one sentence never lands in two splits."""
    sha1 = hashlib.sha1
    bucket = np.array([int.from_bytes(sha1(s.encode()).digest()[:8], "big") % 10000 for s in src], np.int64)
    where = np.where(bucket < valid * 10000, "valid", np.where(bucket < (valid + test) * 10000, "test", "train"))
    return where.tolist()


def sample_keys(stream: int, linenos: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random 64-bit key per (seed, input, line) (splitmix64): the sample takes the smallest keys."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(linenos, np.uint64) + np.uint64(((seed * 1_000_003 + stream) << 40) % 2**64))


def content_hash(path: str | Path, cache_dir: Path) -> str:
    """SHA-1 of a file's bytes, remembered per (path, size, mtime): a big file is hashed once, not at every start."""
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"{p}: no such file")
    st = p.stat()
    fingerprint = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    index = cache_dir / "hashes.json"
    known = json.loads(index.read_text()) if index.is_file() else {}
    if fingerprint not in known:
        h = hashlib.sha1()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        known[fingerprint] = h.hexdigest()
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f"hashes.{os.getpid()}.part")
        tmp.write_text(json.dumps(known, indent=0))
        tmp.replace(index)
    return known[fingerprint]


# --- work done on one block, in a worker process ----------------------------------------


def _split_of(stream: Stream, pairs: Pairs, rules: Rules) -> np.ndarray:
    if stream.split:
        return np.full(len(pairs), stream.split, dtype=object)
    return np.array(hash_split(pairs.src, rules.valid, rules.test), dtype=object)


_TOKENIZER: tuple[Tokenizer, int] | None = None  # a worker's tokenizer and its number of threads


def _load_tokenizer(state: dict[str, bytes], threads: int) -> None:
    global _TOKENIZER
    _TOKENIZER = Tokenizer.from_state_dict(state), threads


def _drops(split: str, pairs: Pairs, ls: np.ndarray, lt: np.ndarray, rules: Rules) -> dict[str, np.ndarray]:
    """Per filtering rule, the pairs it drops (training pairs only for the length rules)."""
    empty = ~np.fromiter(map(bool, pairs.src), bool, len(pairs)) | ~np.fromiter(map(bool, pairs.tgt), bool, len(pairs))
    drops = {"an empty side": empty}
    if split == "train":
        longest, shortest = np.maximum(ls, lt), np.minimum(ls, lt)
        drops[f"more than {rules.max_len} subwords"] = ~empty & (longest > rules.max_len)
        drops[f"a length ratio above {rules.max_ratio}"] = (
            ~empty
            & (longest <= rules.max_len)
            & (longest >= rules.ratio_min_len)
            & (longest > rules.max_ratio * np.maximum(shortest, 1))
        )
    return drops


def _encode(job: tuple[int, Stream, Block, Rules]) -> dict[str, Any]:
    """Encode and filter a block: flat training ids, held-out pairs with their text, drop counts per rule."""
    index, stream, block, rules = job
    tok, threads = _TOKENIZER
    skips = stream.skips(rules.on_bad_line)
    pairs, _ = stream.parse(block, skips)
    where = _split_of(stream, pairs, rules)
    out: dict[str, Any] = {"stream": index, "skips": skips, "read": {}, "dropped": {}}
    for split in SPLITS:
        part = pairs.select(np.flatnonzero(where == split).tolist())
        out["read"][split] = len(part)
        if not len(part):
            continue
        (src, ls), (tgt, lt) = tok.encode_src_flat(part.src, threads), tok.encode_tgt_flat(part.tgt, threads)
        keep = np.ones(len(part), dtype=bool)
        for rule, mask in _drops(split, part, ls, lt, rules).items():
            out["dropped"][(split, rule)] = int(mask.sum())
            keep &= ~mask
        src, tgt = src[np.repeat(keep, ls)], tgt[np.repeat(keep, lt)]  # the kept pairs' ids
        ls, lt = ls[keep], lt[keep]
        if split == "train":
            out[split] = src, ls, tgt, lt
        else:  # few pairs: their text, and ids per pair
            out[split] = (part.select(np.flatnonzero(keep).tolist()), _per_pair(src, ls), _per_pair(tgt, lt))
    return out


def _per_pair(flat: np.ndarray, lens: np.ndarray) -> list[list[int]]:
    return [a.tolist() for a in np.split(flat, np.cumsum(lens)[:-1])] if len(lens) else []


# --- the parent: streams blocks to the workers, merges results in order ------------------


def _jobs(streams: list[Stream], rules: Rules, block_lines: int) -> Iterator[tuple[int, Stream, Block, Rules]]:
    for index, stream in enumerate(streams):
        for block in stream.blocks(block_lines):
            yield index, stream, block, rules


def _in_order(
    fn: Callable, jobs: Iterator, num_proc: int, init: Callable | None = None, init_args: tuple = ()
) -> Iterator[Any]:
    """``fn`` over ``jobs`` in ``num_proc`` processes, results in job order, at most 2 x num_proc blocks in flight."""
    if num_proc <= 1:
        if init:
            init(*init_args)
        yield from map(fn, jobs)
        return
    context = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with context.Pool(num_proc, initializer=init, initargs=init_args) as pool:
        pending: deque = deque()
        for job in jobs:
            pending.append(pool.apply_async(fn, (job,)))
            if len(pending) >= 2 * num_proc:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _check_drawn(job: tuple[int, Stream, Block, Rules]) -> tuple[np.ndarray, list[str], list[str]]:
    """Parse drawn lines: the positions (in the block) and text of those that are usable training pairs."""
    index, stream, block, rules = job
    pairs, linenos = stream.parse(block, stream.skips(rules.on_bad_line))  # errors stop here; skips: in pass 2
    where = _split_of(stream, pairs, rules)
    usable = [i for i, (w, s, t) in enumerate(zip(where, pairs.src, pairs.tgt)) if w == "train" and s and t]
    position = {n: i for i, n in enumerate(block.numbers())}
    return (
        np.array([position[linenos[i]] for i in usable], np.int64),
        [pairs.src[i] for i in usable],
        [pairs.tgt[i] for i in usable],
    )


class _Draw:
    """The ``size`` lines of smallest sample key seen so far, raw, in input order (pass 1 keeps only these).

    Per line: its key, input and line number, and its raw bytes (a target line too for parallel files; b""
    for TSV lines), in arrays that blocks append to and :meth:`_keep` trims to ``size`` from time to time.
    """

    def __init__(self, size: int, seed: int):
        self.size, self.seed, self.lines_read, self.held = size, seed, 0, 0
        self.parts: list[tuple[np.ndarray, ...]] = []  # per block: its drawn lines' fields
        self.limit = np.uint64(2**64 - 1)

    def add(self, index: int, block: Block) -> None:
        self.lines_read += block.lines
        numbers = np.arange(block.first, block.first + block.lines)
        keys = sample_keys(index, numbers, self.seed)
        pick = np.flatnonzero(keys < self.limit)
        if not len(pick):
            return
        src = _objects(block.src_lines(pick))
        tgt = _objects(block.tgt_lines(pick)) if block.tgt is not None else np.full(len(pick), b"", object)
        self.parts.append((keys[pick], np.full(len(pick), index, np.int32), numbers[pick], src, tgt))
        self.held += len(pick)
        if self.held > 1.5 * self.size:
            self._keep()

    def _keep(self) -> None:
        """Only the ``size`` lines of smallest key, in input order."""
        keys, *rest = (np.concatenate(field) for field in zip(*self.parts))
        pick = np.sort(np.argpartition(keys, self.size)[: self.size]) if len(keys) > self.size else slice(None)
        self.parts = [(keys[pick], *(field[pick] for field in rest))]
        self.held, self.limit = len(self.parts[0][0]), self.parts[0][0].max()

    def blocks(self, streams: list[Stream], block_lines: int) -> Iterator[tuple[int, int, Block]]:
        """(input, first row, block): the drawn lines in blocks of at most ``block_lines`` lines of one input."""
        if not self.parts:
            return
        self._keep()
        self.keys, self.inputs, self.linenos, src, tgt = self.parts[0]
        for index in np.unique(self.inputs).tolist():
            rows = np.flatnonzero(self.inputs == index)  # contiguous: inputs are read one after the other
            for start in range(int(rows[0]), int(rows[-1]) + 1, block_lines):
                end = min(start + block_lines, int(rows[-1]) + 1)
                tgt_text = None if streams[index].path else b"\n".join(tgt[start:end])
                linenos = self.linenos[start:end].tolist()
                yield index, start, Block(linenos[0], end - start, b"\n".join(src[start:end]), tgt_text, linenos)


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), object)
    out[:] = items
    return out


def _usable(
    streams: list[Stream], rules: Rules, block_lines: int, num_proc: int, size: int
) -> tuple[np.ndarray, list[str], list[str], int]:
    """Draw the ``size`` lines of smallest key, parse them: the usable pairs' keys and text, and the lines read."""
    draw = _Draw(size, rules.seed)
    for index, stream in enumerate(streams):
        for block in stream.blocks(block_lines):
            draw.add(index, block)
    starts: deque = deque()  # each block's first row, filled as the pool takes the blocks

    def jobs() -> Iterator[tuple[int, Stream, Block, Rules]]:
        for index, start, block in draw.blocks(streams, block_lines):
            starts.append(start)
            yield index, streams[index], block, rules

    keys, src, tgt = [np.zeros(0, np.uint64)], [], []
    for picked, s, t in _in_order(_check_drawn, jobs(), num_proc):
        keys.append(draw.keys[starts.popleft() + picked])
        src += s
        tgt += t
    return np.concatenate(keys), src, tgt, draw.lines_read


def _sample(streams: list[Stream], rules: Rules, block_lines: int, num_proc: int) -> Pairs:
    """Pass 1: the sentencepiece sample, the ``rules.sample`` usable training pairs of smallest key.

    Keys depend on the input and line number only, so this pass keeps the raw lines of smallest key
    (a few more than the sample, for those that land in valid/test or have an empty side) and parses
    only those. Should too few of them be usable, it draws twice as many and reads the inputs again.
    """
    held_out = rules.valid + rules.test if any(s.split is None for s in streams) else 0.0
    size = int(rules.sample / max(1.0 - held_out, 0.01) * 1.02) + 1000
    while True:
        keys, src, tgt, lines_read = _usable(streams, rules, block_lines, num_proc, size)
        if len(src) >= rules.sample or size >= lines_read:
            break
        size *= 2
    pick = np.sort(np.argpartition(keys, rules.sample)[: rules.sample]) if len(keys) > rules.sample else range(len(src))
    return Pairs([src[i] for i in pick], [tgt[i] for i in pick])


def prepare(
    streams: list[Stream],
    out: Path,
    *,
    rules: Rules,
    spm: dict,
    spm_cache: Path,
    num_proc: int,
    block_lines: int,
) -> dict:
    """Prepare ``streams`` into the directory ``out`` (tokenizer, one corpus per split, held-out text, stats)."""
    if out.exists():
        return json.loads((out / "stats.json").read_text())
    tmp = out.with_name(f"{out.name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        stats = _prepare(streams, tmp, rules, spm, spm_cache, num_proc, block_lines)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


def _prepare(
    streams: list[Stream], out: Path, rules: Rules, spm: dict, spm_cache: Path, num_proc: int, block_lines: int
) -> dict:
    clock = [time.perf_counter()]
    sample = _sample(streams, rules, block_lines, num_proc)
    clock.append(time.perf_counter())
    if not len(sample):
        raise CorpusError("no training pair has both sides non-empty; give more data or other split fractions")
    log.info("training sentencepiece on a sample of %d training pairs", len(sample))
    tok = train_tokenizer(sample.src, sample.tgt, spm_cache, seed=rules.seed, **spm)
    del sample
    clock.append(time.perf_counter())
    out.mkdir(parents=True)
    tok.save(out / "tokenizer")
    vocab = max(tok.src_vocab_size, tok.tgt_vocab_size)
    writer = CorpusWriter(out / "train", vocab, rules.max_len)
    held_out = {s: [] for s in ("valid", "test")}
    read, dropped = dict.fromkeys(SPLITS, 0), {}
    skips = [s.skips(rules.on_bad_line) for s in streams]
    jobs = _jobs(streams, rules, block_lines)
    threads = 1 if num_proc > 1 else -1  # sentencepiece's own threads only when it has the cores to itself
    for result in _in_order(_encode, jobs, num_proc, _load_tokenizer, (tok.state_dict(), threads)):
        for mine, theirs in zip(skips[result["stream"]], result["skips"]):
            mine.merge(theirs)
        for s in SPLITS:
            read[s] += result["read"][s]
        for k, n in result["dropped"].items():
            dropped[k] = dropped.get(k, 0) + n
        if "train" in result:
            writer.append(*result["train"])
        for s in held_out:
            if s in result:
                held_out[s].append(result[s])
    writer.close()
    clock.append(time.perf_counter())
    for stream_skips in skips:
        for s in stream_skips:
            s.report()
    for (split, rule), n in dropped.items():
        if n:
            log.info("%s: dropped %d of %d pairs with %s", split, n, read[split], rule)
    tokens = {f"{side}_tokens": n for side, n in writer.tokens.items()}
    stats = {"train": dict(read=read["train"], kept=writer.pairs, **tokens)}
    for split, parts in held_out.items():
        texts = Pairs.concat([p for p, _, _ in parts])
        corpus = EncodedCorpus.from_lists(
            [ids for _, s, _ in parts for ids in s], [ids for _, _, t in parts for ids in t], vocab
        )
        corpus.save(out / split)
        (out / f"{split}.json").write_text(json.dumps(texts.__dict__, ensure_ascii=False))
        stats[split] = dict(
            read=read[split],
            kept=len(corpus),
            src_tokens=int(corpus.src_lens.sum()),
            tgt_tokens=int(corpus.tgt_lens.sum()),
        )
    for split, s in stats.items():
        if not s["read"]:
            raise CorpusError(f"the {split} split is empty; give more data or other split fractions")
        if not s["kept"]:
            raise CorpusError(f"the {split} split has no usable pairs left after filtering ({s['read']} read)")
    stats["seconds"] = dict(zip(("sample", "sentencepiece", "encode"), np.diff(clock).round(1).tolist()))
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    log.info("prepared data in %s: %s", out, stats)
    return stats
