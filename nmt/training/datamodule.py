"""The Lightning DataModule: batches of a prepared corpus (:mod:`nmt.data.prepare`) for training and evaluation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from nmt import checkpoint
from nmt.alignment.eflomal import EflomalSettings
from nmt.bounds import TOKENS, Choice, Range
from nmt.commands import command
from nmt.data.batching import BatchPlan, TokenBucketSampler
from nmt.data.collate import Batch, BatchDataset
from nmt.data.encoded import EncodedCorpus
from nmt.data.joining import Joining
from nmt.data.prepare import Preparation, PreparedCorpus, ensure_prepared, prepared_dir
from nmt.data.readers import Pairs
from nmt.data.shapes import ShapeSet
from nmt.data.sources import CorpusSource
from nmt.data.tokenizer import SubwordSampler, Tokenizer
from nmt.data.training_links import EFLOMAL, TrainingLinks, count_lines, eflomal_links

# data.align: links from the statistical aligner, computed at preparation, or a file of them
ALIGN = Choice((EFLOMAL,), null=True, file="a Pharaoh file of the training pairs' links")

class TranslationDataModule(L.LightningDataModule):
    """Serves ``train``/``valid``/``test`` batches of one French→English corpus.

    ``source`` is a :class:`~nmt.data.sources.CorpusSource` (``data.source`` in ``conf/data/``, chosen by
    ``_target_``), ``prepare`` the :class:`~nmt.data.prepare.Preparation` settings; the prepared corpus is
    cached under ``cache_dir``. Training batches hold up to ``max_tokens`` padded tokens (``max_sentences``
    pairs), evaluation batches ``eval_max_tokens``; ``sampling`` turns on subword regularisation, ``join`` rows of
    several training pairs (:class:`~nmt.data.joining.Joining`). With ``links``
    (guided alignment) training batches carry the word links of their pairs: from ``align``, a Pharaoh file parallel
    to the training corpus or ``eflomal`` (the statistical aligner, settings ``aligner``: its links of the validation
    pairs then stand in for gold links where the corpus has none, so training records the attention choice that
    agrees with them best), else the corpus's own gold links (the built-in corpus). With ``shapes`` (N > 0) training
    batches are padded to one of at most N shapes (:class:`~nmt.data.shapes.ShapeSet`), for a GPU step replayed as a
    captured graph.
    """

    def __init__(
        self,
        *,
        source: CorpusSource,
        prepare: dict,
        cache_dir: str,
        max_tokens: Annotated[int, TOKENS],
        eval_max_tokens: Annotated[int, TOKENS],
        seed: int,
        num_workers: Annotated[int, Range(0, 1024, integer=True)] = 0,  # more than any machine's cores
        pin_memory: bool = False,
        sampling: dict | None = None,
        max_sentences: int | None = None,
        align: Annotated[str, ALIGN] | None = None,
        aligner: dict | None = None,
        links: bool = False,
        pad_multiple: Annotated[int, Range(1, 64, integer=True)] = 1,
        join: dict | None = None,
        shapes: Annotated[int, Range(0, 256, integer=True)] = 0,  # each a captured graph on a GPU: a few dozen at most
    ):
        super().__init__()
        self.source, self.preparation, self.cache_dir = source, Preparation(**prepare), Path(cache_dir)
        self.max_tokens, self.eval_max_tokens, self.max_sentences = max_tokens, eval_max_tokens, max_sentences
        self.num_workers, self.pin_memory, self.seed = num_workers, pin_memory, seed
        self.sampling = sampling if sampling and sampling.get("alpha") else None  # subword regularisation, or off
        self.align, self.links, self.aligner = align, links, EflomalSettings(**(aligner or {}))
        self.joining = Joining(**(join or {}), seed=seed)
        self.pad_multiple = pad_multiple  # batch lengths rounded up to a multiple: few shapes (GPU plans, compiled)
        self.shapes = shapes  # training batches padded to one of at most this many shapes (0: off)
        if shapes and (self.sampling or self.joining.max_pairs > 1):  # rows longer than the pairs the plan measured
            raise ValueError(
                f"data.shapes={shapes}: needs rows as long as their pairs, so not with "
                + ("subword sampling (data.sampling.alpha)" if self.sampling else "data.join.max_pairs > 1")
                + ": turn one off"
            )
        if links and align is None and not source.own_links:  # known now: before any preparation
            raise ValueError(
                "loss.align_weight > 0 needs word links: set data.align=eflomal (computed at preparation), or "
                f"data.align=FILE (Pharaoh i-j per line, parallel to the training corpus, e.g. from "
                f"{command('align')} --ckpt MODEL --input TRAIN.fr --align-to TRAIN.en > FILE), or use the "
                "built-in corpus"
            )
        self.corpus: PreparedCorpus | None = None
        self.training_links: TrainingLinks | None = None
        self._directory: Path | None = None  # the prepared corpus's, once prepare_data found it
        self._resume: tuple[int, int] | None = None
        self._train_sampler: TokenBucketSampler | None = None  # the training loader's: its epoch is saved
        self._shape_set: ShapeSet | None = None  # data.shapes': chosen once, from the training split's lengths

    @property
    def prepared_dir(self) -> Path:
        """Where the prepared corpus is: the one prepared or set up, else the one the inputs as they are now give."""
        if self.corpus is not None:
            return self.corpus.directory
        return self._directory or prepared_dir(self.source, self.preparation, self.cache_dir, self.seed)

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self.corpus.tokenizer if self.corpus else None

    def prepare_data(self) -> None:
        """Prepare the corpus once (concurrent callers wait on a lock) and plan its training batches."""
        self._directory = ensure_prepared(self.source, self.preparation, self.cache_dir, self.seed)
        if self.align == EFLOMAL:
            tok = Tokenizer.load(self._directory / "tokenizer")
            eflomal_links(self._directory, tok, self.aligner, self.cache_dir / ".prepare.lock", self._languages)
        self._train_plan(EncodedCorpus.load(self._directory / "train"))

    def setup(self, stage: str | None = None) -> None:
        if self.corpus is None:
            directory = self._directory or ensure_prepared(self.source, self.preparation, self.cache_dir, self.seed)
            self.corpus = PreparedCorpus.load(directory)
            self._check_lengths()
            if self.align == EFLOMAL:
                self._stand_in_links()
        if self.links and self.training_links is None:
            self.training_links = self._read_links()

    def _check_lengths(self) -> None:
        """A ValueError naming the split, the pair and the key, for a pair longer than its split's batch budget (the
        held-out splits are not bounded by data.prepare.max_len: one pasted paragraph is enough)."""
        for split, c in self.corpus.splits.items():
            if not len(c.src_lens):
                continue
            widths = np.maximum(np.asarray(c.src_lens, np.int64), np.asarray(c.tgt_lens, np.int64) + 1)
            i = int(np.argmax(widths))
            train = split == "train"
            key, budget = ("max_tokens", self.max_tokens) if train else ("eval_max_tokens", self.eval_max_tokens)
            if widths[i] > budget:
                where = f"line {int(c.lines[i])} of its input" if c.lines is not None else f"pair {i + 1}"
                cure = "or lower data.prepare.max_len" if train else f"or shorten that pair of the {split} split"
                raise ValueError(
                    f"the {split} split's {where} is {int(widths[i])} pieces long (with its end token): more than "
                    f"data.{key}={budget}: raise data.{key} to at least {int(widths[i])}, {cure}"
                )

    def _read_links(self) -> TrainingLinks:
        """The training pairs' word links, from ``align`` or the corpus's own."""
        corpus, tok = self.corpus.splits["train"], self.corpus.tokenizer
        if self.align == EFLOMAL:
            return TrainingLinks.read(self._eflomal_dir / "train.links", corpus, tok, by_pair=True)
        if self.align is None:  # a corpus with links of its own (checked when built)
            own = self.source.gold_links(self.cache_dir)
            return TrainingLinks.read(own[0], corpus, tok, column=own[1], transpose=self.preparation.reverse)
        training = [s for s in self.source.streams(self.cache_dir) if s.split in (None, "train")]
        if len(training) != 1:
            raise ValueError(f"data.align: the training pairs come from {len(training)} inputs; link files follow one")
        lines = count_lines(training[0].files()[0])
        return TrainingLinks.read(self.align, corpus, tok, lines=lines, transpose=self.preparation.reverse)

    @property
    def _eflomal_dir(self) -> Path:
        lock = self.cache_dir / ".prepare.lock"
        return eflomal_links(self.corpus.directory, self.corpus.tokenizer, self.aligner, lock, self._languages)

    @property
    def _languages(self) -> tuple[str, str]:
        return checkpoint.languages(self.preparation.reverse)

    def _stand_in_links(self) -> None:
        """Without gold links, eflomal's links of the validation pairs are what validation's AER is measured against."""
        valid = self.corpus.references["valid"]
        if valid.sure is None:
            valid.sure = (self._eflomal_dir / "valid.links").read_text(encoding="utf-8").split("\n")[: len(valid)]
            valid.possible = [""] * len(valid)

    # --- what the model and callbacks may read -------------------------------------------

    def references(self, split: str) -> Pairs:
        """The raw text of a held-out split (with gold links for the built-in corpus), indexed like batches' ``idx``."""
        return self.corpus.references[split]

    def sample_batch(self, split: str, n: int) -> Batch:
        """A padded batch of the first ``n`` pairs of a split (the same pairs every time)."""
        corpus = self.corpus.splits[split]
        return BatchDataset(corpus)[list(range(min(n, len(corpus))))]

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """A :class:`Batch` copied without waiting (from pinned memory the copy overlaps the GPU's work); its host
        lengths stay on the host."""
        if isinstance(batch, Batch):
            return batch.to(device, non_blocking=True)
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    # --- loaders -------------------------------------------------------------------------

    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _train_plan(self, corpus: EncodedCorpus) -> tuple[BatchPlan, ShapeSet | None]:
        """The training split's batch plan, and with ``shapes`` the shape set that cuts it (computed from the lengths:
        a pass over them, no file)."""
        limit = self.max_sentences or math.inf
        if self.shapes and self._shape_set is None:
            lens = corpus.src_lens, corpus.tgt_lens
            self._shape_set = ShapeSet.choose(*lens, self.max_tokens, self.shapes, self.pad_multiple, limit)
        return BatchPlan.cached(corpus, self.max_tokens, limit, self._shape_set), self._shape_set

    def _loader(self, split: str, sampler: TokenBucketSampler, shapes: ShapeSet | None = None) -> DataLoader:
        subwords = None
        if split == "train" and self.sampling:
            subwords = SubwordSampler(self.tokenizer, self.sampling["alpha"], self.sampling["nbest_size"], self.seed)
        train = split == "train"
        links, joining = (self.training_links, self.joining) if train else (None, None)
        return DataLoader(
            BatchDataset(self.corpus.splits[split], subwords, links, self.pad_multiple, joining, shapes),
            sampler=sampler,
            batch_size=None,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory and self._on_gpu(),  # a CPU run has no copy to speed up (torch warns)
            persistent_workers=self.num_workers > 0 and train,
        )

    def _on_gpu(self) -> bool:
        trainer = getattr(self, "trainer", None)
        return trainer is not None and trainer.strategy.root_device.type == "cuda"

    def train_dataloader(self) -> DataLoader:
        c = self.corpus.splits["train"]
        rank, world = self._rank()
        plan, shapes = self._train_plan(c)
        sampler = TokenBucketSampler(
            c.src_lens, c.tgt_lens, self.max_tokens, True, self.seed, rank, world, self.max_sentences, plan=plan
        )
        if self._resume is not None:
            sampler.skip_batches(*self._resume)
            self._resume = None
        self._train_sampler = sampler
        return self._loader("train", sampler, shapes)

    def batches_per_epoch(self, world_size: int = 1) -> int:
        """The training batches an epoch gives each of ``world_size`` processes (after :meth:`setup`)."""
        c = self.corpus.splits["train"]
        plan, _ = self._train_plan(c)
        return len(TokenBucketSampler(c.src_lens, c.tgt_lens, self.max_tokens, True, self.seed, 0, world_size,
                                      self.max_sentences, plan=plan))  # fmt: skip

    def eval_dataloader(self, split: str) -> DataLoader:
        """Length-sorted batches of a held-out split; under DDP every rank takes a share, none dropped."""
        c = self.corpus.splits[split]
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
        loop, sampler = trainer.fit_loop, self._train_sampler
        return {  # the epoch whose batches were being read (the sampler's: Lightning may count it as done)
            "epoch": sampler.epoch if sampler is not None else loop.epoch_progress.current.processed,
            "batches": loop.epoch_loop.batch_progress.current.processed,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state:
            self._resume = (state["epoch"], state["batches"])
