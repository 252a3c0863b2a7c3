"""Where a corpus comes from: each source is a small class, chosen by ``_target_`` in ``conf/data/``.

A source knows its inputs (:meth:`CorpusSource.streams`: files, each with the split its pairs go
to) and its part of the prepared-data cache key (:meth:`CorpusSource.key`). Everything after
that, reading, sentencepiece, encoding, is the same for every source (:mod:`nmt.data.prepare`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from nmt.bounds import SEED, Range
from nmt.data import atomic
from nmt.data.download import TATOEBA_SHA1, TATOEBA_URL, fetch_tatoeba
from nmt.data.readers import Block, CorpusError, Pairs, Skips, parallel_blocks, parse_parallel, parse_tsv, tsv_blocks
from nmt.data.rules import Rules
from nmt.data.toy import grammar, lexicon, morphology, nouns

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

    def files(self) -> list[str]:
        return [self.path] if self.path else [self.src, self.tgt]

    def skips(self, on_bad_line: str) -> list[Skips]:
        return [Skips(p, on_bad_line) for p in self.files()]

    def parse(self, block: Block, skips: list[Skips]) -> tuple[Pairs, list[int]]:
        if self.path:
            return parse_tsv(block, skips[0], *self.cols, self.align_cols)
        return parse_parallel(block, *skips)

    def read(self, block: Block, skips: list[Skips], rules: Rules) -> tuple[Pairs, list[int], np.ndarray]:
        """A block's pairs (turned round where ``rules.reverse``), their line numbers and their splits."""
        pairs, linenos = self.parse(block, skips)
        where = self.split_of(pairs, rules.valid, rules.test)
        return (pairs.reversed() if rules.reverse else pairs), linenos, where

    def split_of(self, pairs: Pairs, valid: float, test: float) -> np.ndarray:
        """The split of every pair: this input's own, or by a hash of the source sentence."""
        if self.split:
            return np.full(len(pairs), self.split, dtype=object)
        return np.array(hash_split(pairs.src, valid, test), dtype=object)


def input_bytes(streams: list[Stream]) -> int:
    """The size of every input file: what a pass over the inputs reads."""
    return sum(os.path.getsize(f) for s in streams for f in s.files())


def hash_split(src: list[str], valid: float, test: float) -> list[str]:
    """Deterministic split by a hash of the source sentence: one sentence never lands in two splits."""
    sha1 = hashlib.sha1
    bucket = np.array([int.from_bytes(sha1(s.encode()).digest()[:8], "big") % 10000 for s in src], np.int64)
    where = np.where(bucket < valid * 10000, "valid", np.where(bucket < (valid + test) * 10000, "test", "train"))
    return where.tolist()


def content_hash(path: str | Path, cache_dir: Path) -> str:
    """SHA-1 of a file's bytes, remembered in ``cache_dir/hashes.json`` per fingerprint, so a big file is hashed
    once, not at every start.

    The fingerprint is the path, size, modification time, inode and status-change time (``st_ctime_ns``).
    An edit that keeps the size and sets the modification time back (``touch -r``, ``cp -p``, ``rsync -t``)
    still changes the status-change time, which no user call can set, and replacing the file changes the
    inode, so a changed file is never taken for the one that was hashed.
    """
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"{p}: no such file")
    st = p.stat()
    fingerprint = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}:{st.st_ctime_ns}"
    index = cache_dir / "hashes.json"
    known = _hash_index(index)
    if fingerprint not in known:
        h = hashlib.sha1()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        known[fingerprint] = h.hexdigest()
        atomic.write_text(index, json.dumps(known, indent=0))
    return known[fingerprint]


def _hash_index(index: Path) -> dict[str, str]:
    """The remembered hashes; a damaged index is only a lost shortcut: it is dropped and rebuilt."""
    if not index.is_file():
        return {}
    try:
        known = json.loads(index.read_text())
        if isinstance(known, dict) and all(isinstance(v, str) and len(v) == 40 for v in known.values()):
            return known
    except (OSError, ValueError):
        pass
    log.warning("%s: damaged; hashing the input files again", index)
    return {}


class CorpusSource:
    """A corpus's inputs. ``name`` is its ``data=`` config; ``cols`` the French and English TSV columns."""

    name = ""
    cols: tuple[int, int] = (0, 1)
    own_links = False  # whether the training pairs have word links of their own (:meth:`gold_links`)

    def streams(self, cache_dir: Path) -> list[Stream]:
        """The inputs, each with its split (None: split off by hash); may generate or download them first."""
        raise NotImplementedError

    def key(self, cache_dir: Path) -> dict[str, Any]:
        """What identifies this corpus in the prepared-data cache key."""
        return {"source": self.name, "cols": self.cols}

    def gold_links(self, cache_dir: Path) -> tuple[Path, int] | None:
        """Where the training pairs' own word links are (a TSV file and its column), for a corpus that has them."""
        return None

    @property
    def held_out(self) -> str | None:
        """The keys that give this corpus's validation and test pairs, or None: split off by hash
        (``data.prepare.split``)."""
        return None


def _grammar_hash() -> str:
    """Changes whenever the built-in corpus's grammar or lexicon does."""
    modules = (grammar, morphology, lexicon, nouns)
    return hashlib.sha1(b"".join(Path(m.__file__).read_bytes() for m in modules)).hexdigest()


PAIRS = Range(1, 10**7, integer=True)  # the built-in corpus is made in memory: 10 million pairs is 10x any use


class BuiltIn(CorpusSource):
    """The built-in corpus: generated French-English pairs with gold word alignments (:mod:`nmt.data.toy`)."""

    name = "toy"
    own_links = True

    def __init__(
        self,
        *,
        train_size: Annotated[int, PAIRS],
        valid_size: Annotated[int, PAIRS],
        test_size: Annotated[int, PAIRS],
        seed: Annotated[int, SEED],
        max_words: Annotated[int, Range(3, 1000, integer=True)],  # from the grammar's shortest sentence
    ):
        self.settings = dict(
            train_size=train_size, valid_size=valid_size, test_size=test_size, seed=seed, max_words=max_words
        )

    def key(self, cache_dir: Path) -> dict[str, Any]:
        return super().key(cache_dir) | {"toy": self.settings, "grammar": _grammar_hash()}

    @property
    def held_out(self) -> str:
        return "data.source.valid_size and data.source.test_size"

    def streams(self, cache_dir: Path) -> list[Stream]:
        return [Stream(path=str(p), align_cols=(2, 3), split=s) for s, p in self._write(cache_dir).items()]

    def gold_links(self, cache_dir: Path) -> tuple[Path, int]:
        return self._write(cache_dir)["train"], 2  # the sure links

    def _write(self, cache_dir: Path) -> dict[str, Path]:
        """Generate the corpus as TSV files (French, English, sure, possible links), once per settings."""
        cfg = self.settings
        key = hashlib.sha1((json.dumps(cfg, sort_keys=True) + _grammar_hash()).encode()).hexdigest()[:12]
        directory = cache_dir / "toy" / key
        paths = {s: directory / f"{s}.tsv" for s in SPLITS}
        if all(p.is_file() for p in paths.values()):
            return paths
        directory.mkdir(parents=True, exist_ok=True)
        g = grammar.Grammar(cfg["seed"])
        held_out: set[str] = set()
        for split in ("test", "valid", "train"):
            pairs = []
            while len(pairs) < cfg[f"{split}_size"]:
                p = g.pair(max_words=cfg["max_words"])
                if split == "train" and p.fr in held_out:
                    continue  # no test or valid sentence is trained on
                if split != "train":
                    held_out.add(p.fr)
                pairs.append(p)
            atomic.write_text(paths[split], "".join(p.tsv() + "\n" for p in pairs))
        log.info("generated the built-in corpus in %s", directory)
        return paths


class Tatoeba(CorpusSource):
    """Tatoeba / manythings.org fra-eng, downloaded once (``url``/``sha1`` None: the corpus's own); or, with
    ``splits``, a folder holding the corpus already split (``train.tsv``, ``valid.tsv``, ``test.tsv``: French, then
    English), read as they are and never downloaded."""

    name = "tatoeba"
    SPLIT_FILES = ("train.tsv", "valid.tsv", "test.tsv")

    def __init__(self, *, url: str | None = None, sha1: str | None = None, splits: str | None = None):
        self.url, self.sha1 = url or TATOEBA_URL, sha1 or TATOEBA_SHA1
        self.splits = None if splits is None else Path(splits)
        if self.splits is not None and (missing := [f for f in self.SPLIT_FILES if not (self.splits / f).is_file()]):
            raise CorpusError(
                f"paths.tatoeba_splits={splits}: no {', '.join(missing)} there; give a folder with train.tsv, "
                "valid.tsv and test.tsv (French<TAB>English), or paths.tatoeba_splits=null to download the corpus"
            )
        for name, value in (("url", url), ("sha1", sha1)):
            if self.splits is not None and value is not None:
                raise CorpusError(
                    f"data.source.{name}={value}: not read, since paths.tatoeba_splits={splits} gives the corpus "
                    f"(nothing is downloaded); leave data.source.{name} out, or set paths.tatoeba_splits=null"
                )

    @property
    def held_out(self) -> str | None:
        return None if self.splits is None else "paths.tatoeba_splits"

    def _files(self) -> Files | None:
        """The split files as :class:`Files` reads them, where ``splits`` names a folder."""
        if self.splits is None:
            return None
        train, valid, test = (str(self.splits / f) for f in self.SPLIT_FILES)
        return Files(path=train, valid=valid, test=test)

    def key(self, cache_dir: Path) -> dict[str, Any]:
        if (files := self._files()) is not None:
            return files.key(cache_dir)
        return super().key(cache_dir) | {"tatoeba": {"url": self.url, "sha1": self.sha1}}

    def streams(self, cache_dir: Path) -> list[Stream]:
        if (files := self._files()) is not None:
            return files.streams(cache_dir)
        fra = fetch_tatoeba(cache_dir / "fra-eng", self.url, self.sha1)
        return [Stream(path=str(fra), cols=(1, 0))]  # fra.txt is english<TAB>french


def _check_columns(key: str, file: str, src_col: int, tgt_col: int, sample: int = 100) -> None:
    """A CorpusError where none of a TSV file's first ``sample`` lines has the columns ``src_col`` and ``tgt_col``
    (one column, or a column key past the file's): known from those lines, before anything is prepared. A few bad
    lines among good ones are preparation's (``data.prepare.on_bad_line``)."""
    with open(file, encoding="utf-8", errors="replace") as f:
        widths = [line.count("\t") + 1 for line in itertools.islice(f, sample) if line.strip()]
    need = max(src_col, tgt_col) + 1
    if not widths or max(widths) >= need:
        return
    if max(widths) == 1:
        raise CorpusError(
            f"data.source.{key}={file}: one column on each of its first {len(widths)} line(s): a TSV file holds French "
            "and English in tab-separated columns (plain files, a sentence a line: data.source.src=FILE "
            "data.source.tgt=FILE)"
        )
    raise CorpusError(
        f"data.source.{key}={file}: {max(widths)} tab-separated columns (0 to {max(widths) - 1}) on its first lines, "
        f"and data.source.src_col={src_col} data.source.tgt_col={tgt_col} read column {need - 1}: give columns it has"
    )


def _refuse_unread(files: dict[str, str | None], src_col: int, tgt_col: int) -> None:
    """A CorpusError naming the first key of ``data=tsv`` that the files given leave unread: each split is one TSV
    file or two plain ones, and the column keys are read from TSV files only."""
    given = {**files, "src_col": src_col, "tgt_col": tgt_col}
    key = lambda name: f"data.source.{name}={given[name]}"  # noqa: E731
    for tsv, (fr, en) in (("path", ("src", "tgt")), ("valid", ("valid_src", "valid_tgt")),
                          ("test", ("test_src", "test_tgt"))):  # fmt: skip
        for plain in (fr, en):
            if files[tsv] and files[plain]:
                raise CorpusError(
                    f"{key(plain)}: not read, since data.source.{tsv} (a TSV file) holds both sides of those pairs; "
                    f"give data.source.{tsv}, or data.source.{fr} and data.source.{en} without it"
                )
        for one, other in ((fr, en), (en, fr)):
            if files[one] and not files[other] and not files[tsv]:
                raise CorpusError(f"{key(one)}: needs data.source.{other}, the file parallel to it, line by line")
    held = {s: files[s] or files[f"{s}_src"] for s in ("valid", "test")}
    if bool(held["valid"]) != bool(held["test"]):  # one held-out split given, the other would come from a hash
        one, other = ("valid", "test") if held["valid"] else ("test", "valid")
        name = one if files[one] else f"{one}_src"
        raise CorpusError(
            f"{key(name)}: needs data.source.{other} (or {other}_src and {other}_tgt) too; give both held-out "
            f"splits, or neither (then both are split off the training pairs by a hash, data.prepare.split)"
        )
    if not any(files[tsv] for tsv in ("path", "valid", "test")):
        for name, default in (("src_col", 0), ("tgt_col", 1)):
            if given[name] != default:
                raise CorpusError(
                    f"{key(name)}: a column of a TSV file, and no TSV file is read here (data.source.src and tgt are "
                    f"plain files, a sentence a line); leave data.source.{name} out"
                )
    if src_col == tgt_col:
        raise CorpusError(f"data.source.src_col = data.source.tgt_col = {src_col}: French and English in one column")


class Files(CorpusSource):
    """Your own corpus: ``path`` (a TSV file, columns ``src_col``/``tgt_col``) or parallel ``src``/``tgt`` files;
    optional held-out ``valid``/``test`` TSV files (or ``valid_src``/``valid_tgt``/``test_src``/``test_tgt``),
    else valid and test are split off the training data by a hash of the French."""

    name = "tsv"

    def __init__(
        self,
        *,
        path: str | None = None,
        src: str | None = None,
        tgt: str | None = None,
        valid: str | None = None,
        test: str | None = None,
        valid_src: str | None = None,
        valid_tgt: str | None = None,
        test_src: str | None = None,
        test_tgt: str | None = None,
        src_col: Annotated[int, Range(0, 1023, integer=True)] = 0,  # a TSV line's column: no corpus has a thousand
        tgt_col: Annotated[int, Range(0, 1023, integer=True)] = 1,
    ):
        if not path and not (src and tgt):
            raise ValueError(
                "data=tsv needs data.source.path=FILE.tsv, or data.source.src=FILE and data.source.tgt=FILE"
            )
        given = dict(path=path, src=src, tgt=tgt, valid=valid, test=test, valid_src=valid_src, valid_tgt=valid_tgt,
                     test_src=test_src, test_tgt=test_tgt)  # fmt: skip
        _refuse_unread(given, src_col, tgt_col)
        for key, file in given.items():  # before anything is prepared: the run is refused in one line
            if file and not Path(file).is_file():
                what = "a folder, not a file" if Path(file).is_dir() else "no such file"
                raise CorpusError(f"data.source.{key}={file}: {what}")
            if file and not os.path.getsize(file):
                raise CorpusError(f"data.source.{key}={file}: file is empty")
            if file and key in ("path", "valid", "test"):
                _check_columns(key, file, src_col, tgt_col)
        self.files = dict(
            path=path, src=src, tgt=tgt, valid=valid, test=test, valid_src=valid_src, valid_tgt=valid_tgt,
            test_src=test_src, test_tgt=test_tgt,
        )  # fmt: skip
        self.cols = (src_col, tgt_col)

    @property
    def held_out(self) -> str | None:
        f = self.files
        if not (f["valid"] or f["valid_src"]):
            return None
        return " and ".join(f"data.source.{s}" if f[s] else f"data.source.{s}_src/{s}_tgt" for s in ("valid", "test"))

    def key(self, cache_dir: Path) -> dict[str, Any]:
        # the files' contents (hashed once per size and modification time) and their roles
        return super().key(cache_dir) | {"files": {k: content_hash(v, cache_dir) for k, v in self.files.items() if v}}

    def streams(self, cache_dir: Path) -> list[Stream]:
        f, cols = self.files, self.cols
        held_out = {}
        for name in ("valid", "test"):
            if f[name]:
                held_out[name] = Stream(path=f[name], cols=cols, split=name)
            elif f[f"{name}_src"] and f[f"{name}_tgt"]:
                held_out[name] = Stream(src=f[f"{name}_src"], tgt=f[f"{name}_tgt"], split=name)
        split = "train" if held_out else None
        train = (
            Stream(path=f["path"], cols=cols, split=split)
            if f["path"]
            else Stream(src=f["src"], tgt=f["tgt"], split=split)
        )
        return [train, *held_out.values()]
