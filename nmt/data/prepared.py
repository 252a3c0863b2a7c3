"""A prepared corpus: sentencepiece models, the encoded splits and the held-out text, cached by content.

:func:`prepare_corpus` is the whole preparation behind one call, without Lightning: the cache key
(source, files' contents, settings), a lock (DDP ranks and concurrent runs prepare once), the
streaming passes of :mod:`nmt.data.prepare`, and :class:`PreparedCorpus` to read the result.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.data.atomic import remove_leftovers
from nmt.data.encoded import EncodedCorpus, damaged
from nmt.data.prepare import prepare
from nmt.data.readers import Pairs
from nmt.data.rules import Rules
from nmt.data.sources import SPLITS, CorpusSource
from nmt.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

VERSION = 4  # bump when the prepared format changes (3: meta.json holds the largest id of each side; 4: the
# training pairs' input line numbers)


@dataclass(frozen=True)
class Preparation:
    """How a corpus is prepared: ``data.prepare`` in ``conf/data/base.yaml``."""

    spm: dict  # sentencepiece settings, and ``sample``: training pairs drawn to train it on
    max_len: int
    max_ratio: float
    ratio_min_len: int
    on_bad_line: str = "error"
    split: dict | None = None  # valid/test shares split off by hash, where no held-out files are given
    num_proc: int | None = None  # None: every core this process may use
    block_lines: int = 100_000
    reverse: bool = False  # English to French: each pair turned round after the split (the same pairs held out)

    def __post_init__(self) -> None:
        if self.on_bad_line not in ("error", "skip"):
            raise ValueError(f"data.prepare.on_bad_line must be 'error' or 'skip', not {self.on_bad_line!r}")

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
            remove_leftovers(out.parent, out.name)  # an interrupted preparation: redone, never trusted
            prepare(
                source.streams(cache_dir),
                out,
                rules=prep.rules(seed),
                spm={k: v for k, v in prep.spm.items() if k != "sample"},
                spm_cache=cache_dir / "spm",
                num_proc=prep.num_proc or len(os.sched_getaffinity(0)),
                block_lines=prep.block_lines,
            )
    return out
