"""A prepared corpus: sentencepiece models, the encoded splits and the held-out text, cached by content.

:func:`prepare_corpus` is the whole preparation behind one call, without Lightning: the cache key
(source, files' contents, settings), a lock (DDP ranks and concurrent runs prepare once), the
streaming passes of :func:`prepare`, and :class:`PreparedCorpus` to read the result.

The streaming passes read, normalise, split, sample, encode and write a corpus block by block.
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

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from nmt.bounds import BIG, BIG0, POSITIONS, Choice, Range, check_fields
from nmt.commands import command
from nmt.data import atomic
from nmt.data.encoded import CorpusWriter, EncodedCorpus, damaged
from nmt.data.parallel import in_order
from nmt.data.readers import ON_BAD_LINE, Block, CorpusError, Pairs
from nmt.data.rules import Rules
from nmt.data.sample import draw_sample
from nmt.data.sources import SPLITS, CorpusSource, Stream, input_bytes
from nmt.data.targets import in_training
from nmt.data.tokenizer import Tokenizer, train_tokenizer
from nmt.progress import Progress

log = logging.getLogger(__name__)

VERSION = 4  # bump when the prepared format changes (3: meta.json holds the largest id of each side; 4: the
# training pairs' input line numbers)


@dataclass(frozen=True)
class Preparation:
    """How a corpus is prepared: ``data.prepare`` in ``conf/data/base.yaml``."""

    spm: dict  # sentencepiece settings, and ``sample``: training pairs drawn to train it on
    max_len: Annotated[int, POSITIONS]  # subwords per side: a longer pair could not be given a position anyway
    max_ratio: Annotated[float, Range(1)]  # a finite length ratio; beyond the longest pair's, the rule is off
    ratio_min_len: Annotated[int, BIG0]
    on_bad_line: Annotated[str, Choice(ON_BAD_LINE)] = "error"
    split: dict | None = None  # valid/test shares split off by hash, where no held-out files are given
    # processes (None: every core this process may use); 4,096 is more than any machine's cores
    num_proc: Annotated[int, Range(1, 4096, integer=True, null=True)] | None = None
    block_lines: Annotated[int, BIG] = 100_000
    reverse: bool = False  # English to French: each pair turned round after the split (the same pairs held out)

    def __post_init__(self) -> None:
        check_fields(self, "data.prepare.")

    def rules(self, seed: int) -> Rules:
        split = self.split or {}
        return Rules(
            on_bad_line=self.on_bad_line,
            valid=split.get("valid", 0.0),
            test=split.get("test", 0.0),
            max_len=self.max_len,
            max_ratio=self.max_ratio,
            ratio_min_len=self.ratio_min_len,
            sample=self.spm["sample"],
            seed=seed,
            reverse=self.reverse,
        )


@dataclass
class PreparedCorpus:
    """What training and evaluation read: the tokenizer, each split's ids, the held-out splits' raw text
    (references, and gold links for the built-in corpus, indexed like the ids), and preparation statistics."""

    directory: Path
    tokenizer: Tokenizer
    splits: dict[str, EncodedCorpus]
    references: dict[str, Pairs]
    stats: dict[str, Any]

    @classmethod
    def load(cls, directory: str | Path) -> PreparedCorpus:
        """The prepared corpus in ``directory``; a damaged file raises a CorpusError that names it."""
        d = Path(directory)
        try:
            tokenizer = Tokenizer.load(d / "tokenizer")
        except Exception as e:  # noqa: BLE001 - sentencepiece raises RuntimeError or its own errors on bad bytes
            raise damaged(d / "tokenizer", f"unreadable sentencepiece models: {type(e).__name__}") from None
        vocab = (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
        return cls(
            directory=d,
            tokenizer=tokenizer,
            splits={name: EncodedCorpus.load(d / name, vocab) for name in SPLITS},
            references={n: Pairs(**_json(d / f"{n}.json")) for n in SPLITS if n != "train"},
            stats=_json(d / "stats.json"),
        )


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return data
    except (OSError, ValueError) as e:
        raise damaged(path, f"unreadable: {type(e).__name__}") from None


def cache_key(source: CorpusSource, prep: Preparation, cache_dir: Path, seed: int) -> str:
    """The prepared data's name: the source (files by content), every processing setting and the seed."""
    parts: dict[str, Any] = dict(
        version=VERSION,
        bad=prep.on_bad_line,
        split=prep.split,
        spm={k: v for k, v in prep.spm.items() if k != "sample"},
        spm_sample=prep.spm["sample"],
        max_len=prep.max_len,
        ratio=(prep.max_ratio, prep.ratio_min_len),
        seed=seed,
    )
    if prep.reverse:  # only when set: corpora prepared before the setting existed keep their names
        parts["reverse"] = True
    parts |= source.key(cache_dir)
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def prepared_dir(source: CorpusSource, prep: Preparation, cache_dir: str | Path, seed: int) -> Path:
    return Path(cache_dir) / "prepared" / cache_key(source, prep, Path(cache_dir), seed)


def prepare_corpus(source: CorpusSource, prep: Preparation, cache_dir: str | Path, seed: int) -> PreparedCorpus:
    """The prepared corpus of ``source``, prepared first unless the cache has it."""
    return PreparedCorpus.load(ensure_prepared(source, prep, cache_dir, seed))


def ensure_prepared(source: CorpusSource, prep: Preparation, cache_dir: str | Path, seed: int) -> Path:
    """The directory of ``source``'s prepared corpus, prepared first unless the cache has it.

    Concurrent callers (DDP ranks, runs side by side) wait on a lock and prepare once; leftovers of
    an interrupted preparation are removed, never trusted.
    """
    cache_dir = Path(cache_dir)
    out = prepared_dir(source, prep, cache_dir, seed)
    if not out.is_dir():
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(cache_dir / ".prepare.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if out.is_dir():  # another process (a DDP rank, a node sharing the folder) prepared it while we waited
                log.info("prepared data in %s: prepared by another process, reused", out)
                return out
            atomic.remove_leftovers(out.parent, out.name)  # an interrupted preparation: redone, never trusted
            prepare(
                source.streams(cache_dir),
                out,
                rules=prep.rules(seed),
                spm={k: v for k, v in prep.spm.items() if k != "sample"},
                spm_cache=cache_dir / "spm",
                num_proc=prep.num_proc or len(os.sched_getaffinity(0)),
                block_lines=prep.block_lines,
            )
    note_in_training(_json(out / "stats.json"))
    return out


def note_in_training(stats: dict) -> None:
    """Say how many held-out pairs training holds too (a user's own held-out file may), and how many references are
    training targets (Tatoeba's many French variants of one English sentence): scores on them measure recall too."""
    for split in ("valid", "test"):
        s = stats.get(split) or {}
        pairs, refs, n = s.get("pairs_in_training"), s.get("references_in_training"), f"{s.get('kept', 0):,}"
        if pairs:
            log.warning("%s: %s of its %s pairs are also training pairs: a score on them measures what was learnt by "
                        "heart", split, f"{pairs:,}", n)  # fmt: skip
        if refs:
            log.info("%s: %s of its %s references are also training targets (%s --seen scores the rest apart)",
                     split, f"{refs:,}", n, command("translate"))  # fmt: skip


# --- work done on one block, in a worker process ----------------------------------------


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
    pairs, linenos, where = stream.read(block, skips, rules)
    lines = np.asarray(linenos, dtype=np.int64)
    out: dict[str, Any] = {"stream": index, "skips": skips, "read": {}, "dropped": {}}
    for split in SPLITS:
        pick = np.flatnonzero(where == split)
        part = pairs.select(pick.tolist())
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
        if split == "train":  # with each pair's line in its input: word links name pairs by line
            out[split] = src, ls, tgt, lt, lines[pick][keep]
        else:  # few pairs: their text, and ids per pair
            out[split] = (part.select(np.flatnonzero(keep).tolist()), _per_pair(src, ls), _per_pair(tgt, lt))
    return out


def _per_pair(flat: np.ndarray, lens: np.ndarray) -> list[list[int]]:
    return [a.tolist() for a in np.split(flat, np.cumsum(lens)[:-1])] if len(lens) else []


# --- the parent: streams blocks to the workers, merges results in order ------------------


def _jobs(streams: list[Stream], rules: Rules, block_lines: int, progress: Progress) -> Iterator[tuple]:
    """Every block of every input; the progress counts the bytes read."""
    for index, stream in enumerate(streams):
        for block in stream.blocks(block_lines):
            progress.update(block.nbytes)
            yield index, stream, block, rules


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
    with atomic.folder(out) as tmp:
        clock = [time.perf_counter()]
        sample = draw_sample(streams, rules, block_lines, num_proc)
        clock.append(time.perf_counter())
        if not len(sample):
            raise CorpusError("no training pair has both sides non-empty; give more data or other split fractions")
        log.info("training sentencepiece on a sample of %d training pairs", len(sample))
        tok = train_tokenizer(sample.src, sample.tgt, spm_cache, seed=rules.seed, **spm)
        del sample
        clock.append(time.perf_counter())
        tok.save(tmp / "tokenizer")
        stats = _encode_all(streams, tmp, tok, rules, num_proc, block_lines)
        clock.append(time.perf_counter())
        stats["seconds"] = dict(zip(("sample", "sentencepiece", "encode"), np.diff(clock).round(1).tolist()))
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1))
    log.info("prepared data in %s: %s", out, stats)
    return stats


def _encode_all(
    streams: list[Stream], out: Path, tok: Tokenizer, rules: Rules, num_proc: int, block_lines: int
) -> dict:
    """Pass 2: encode and filter every block in parallel; write the splits; their counts."""
    vocab = max(tok.src_vocab_size, tok.tgt_vocab_size)
    writer = CorpusWriter(out / "train", vocab, rules.max_len)
    held_out: dict[str, list] = {s: [] for s in ("valid", "test")}
    read, dropped = dict.fromkeys(SPLITS, 0), {}
    skips = [s.skips(rules.on_bad_line) for s in streams]
    threads = 1 if num_proc > 1 else -1  # sentencepiece's own threads only when it has the cores to itself
    with Progress(input_bytes(streams), "encoding") as progress:
        jobs = _jobs(streams, rules, block_lines, progress)
        for result in in_order(_encode, jobs, num_proc, _load_tokenizer, (tok.state_dict(), threads)):
            for mine, theirs in zip(skips[result["stream"]], result["skips"]):
                mine.merge(theirs)
            for s in SPLITS:
                read[s] += result["read"][s]
            progress.update(0, count=sum(result["read"].values()))  # the bytes were counted as they were read
            for k, n in result["dropped"].items():
                dropped[k] = dropped.get(k, 0) + n
            if "train" in result:
                writer.append(*result["train"])
            for s in held_out:
                if s in result:
                    held_out[s].append(result[s])
    writer.close()
    for stream_skips in skips:
        for s in stream_skips:
            s.report()
    for (split, rule), n in dropped.items():
        if n:
            log.info("%s: dropped %d of %d pairs with %s", split, n, read[split], rule)
    tokens = {f"{side}_tokens": n for side, n in writer.tokens.items()}
    stats = {"train": dict(read=read["train"], kept=writer.pairs, **tokens)}
    train = EncodedCorpus.load(out / "train")
    for split, parts in held_out.items():
        stats[split] = _write_held_out(out, split, parts, vocab, read[split])
        pairs, refs = in_training(train, EncodedCorpus.load(out / split))
        stats[split] |= dict(pairs_in_training=pairs, references_in_training=refs)
    for split, s in stats.items():
        if not s["read"]:
            raise CorpusError(f"the {split} split is empty; give more data or other split fractions")
        if not s["kept"]:
            raise CorpusError(f"the {split} split has no usable pairs left after filtering ({s['read']} read)")
    return stats


def _write_held_out(out: Path, split: str, parts: list, vocab: int, read: int) -> dict:
    """A held-out split's ids and text (the references); its counts."""
    texts = Pairs.concat([p for p, _, _ in parts])
    corpus = EncodedCorpus.from_lists(
        [ids for _, s, _ in parts for ids in s], [ids for _, _, t in parts for ids in t], vocab
    )
    corpus.save(out / split)
    (out / f"{split}.json").write_text(json.dumps(texts.__dict__, ensure_ascii=False))
    return dict(
        read=read, kept=len(corpus), src_tokens=int(corpus.src_lens.sum()), tgt_tokens=int(corpus.tgt_lens.sum())
    )
