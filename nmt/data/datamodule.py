"""The Lightning DataModule: corpus -> sentencepiece ids -> bucketed, padded batches."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from . import lexicon, words
from . import toy as toy_corpus
from .batching import BatchDataset, BatchPlan, EncodedCorpus, TokenBucketSampler
from .download import TATOEBA_SHA1, TATOEBA_URL, fetch_tatoeba
from .prepare import SPLITS, Rules, Stream, content_hash, prepare
from .readers import CorpusError, Pairs
from .tokenizer import SubwordSampler, Tokenizer

log = logging.getLogger(__name__)

SOURCES = ("toy", "tatoeba", "tsv")
PREPARED_VERSION = 2  # bump when the prepared format changes


def _grammar_hash() -> str:
    """Changes whenever the built-in corpus's grammar or lexicon does."""
    return hashlib.sha1(b"".join(Path(m.__file__).read_bytes() for m in (toy_corpus, words, lexicon))).hexdigest()


class TranslationDataModule(L.LightningDataModule):
    """Serves ``train``/``valid``/``test`` batches of one French→English corpus.

    ``source`` is ``toy`` (generated, with gold alignments), ``tatoeba`` (downloaded) or
    ``tsv`` (``path`` = a TSV file, or ``src``/``tgt`` = parallel text files; optional
    ``valid``/``test`` files, else a hash split). ``prepare_data`` streams the corpus through
    reading, sentencepiece training and encoding once, in ``num_proc`` processes
    (:mod:`nmt.data.prepare`), and caches it under ``cache_dir``; training maps the arrays.
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
        num_proc: int | None,
        block_lines: int,
        sampling: dict | None = None,
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
        self.split, self.spm = split, {k: v for k, v in spm.items() if k != "sample"}
        self.spm_sample = spm["sample"]
        self.num_proc = num_proc or len(os.sched_getaffinity(0))
        self.block_lines = block_lines
        self._prepared: Path | None = None
        self.max_len, self.max_ratio, self.ratio_min_len = max_len, max_ratio, ratio_min_len
        self.max_tokens, self.eval_max_tokens, self.max_sentences = max_tokens, eval_max_tokens, max_sentences
        self.num_workers, self.pin_memory, self.seed = num_workers, pin_memory, seed
        self.sampling = sampling if sampling and sampling.get("alpha") else None  # subword regularisation, or off
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
            spm_sample=self.spm_sample,
            max_len=self.max_len,
            ratio=(self.max_ratio, self.ratio_min_len),
            seed=self.seed,
        )
        if self.source == "toy":
            parts["toy"] = self.toy
            parts["grammar"] = _grammar_hash()
        elif self.source == "tatoeba":
            parts["tatoeba"] = self.tatoeba
        else:  # the files' contents (hashed once per size and modification time) and their roles
            parts["files"] = {k: content_hash(v, self.cache_dir) for k, v in self.files.items() if v}
        return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def prepared_dir(self) -> Path:
        if self._prepared is None:
            self._prepared = self.cache_dir / "prepared" / self._key()
        return self._prepared

    def _streams(self) -> list[Stream]:
        """The inputs of the corpus, each with its split (None: split off by hash)."""
        f = self.files
        if self.source == "toy":
            return [Stream(path=str(p), align_cols=(2, 3), split=s) for s, p in self._write_toy().items()]
        if self.source == "tatoeba":
            fra = fetch_tatoeba(self.cache_dir / "fra-eng", self.tatoeba["url"], self.tatoeba["sha1"])
            return [Stream(path=str(fra), cols=(1, 0))]  # fra.txt is english<TAB>french
        cols = (self.src_col, self.tgt_col)
        held_out = {}
        for name in ("valid", "test"):
            if f[name]:
                held_out[name] = Stream(path=f[name], cols=cols, split=name)
            elif f[f"{name}_src"] and f[f"{name}_tgt"]:
                held_out[name] = Stream(src=f[f"{name}_src"], tgt=f[f"{name}_tgt"], split=name)
        if len(held_out) == 1:
            raise CorpusError("give both valid and test files, or neither (then they are split off train by hash)")
        split = "train" if held_out else None
        if f["path"]:
            train = Stream(path=f["path"], cols=cols, split=split)
        else:
            train = Stream(src=f["src"], tgt=f["tgt"], split=split)
        return [train, *held_out.values()]

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

    def prepare_data(self) -> None:
        """Prepare the corpus once; concurrent callers (DDP ranks) wait on a lock, killed runs' leftovers go."""
        if not self.prepared_dir.is_dir():
            self._prepare()
        train = EncodedCorpus.load(self.prepared_dir / "train")
        BatchPlan.cached(train, self.max_tokens, self.max_sentences or math.inf)  # planned here once, then read

    def _prepare(self) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / ".prepare.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for stale in self.prepared_dir.parent.glob(f"{self.prepared_dir.name}.*.part"):
                shutil.rmtree(stale, ignore_errors=True)  # an interrupted preparation: redone, never trusted
            rules = Rules(
                on_bad_line=self.on_bad_line,
                valid=self.split["valid"] if self.split else 0.0,
                test=self.split["test"] if self.split else 0.0,
                max_len=self.max_len,
                max_ratio=self.max_ratio,
                ratio_min_len=self.ratio_min_len,
                sample=self.spm_sample,
                seed=self.seed,
            )
            prepare(
                self._streams(),
                self.prepared_dir,
                rules=rules,
                spm=self.spm,
                spm_cache=self.cache_dir / "spm",
                num_proc=self.num_proc,
                block_lines=self.block_lines,
            )

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        out = self.prepared_dir
        if not out.is_dir():
            self.prepare_data()
        self.tokenizer = Tokenizer.load(out / "tokenizer")
        for name in SPLITS:
            self.corpora[name] = EncodedCorpus.load(out / name)
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
        subwords = None
        if split == "train" and self.sampling:
            subwords = SubwordSampler(self.tokenizer, self.sampling["alpha"], self.sampling["nbest_size"], self.seed)
        return DataLoader(
            BatchDataset(self.corpora[split], subwords),
            sampler=sampler,
            batch_size=None,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0 and split == "train",
        )

    def train_dataloader(self) -> DataLoader:
        c = self.corpora["train"]
        rank, world = self._rank()
        plan = BatchPlan.cached(c, self.max_tokens, self.max_sentences or math.inf)
        sampler = TokenBucketSampler(
            c.src_lens, c.tgt_lens, self.max_tokens, True, self.seed, rank, world, self.max_sentences, plan=plan
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
