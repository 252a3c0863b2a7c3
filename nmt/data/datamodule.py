"""The Lightning DataModule: corpus -> sentencepiece ids -> bucketed, padded batches."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from . import lexicon, words
from . import toy as toy_corpus
from .batching import BatchDataset, EncodedCorpus, TokenBucketSampler
from .download import TATOEBA_SHA1, TATOEBA_URL, fetch_tatoeba
from .readers import CorpusError, Pairs, read_parallel, read_tsv
from .tokenizer import Tokenizer, train_tokenizer

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
SOURCES = ("toy", "tatoeba", "tsv")
PREPARED_VERSION = 1  # bump when the prepared format changes


def hash_split(src: list[str], valid: float, test: float) -> list[str]:
    """Deterministic split by a hash of the source sentence: one sentence never lands in two splits."""
    out = []
    for s in src:
        b = int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "big") % 10000
        out.append("valid" if b < valid * 10000 else "test" if b < (valid + test) * 10000 else "train")
    return out


def _grammar_hash() -> str:
    """Changes whenever the built-in corpus's grammar or lexicon does."""
    return hashlib.sha1(b"".join(Path(m.__file__).read_bytes() for m in (toy_corpus, words, lexicon))).hexdigest()


def _fingerprint(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"{p}: no such file")
    st = p.stat()
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"


class TranslationDataModule(L.LightningDataModule):
    """Serves ``train``/``valid``/``test`` batches of one French→English corpus.

    ``source`` is ``toy`` (generated, with gold alignments), ``tatoeba`` (downloaded) or
    ``tsv`` (``path`` = a TSV file, or ``src``/``tgt`` = parallel text files; optional
    ``valid``/``test`` files, else a hash split). ``prepare_data`` does all the reading,
    sentencepiece training and encoding once and caches it under ``cache_dir``.
    """

    def __init__(
        self,
        *,
        source: str,
        cache_dir: str,
        spm: dict,
        max_len: int,
        max_ratio: float,
        ratio_min_len: int,
        max_tokens: int,
        eval_max_tokens: int,
        on_bad_line: str,
        num_workers: int,
        pin_memory: bool,
        seed: int,
        split: dict | None = None,
        toy: dict | None = None,
        tatoeba: dict | None = None,
        path: str | None = None,
        src: str | None = None,
        tgt: str | None = None,
        valid: str | None = None,
        test: str | None = None,
        valid_src: str | None = None,
        valid_tgt: str | None = None,
        test_src: str | None = None,
        test_tgt: str | None = None,
        src_col: int = 0,
        tgt_col: int = 1,
        max_sentences: int | None = None,
    ):
        """The values are ``conf/data/*.yaml``'s (``base.yaml`` and the corpus's own file)."""
        super().__init__()
        if source not in SOURCES:
            raise ValueError(f"data.source must be one of {SOURCES}, not {source!r}")
        if on_bad_line not in ("error", "skip"):
            raise ValueError(f"data.on_bad_line must be 'error' or 'skip', not {on_bad_line!r}")
        if source == "tsv" and not path and not (src and tgt):
            raise ValueError("data=tsv needs data.path=FILE.tsv, or data.src=FILE and data.tgt=FILE")
        if source == "toy" and not toy:
            raise ValueError("data=toy needs the data.toy settings (sizes, seed, max_words)")
        self.source, self.cache_dir = source, Path(cache_dir)
        self.files = dict(
            path=path,
            src=src,
            tgt=tgt,
            valid=valid,
            test=test,
            valid_src=valid_src,
            valid_tgt=valid_tgt,
            test_src=test_src,
            test_tgt=test_tgt,
        )
        self.src_col, self.tgt_col, self.on_bad_line = src_col, tgt_col, on_bad_line
        self.toy = toy
        tatoeba = tatoeba or {}
        self.tatoeba = dict(url=tatoeba.get("url") or TATOEBA_URL, sha1=tatoeba.get("sha1") or TATOEBA_SHA1)
        self.split, self.spm = split, spm
        self.max_len, self.max_ratio, self.ratio_min_len = max_len, max_ratio, ratio_min_len
        self.max_tokens, self.eval_max_tokens, self.max_sentences = max_tokens, eval_max_tokens, max_sentences
        self.num_workers, self.pin_memory, self.seed = num_workers, pin_memory, seed
        self.tokenizer: Tokenizer | None = None
        self.corpora: dict[str, EncodedCorpus] = {}
        self.texts: dict[str, Pairs] = {}  # raw valid/test text (references, gold alignments)
        self._resume: tuple[int, int] | None = None

    # --- preparation ---------------------------------------------------------------------

    def _key(self) -> str:
        """Cache key of the prepared data: source settings, file fingerprints, processing settings."""
        parts: dict[str, Any] = dict(
            version=PREPARED_VERSION,
            source=self.source,
            cols=(self.src_col, self.tgt_col),
            bad=self.on_bad_line,
            split=self.split,
            spm=self.spm,
            max_len=self.max_len,
            ratio=(self.max_ratio, self.ratio_min_len),
            seed=self.seed,
        )
        if self.source == "toy":
            parts["toy"] = self.toy
            parts["grammar"] = _grammar_hash()
        elif self.source == "tatoeba":
            parts["tatoeba"] = self.tatoeba
        else:
            parts["files"] = {k: _fingerprint(v) for k, v in self.files.items() if v}
        return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def prepared_dir(self) -> Path:
        return self.cache_dir / "prepared" / self._key()

    def _read_splits(self) -> dict[str, Pairs]:
        f, bad = self.files, self.on_bad_line
        if self.source == "toy":
            return {split: read_tsv(path, 0, 1, (2, 3)) for split, path in self._write_toy().items()}
        if self.source == "tatoeba":
            fra = fetch_tatoeba(self.cache_dir / "fra-eng", self.tatoeba["url"], self.tatoeba["sha1"])
            return self._hash_split(read_tsv(fra, 1, 0, on_bad_line=bad))  # fra.txt is english<TAB>french
        if f["path"]:
            train = read_tsv(f["path"], self.src_col, self.tgt_col, on_bad_line=bad)
        else:
            train = read_parallel(f["src"], f["tgt"], bad)
        splits = {"train": train}
        for name in ("valid", "test"):
            if f[name]:
                splits[name] = read_tsv(f[name], self.src_col, self.tgt_col, on_bad_line=bad)
            elif f[f"{name}_src"] and f[f"{name}_tgt"]:
                splits[name] = read_parallel(f[f"{name}_src"], f[f"{name}_tgt"], bad)
        if len(splits) == 3:
            return splits
        if len(splits) == 2:
            raise CorpusError("give both valid and test files, or neither (then they are split off train by hash)")
        return self._hash_split(train)

    def _hash_split(self, pairs: Pairs) -> dict[str, Pairs]:
        where = hash_split(pairs.src, self.split["valid"], self.split["test"])
        return {s: pairs.select([i for i, w in enumerate(where) if w == s]) for s in SPLITS}

    def _write_toy(self) -> dict[str, Path]:
        """Generate the built-in corpus as TSV files (French, English, sure, possible links)."""
        cfg = self.toy
        key = hashlib.sha1((json.dumps(cfg, sort_keys=True) + _grammar_hash()).encode()).hexdigest()[:12]
        directory = self.cache_dir / "toy" / key
        paths = {s: directory / f"{s}.tsv" for s in SPLITS}
        if all(p.is_file() for p in paths.values()):
            return paths
        directory.mkdir(parents=True, exist_ok=True)
        g = toy_corpus.Grammar(cfg["seed"])
        held_out: set[str] = set()
        for split in ("test", "valid", "train"):
            n = cfg[f"{split}_size"]
            pairs = []
            while len(pairs) < n:
                p = g.pair(max_words=cfg["max_words"])
                if split == "train" and p.fr in held_out:
                    continue  # no test or valid sentence is trained on
                if split != "train":
                    held_out.add(p.fr)
                pairs.append(p)
            tmp = paths[split].with_suffix(".part")
            tmp.write_text("".join(p.tsv() + "\n" for p in pairs), encoding="utf-8")
            tmp.replace(paths[split])
        log.info("generated the built-in corpus in %s", directory)
        return paths

    def _filter(self, split: str, pairs: Pairs, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[int]:
        """Indices of the pairs kept; every rule logs how many it dropped."""
        ls = np.array([len(s) for s in src_ids])
        lt = np.array([len(t) for t in tgt_ids])
        empty = np.array([not s or not t for s, t in zip(pairs.src, pairs.tgt)], dtype=bool)
        drops = {"an empty side": empty}
        if split == "train":
            longest, shortest = np.maximum(ls, lt), np.minimum(ls, lt)
            drops[f"more than {self.max_len} subwords"] = ~empty & (longest > self.max_len)
            drops[f"a length ratio above {self.max_ratio}"] = (
                ~empty
                & (longest <= self.max_len)
                & (longest >= self.ratio_min_len)
                & (longest > self.max_ratio * np.maximum(shortest, 1))
            )
        keep = np.ones(len(pairs), dtype=bool)
        for rule, mask in drops.items():
            if mask.any():
                log.info("%s: dropped %d of %d pairs with %s", split, int(mask.sum()), len(pairs), rule)
            keep &= ~mask
        if not keep.any():
            raise CorpusError(f"the {split} split has no usable pairs left after filtering ({len(pairs)} read)")
        return np.flatnonzero(keep).tolist()

    def prepare_data(self) -> None:
        """Read, train sentencepiece and encode, once; concurrent callers (DDP ranks) wait on a lock."""
        if (self.prepared_dir / "done").is_file():
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / ".prepare.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (self.prepared_dir / "done").is_file():
                self._prepare()

    def _prepare(self) -> None:
        out = self.prepared_dir
        splits = self._read_splits()
        for name in SPLITS:
            if not len(splits[name]):
                raise CorpusError(f"the {name} split is empty; give more data or other split fractions")
        train = splits["train"]
        nonempty = [i for i, (s, t) in enumerate(zip(train.src, train.tgt)) if s and t]
        tok = train_tokenizer(
            [train.src[i] for i in nonempty],
            [train.tgt[i] for i in nonempty],
            self.cache_dir / "spm",
            seed=self.seed,
            **self.spm,
        )
        out.mkdir(parents=True, exist_ok=True)
        tok.save(out / "tokenizer")
        stats = {}
        for name, pairs in splits.items():
            src_ids, tgt_ids = tok.encode_src(pairs.src), tok.encode_tgt(pairs.tgt)
            keep = self._filter(name, pairs, src_ids, tgt_ids)
            corpus = EncodedCorpus.from_lists(
                [src_ids[i] for i in keep], [tgt_ids[i] for i in keep], max(tok.src_vocab_size, tok.tgt_vocab_size)
            )
            corpus.save(out / f"{name}.npz")
            if name != "train":
                kept = pairs.select(keep)
                (out / f"{name}.json").write_text(json.dumps(kept.__dict__, ensure_ascii=False))
            stats[name] = dict(
                read=len(pairs),
                kept=len(keep),
                src_tokens=int(corpus.src_lens.sum()),
                tgt_tokens=int(corpus.tgt_lens.sum()),
            )
        (out / "stats.json").write_text(json.dumps(stats, indent=1))
        (out / "done").touch()
        log.info("prepared data in %s: %s", out, stats)

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        out = self.prepared_dir
        if not (out / "done").is_file():
            self.prepare_data()
        self.tokenizer = Tokenizer.load(out / "tokenizer")
        for name in SPLITS:
            self.corpora[name] = EncodedCorpus.load(out / f"{name}.npz")
            if name != "train":
                self.texts[name] = Pairs(**json.loads((out / f"{name}.json").read_text()))

    # --- what the model and callbacks may read -------------------------------------------

    def references(self, split: str) -> Pairs:
        """The raw text of a held-out split (with gold links for the built-in corpus), indexed like batches' ``idx``."""
        return self.texts[split]

    def sample_batch(self, split: str, n: int) -> dict[str, torch.Tensor]:
        """A padded batch of the first ``n`` pairs of a split (the same pairs every time)."""
        return BatchDataset(self.corpora[split])[list(range(min(n, len(self.corpora[split]))))]

    # --- loaders -------------------------------------------------------------------------

    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _loader(self, split: str, sampler: TokenBucketSampler) -> DataLoader:
        return DataLoader(
            BatchDataset(self.corpora[split]),
            sampler=sampler,
            batch_size=None,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0 and split == "train",
        )

    def train_dataloader(self) -> DataLoader:
        c = self.corpora["train"]
        rank, world = self._rank()
        sampler = TokenBucketSampler(
            c.src_lens, c.tgt_lens, self.max_tokens, True, self.seed, rank, world, self.max_sentences
        )
        if self._resume is not None:
            sampler.skip_batches(*self._resume)
            self._resume = None
        return self._loader("train", sampler)

    def eval_dataloader(self, split: str) -> DataLoader:
        """Length-sorted batches of a held-out split; under DDP every rank takes a share, none dropped."""
        c = self.corpora[split]
        rank, world = self._rank()
        sampler = TokenBucketSampler(
            c.src_lens, c.tgt_lens, self.eval_max_tokens, False, rank=rank, world_size=world, even=False
        )
        return self._loader(split, sampler)

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader("valid")

    def test_dataloader(self) -> DataLoader:
        return self.eval_dataloader("test")

    # --- exact resume: Lightning stores this in checkpoints -------------------------------

    def state_dict(self) -> dict[str, int]:
        trainer = self.trainer
        if trainer is None:
            return {}
        loop = trainer.fit_loop
        return {
            "epoch": loop.epoch_progress.current.processed,
            "batches": loop.epoch_loop.batch_progress.current.processed,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state:
            self._resume = (state["epoch"], state["batches"])
