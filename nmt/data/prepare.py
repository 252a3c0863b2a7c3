"""Streaming corpus preparation: read, normalise, split, sample, encode and write a corpus block by block.

Memory stays flat whatever the corpus size: no pass holds more than a few blocks of text.

1. **Scan** every input in blocks (in ``num_proc`` processes): check the lines (file:line
   errors or counted skips), split off valid/test by a hash of the French, count, and draw
   a uniform sample of the training pairs for sentencepiece (bottom-k sampling on a hash of
   the line: the same sample whatever the block size or the number of processes).
2. Train sentencepiece on the sample.
3. **Encode** the blocks again in parallel, filter them (each rule counted and logged) and
   append the training ids to the on-disk arrays in input order; held-out pairs, which are
   few, are kept with their text for the references.

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
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from .batching import CorpusWriter, EncodedCorpus
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
    out = []
    for s in src:
        b = int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "big") % 10000
        out.append("valid" if b < valid * 10000 else "test" if b < (valid + test) * 10000 else "train")
    return out


def sample_keys(stream: int, linenos: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random 64-bit key per (seed, input, line) (splitmix64): the sample takes the smallest keys."""
    with np.errstate(over="ignore"):
        x = np.asarray(linenos, np.uint64) + np.uint64(((seed * 1_000_003 + stream) << 40) % 2**64)
        x = (x + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(31))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(29))


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


def _scan(job: tuple[int, Stream, Block, Rules]) -> dict[str, Any]:
    """Check and count a block's lines; its share of the sentencepiece sample (smallest keys first)."""
    index, stream, block, rules = job
    skips = stream.skips(rules.on_bad_line)
    pairs, linenos = stream.parse(block, skips)
    where = _split_of(stream, pairs, rules)
    train = np.flatnonzero((where == "train") & np.array([bool(s and t) for s, t in zip(pairs.src, pairs.tgt)]))
    keys = sample_keys(index, np.asarray(linenos, np.int64)[train], rules.seed)
    if len(keys) > rules.sample:
        pick = np.sort(np.argpartition(keys, rules.sample)[: rules.sample])  # in input order
        keys, train = keys[pick], train[pick]
    return dict(
        stream=index,
        counts={s: int((where == s).sum()) for s in SPLITS},
        skips=skips,
        keys=keys,
        src=[pairs.src[i] for i in train],
        tgt=[pairs.tgt[i] for i in train],
    )


_TOKENIZER: Tokenizer | None = None


def _load_tokenizer(state: dict[str, bytes]) -> None:
    global _TOKENIZER
    _TOKENIZER = Tokenizer.from_state_dict(state)


def _drops(split: str, pairs: Pairs, ls: np.ndarray, lt: np.ndarray, rules: Rules) -> dict[str, np.ndarray]:
    """Per filtering rule, the pairs it drops (training pairs only for the length rules)."""
    empty = np.array([not s or not t for s, t in zip(pairs.src, pairs.tgt)], dtype=bool)
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
    _, stream, block, rules = job
    tok = _TOKENIZER
    pairs, _ = stream.parse(block, stream.skips(rules.on_bad_line))
    where = _split_of(stream, pairs, rules)
    out: dict[str, Any] = {"read": {}, "dropped": {}}
    for split in SPLITS:
        part = pairs.select(np.flatnonzero(where == split).tolist())
        out["read"][split] = len(part)
        if not len(part):
            continue
        src, tgt = tok.encode_src(part.src), tok.encode_tgt(part.tgt)
        ls = np.fromiter(map(len, src), np.int64, len(src))
        lt = np.fromiter(map(len, tgt), np.int64, len(tgt))
        keep = np.ones(len(part), dtype=bool)
        for rule, mask in _drops(split, part, ls, lt, rules).items():
            out["dropped"][(split, rule)] = int(mask.sum())
            keep &= ~mask
        kept = np.flatnonzero(keep)
        if split == "train":
            out[split] = (
                np.fromiter(chain.from_iterable(src[i] for i in kept), np.int32, int(ls[kept].sum())),
                ls[kept],
                np.fromiter(chain.from_iterable(tgt[i] for i in kept), np.int32, int(lt[kept].sum())),
                lt[kept],
            )
        else:
            out[split] = (part.select(kept.tolist()), [src[i] for i in kept], [tgt[i] for i in kept])
    return out


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


def _scan_all(streams: list[Stream], rules: Rules, block_lines: int, num_proc: int) -> tuple[Pairs, dict]:
    """Pass 1: line checks, split counts and the sentencepiece sample."""
    skips = [s.skips(rules.on_bad_line) for s in streams]
    counts = dict.fromkeys(SPLITS, 0)
    keys, src, tgt = np.zeros(0, np.uint64), [], []
    for result in _in_order(_scan, _jobs(streams, rules, block_lines), num_proc):
        for mine, theirs in zip(skips[result["stream"]], result["skips"]):
            mine.merge(theirs)
        for s in SPLITS:
            counts[s] += result["counts"][s]
        keys = np.concatenate([keys, result["keys"]])
        src.extend(result["src"])
        tgt.extend(result["tgt"])
        if len(keys) > 2 * rules.sample:  # keep the smallest keys seen so far
            pick = np.sort(np.argpartition(keys, rules.sample)[: rules.sample])
            keys, src, tgt = keys[pick], [src[i] for i in pick], [tgt[i] for i in pick]
    for stream_skips in skips:
        for s in stream_skips:
            s.report()
    if len(keys) > rules.sample:
        pick = np.sort(np.argpartition(keys, rules.sample)[: rules.sample])  # in input order
        src, tgt = [src[i] for i in pick], [tgt[i] for i in pick]
    return Pairs(src, tgt), counts


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
    sample, counts = _scan_all(streams, rules, block_lines, num_proc)
    clock.append(time.perf_counter())
    for name in SPLITS:
        if not counts[name]:
            raise CorpusError(f"the {name} split is empty; give more data or other split fractions")
    if not len(sample):
        raise CorpusError("the train split has no pair with both sides non-empty")
    log.info("training sentencepiece on %d of %d training pairs", len(sample), counts["train"])
    tok = train_tokenizer(sample.src, sample.tgt, spm_cache, seed=rules.seed, **spm)
    del sample
    clock.append(time.perf_counter())
    out.mkdir(parents=True)
    tok.save(out / "tokenizer")
    vocab = max(tok.src_vocab_size, tok.tgt_vocab_size)
    writer = CorpusWriter(out / "train", vocab, rules.max_len)
    held_out = {s: [] for s in ("valid", "test")}
    read, dropped = dict.fromkeys(SPLITS, 0), {}
    jobs = _jobs(streams, rules, block_lines)
    for result in _in_order(_encode, jobs, num_proc, _load_tokenizer, (tok.state_dict(),)):
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
        if not s["kept"]:
            raise CorpusError(f"the {split} split has no usable pairs left after filtering ({s['read']} read)")
    stats["seconds"] = dict(zip(("scan", "sentencepiece", "encode"), np.diff(clock).round(1).tolist()))
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    log.info("prepared data in %s: %s", out, stats)
    return stats
