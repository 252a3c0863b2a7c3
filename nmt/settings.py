"""The numeric values a user can set in ``conf/`` and their allowed ranges, checked before anything is built.

A bad value fails with one line naming the key, the value and the range, instead of a traceback
from deep inside torch, sentencepiece or Lightning. Every numeric key of ``conf/`` has a range here
(a test walks the configs to keep it so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """An interval, closed unless ``lo_open``/``hi_open``; ``integer`` asks for whole numbers; ``null`` allows None."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    null: bool = False

    def __str__(self) -> str:
        kind = "an integer" if self.integer else "a number"
        if self.lo == -math.inf and self.hi == math.inf:
            text = kind
        elif self.hi == math.inf:
            text = f"{kind} {'>' if self.lo_open else '>='} {self.lo:g}"
        else:
            text = f"{kind} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        return text + (" (or null)" if self.null else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.null
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return False
        if self.integer and value != int(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name=value: must be <range>")`` if ``value`` is outside."""
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if not self.ok(v):
                raise ValueError(f"{name}={value!r}: must be {self}")


POSITIVE = Range(1, integer=True)
COUNT = Range(0, integer=True)
FRACTION = Range(0, 1, hi_open=True)  # dropout, label smoothing, held-out shares

RANGES: dict[str, Range] = {
    "seed": COUNT,
    # model
    "model.emb_size": POSITIVE,
    "model.readout_size": POSITIVE,
    "model.dropout": FRACTION,
    "model.encoder.hidden_size": POSITIVE,
    "model.encoder.num_layers": POSITIVE,
    "model.decoder.hidden_size": POSITIVE,
    "model.decoder.num_layers": POSITIVE,
    "model.decoder.attn_hidden": POSITIVE,
    "model.decoder.heads": POSITIVE,
    "model.encoder.heads": POSITIVE,
    "model.encoder.ff_size": POSITIVE,
    "model.decoder.ff_size": POSITIVE,
    "model.encoder.attention_dropout": FRACTION,
    "model.decoder.attention_dropout": FRACTION,
    "model.encoder.max_positions": POSITIVE,
    "model.decoder.max_positions": POSITIVE,
    # optimisation
    "optim.lr": Range(0, lo_open=True),
    "optim.betas": FRACTION,
    "optim.weight_decay": Range(0),
    "schedule.scheduler.warmup_steps": COUNT,
    "schedule.scheduler.factor": Range(0, 1, lo_open=True, hi_open=True),
    "schedule.scheduler.patience": COUNT,
    "loss.label_smoothing": FRACTION,
    "loss.align_weight": Range(0),
    "loss.align_layer": Range(integer=True),
    "loss.align_head": Range(0, integer=True, null=True),
    # search (validation and test)
    "decoding.beam_size": POSITIVE,
    "decoding.alpha": Range(0),
    "decoding.max_len_a": Range(0),
    "decoding.max_len_b": COUNT,
    "decoding.nbest": POSITIVE,
    # data
    "data.prepare.spm.vocab_size": Range(8, integer=True),
    "data.aligner.model": Range(1, 3, integer=True),
    "data.aligner.block_pairs": POSITIVE,
    "data.aligner.draws": POSITIVE,
    "data.prepare.spm.character_coverage": Range(0, 1, lo_open=True),
    "data.prepare.spm.sample": POSITIVE,
    "data.prepare.split.valid": FRACTION,
    "data.prepare.split.test": FRACTION,
    "data.prepare.num_proc": Range(1, integer=True, null=True),
    "data.prepare.block_lines": POSITIVE,
    "data.prepare.max_len": POSITIVE,
    "data.prepare.max_ratio": Range(1),
    "data.prepare.ratio_min_len": COUNT,
    "data.sampling.alpha": Range(0, 1),
    "data.sampling.nbest_size": Range(-1, integer=True),
    "data.join.max_pairs": POSITIVE,
    "data.join.share": Range(0, 1),
    "data.max_tokens": POSITIVE,
    "data.eval_max_tokens": POSITIVE,
    "data.num_workers": COUNT,
    "data.source.src_col": COUNT,
    "data.source.tgt_col": COUNT,
    "data.source.train_size": POSITIVE,
    "data.source.valid_size": POSITIVE,
    "data.source.test_size": POSITIVE,
    "data.source.seed": COUNT,
    "data.source.max_words": Range(3, integer=True),  # the grammar's shortest sentence
    # Lightning
    "trainer.devices": POSITIVE,
    "trainer.num_nodes": POSITIVE,
    "compile.pad_multiple": POSITIVE,
    "trainer.strategy.timeout.seconds": Range(0, lo_open=True),  # trainer=ddp: how long a rank waits for the others
    "trainer.max_epochs": Range(-1, integer=True, null=True),  # -1: no limit
    "trainer.max_steps": Range(-1, integer=True),
    "trainer.val_check_interval": Range(0, lo_open=True),  # a fraction of an epoch, or a number of steps
    "trainer.check_val_every_n_epoch": Range(1, integer=True, null=True),
    "trainer.gradient_clip_val": Range(0, lo_open=True, null=True),
    "trainer.log_every_n_steps": POSITIVE,
    "trainer.num_sanity_val_steps": Range(-1, integer=True),
    "callbacks.checkpoint.save_top_k": Range(-1, integer=True),
    "callbacks.early_stopping.patience": COUNT,
    "callbacks.heatmaps.num_sentences": COUNT,
    "callbacks.throughput.window_size": Range(2, integer=True),
    "callbacks.snapshots.every_n_train_steps": POSITIVE,
    "callbacks.snapshots.save_top_k": Range(-1, integer=True),
    "callbacks.ema.decay": Range(0, 1, lo_open=True, hi_open=True),
    "callbacks.ema.update_starting_at_step": Range(0, integer=True, null=True),
    "average_best": COUNT,
    "onednn_cache": Range(0, integer=True, null=True),
}


def check_config(cfg: Any) -> None:
    """Check every value of ``RANGES`` present in a composed config (an OmegaConf ``DictConfig``)."""
    from omegaconf import OmegaConf

    missing = object()
    for key, allowed in RANGES.items():
        value = OmegaConf.select(cfg, key, default=missing)
        if value is missing:
            continue
        if key == "trainer.devices" and (value == "auto" or isinstance(value, str) or OmegaConf.is_list(value)):
            continue  # Lightning's other forms: "auto", "0,1", [0, 1]
        allowed.check(key, OmegaConf.to_container(value) if OmegaConf.is_list(value) else value)
    split = OmegaConf.select(cfg, "data.prepare.split")
    if split is not None and split.valid + split.test >= 1:
        total = split.valid + split.test
        raise ValueError(f"data.prepare.split.valid + data.prepare.split.test = {total:g}: must be below 1")
    k, top = OmegaConf.select(cfg, "average_best"), OmegaConf.select(cfg, "callbacks.checkpoint.save_top_k")
    if k and top is not None and top != -1 and k > top:
        raise ValueError(f"average_best={k}: must be at most callbacks.checkpoint.save_top_k ({top}): raise that too")
    decoding = OmegaConf.select(cfg, "decoding")
    if decoding is not None:
        from nmt.inference.search import SearchOptions

        SearchOptions.check(decoding.beam_size, decoding.nbest, lambda name: f"decoding.{name}")
