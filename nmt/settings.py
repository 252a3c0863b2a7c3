"""The values a user can set in ``conf/``: the allowed range of each number (``RANGES``) and the allowed words of
each setting that takes one of several words (``CHOICES``), checked before anything is built or prepared.

A bad value fails with one line naming the key, the value and the range or the words, instead of a traceback
from deep inside torch, sentencepiece or Lightning, hours of data preparation later. Every numeric key of ``conf/``
has a range here, and every word-valued one its words or a place in ``FREE`` (tests walk the configs to keep it so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.alignment.tokenisation import LINES
from nmt.config_keys import check_values, config_nodes, join_key, literal_words, located
from nmt.data.joining import MAX_PAIRS
from nmt.data.readers import ON_BAD_LINE
from nmt.data.tokenizer import MODEL_TYPES
from nmt.hardware import ATTENTION_BACKENDS, FLOAT32_MATMUL, Kernels, trains_on_cpu
from nmt.inference.search import SearchOptions


def _number(x: float) -> str:
    """A bound as a reader types it: whole numbers in full (2,147,483,647, not 2.14748e+09)."""
    return f"{int(x):,}" if math.isfinite(x) and x == int(x) and abs(x) < 1e15 else f"{x:g}"


@dataclass(frozen=True)
class Range:
    """An interval, closed unless ``lo_open``/``hi_open``; ``integer`` asks for whole numbers; ``null`` allows None;
    ``items``: a list of such numbers (``optim.betas``), and only then a list."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    null: bool = False
    items: bool = False

    def __str__(self) -> str:
        kind = ("a list of integers" if self.integer else "a list of numbers") if self.items else \
            "an integer" if self.integer else "a number"  # fmt: skip
        lo, hi = _number(self.lo), _number(self.hi)
        if self.lo == -math.inf and self.hi == math.inf:
            text = kind
        elif self.hi == math.inf:
            text = f"{kind} {'>' if self.lo_open else '>='} {lo}"
        else:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        return text + (" (or null)" if self.null else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.null
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False  # inf and nan too: no key here means "no limit" by an infinite value
        if self.integer and value != int(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name=value: must be <range>")`` if ``value`` (each item, of a list) is outside."""
        if self.items != isinstance(value, (list, tuple)) and not (value is None and self.null):
            raise ValueError(f"{name}={value!r}: must be {self}")
        for v in value if self.items and value is not None else [value]:
            if not self.ok(v):
                raise ValueError(f"{name}={value!r}: must be {self}")


# Counts no run comes near (a step a millisecond for 24 days); beyond them the 32-bit integers of numpy, sentencepiece
# and torch's data loading overflow. The bound of every count with no smaller one of its own.
INT32 = 2**31 - 1
POSITIVE = Range(1, integer=True)  # for options with bounds of their own (translate.py, serve.py)
COUNT = Range(0, integer=True)
BIG = Range(1, INT32, integer=True)  # a count of the config: at least 1 ...
BIG0 = Range(0, INT32, integer=True)  # ... or at least 0
FRACTION = Range(0, 1, hi_open=True)  # dropout, label smoothing, held-out shares
SEED = Range(0, 2**32 - 1, integer=True)  # numpy's and Lightning's seeds are unsigned 32-bit integers
# A layer's width: the widest models trained anywhere have a few thousand units; beyond 65,536 a typo (a digit or two
# too many) would try to allocate gigabytes per layer before failing.
SIZE = Range(1, 65536, integer=True)
LAYERS = Range(1, 256, integer=True)  # stacked layers: the deepest NMT stacks have tens; beyond, a typo
HEADS = Range(1, 1024, integer=True)  # attention heads (each must also divide its layer's size)
POSITIONS = Range(1, 65536, integer=True)  # learned positions: a table row each, for the longest input or output
TOKENS = Range(1, 2**20, integer=True)  # padded tokens per batch: 2**20 is 8x the largest GPU batches in use
STEPS = Range(-1, INT32, integer=True)  # a number of updates or epochs, -1: no limit
WEIGHT = Range(0)  # a loss weight or decay: no bound but a finite value (inf and nan are refused everywhere)

RANGES: dict[str, Range] = {
    "seed": SEED,
    # model
    "model.emb_size": SIZE,
    "model.readout_size": SIZE,
    "model.dropout": FRACTION,
    "model.encoder.hidden_size": SIZE,
    "model.encoder.num_layers": LAYERS,
    "model.decoder.hidden_size": SIZE,
    "model.decoder.num_layers": LAYERS,
    "model.decoder.attn_hidden": SIZE,
    "model.decoder.heads": HEADS,
    "model.encoder.heads": HEADS,
    "model.encoder.ff_size": SIZE,
    "model.decoder.ff_size": SIZE,
    "model.encoder.attention_dropout": FRACTION,
    "model.decoder.attention_dropout": FRACTION,
    "model.encoder.max_positions": POSITIONS,
    "model.decoder.max_positions": POSITIONS,
    # optimisation
    "optim.lr": Range(0, lo_open=True),  # finite: a rate too high ends in a NaN loss naming its step
    "optim.betas": Range(0, 1, hi_open=True, items=True),
    "optim.weight_decay": WEIGHT,
    "schedule.scheduler.warmup_steps": BIG0,
    "schedule.scheduler.factor": Range(0, 1, lo_open=True, hi_open=True),
    "schedule.scheduler.patience": BIG0,
    "schedule.scheduler.final": Range(0, 1),  # the budgeted schedule's last rate, a multiple of optim.lr
    "schedule.scheduler.every": BIG,
    "loss.label_smoothing": FRACTION,
    "loss.align_weight": WEIGHT,
    "loss.align_layer": Range(-256, 255, integer=True),  # a layer of at most LAYERS, negative from the last
    "loss.align_head": Range(0, 1023, integer=True, null=True),  # a head of at most HEADS
    # search (validation and test; translate.py's and serve.py's options share these)
    "decoding.beam_size": Range(1, 128, integer=True),  # the beam's hypotheses are a batch each step: 128 is already
    # far past where wider beams stop scoring better (and BLEU drops)
    "decoding.alpha": Range(0, 10),  # GNMT length penalty ((5 + length) / 6) ** alpha: useful at 0-2; at 10 a long
    # output's penalty is near float32's largest value
    "decoding.max_len_a": Range(0, 10),  # output budget per source token: no translation is 10x its source
    "decoding.max_len_b": Range(0, 1024, integer=True),  # ... and its constant term: the positions a model learns
    "decoding.nbest": Range(1, 128, integer=True),  # at most decoding.beam_size, checked below
    # data
    "data.prepare.spm.vocab_size": Range(8, 2**20, integer=True),  # an embedding row per piece: 1M pieces is 4x the
    # largest NMT vocabularies
    "data.aligner.model": Range(1, 3, integer=True),
    "data.aligner.block_pairs": BIG,
    "data.aligner.draws": Range(1, 100, integer=True),  # eflomal runs voted on: each costs a full run's time
    "data.prepare.spm.character_coverage": Range(0, 1, lo_open=True),
    "data.prepare.spm.sample": BIG,
    "data.prepare.split.valid": FRACTION,
    "data.prepare.split.test": FRACTION,
    "data.prepare.num_proc": Range(1, 4096, integer=True, null=True),  # processes: more than any machine's cores
    "data.prepare.block_lines": BIG,
    "data.prepare.max_len": POSITIONS,  # subwords per side: a longer pair could not be given a position anyway
    "data.prepare.max_ratio": Range(1),  # finite: a length ratio; beyond the longest pair's, the rule is off
    "data.prepare.ratio_min_len": BIG0,
    "data.sampling.alpha": Range(0, 1),
    "data.sampling.nbest_size": Range(-1, INT32, integer=True),
    "data.join.max_pairs": Range(1, MAX_PAIRS, integer=True),  # the one bound, Joining's
    "data.join.share": Range(0, 1),
    "data.max_tokens": TOKENS,
    "data.eval_max_tokens": TOKENS,
    "data.num_workers": Range(0, 1024, integer=True),  # worker processes: more than any machine's cores
    "data.pad_multiple": Range(1, 64, integer=True),
    "data.shapes": Range(0, 256, integer=True),  # shapes, each a captured graph on a GPU: 0 (off) or a few dozen
    "data.source.src_col": Range(0, 1023, integer=True),  # a TSV line's column: no corpus has a thousand
    "data.source.tgt_col": Range(0, 1023, integer=True),
    # the built-in corpus is generated in memory: 10 million pairs is 10x any use and a few GB
    "data.source.train_size": Range(1, 10**7, integer=True),
    "data.source.valid_size": Range(1, 10**7, integer=True),
    "data.source.test_size": Range(1, 10**7, integer=True),
    "data.source.seed": SEED,
    "data.source.max_words": Range(3, 1000, integer=True),  # from the grammar's shortest sentence
    # Lightning
    "trainer.devices": Range(1, 1024, integer=True),  # devices per node: GPUs, or CPU processes; more than any node
    "trainer.num_nodes": Range(1, 65536, integer=True),  # machines
    "trainer.strategy.timeout.seconds": Range(0, 7 * 86400, lo_open=True),  # trainer=ddp: how long a rank waits for
    # the others; a week is longer than any collective can take
    "trainer.max_epochs": Range(-1, INT32, integer=True, null=True),  # -1: no limit
    "trainer.max_steps": STEPS,
    "trainer.val_check_interval": Range(0, INT32, lo_open=True),  # a fraction of an epoch, or a number of steps
    "trainer.check_val_every_n_epoch": Range(1, INT32, integer=True, null=True),
    "trainer.gradient_clip_val": Range(0, lo_open=True, null=True),  # a finite gradient norm; null: no clipping
    "trainer.log_every_n_steps": BIG,
    "trainer.num_sanity_val_steps": STEPS,
    "callbacks.checkpoint.save_top_k": STEPS,
    "callbacks.checkpoint.last_every_n_train_steps": Range(1, INT32, integer=True, null=True),
    "callbacks.early_stopping.patience": BIG0,
    "callbacks.heatmaps.num_sentences": Range(0, 1000, integer=True),  # figures drawn at every validation
    "callbacks.throughput.window_size": Range(2, INT32, integer=True),
    "callbacks.snapshots.every_n_train_steps": BIG,
    "callbacks.snapshots.save_top_k": STEPS,
    "callbacks.ema.decay": Range(0, 1, lo_open=True, hi_open=True),
    "callbacks.ema.update_starting_at_step": Range(0, INT32, integer=True, null=True),
    "average_best": BIG0,
    "onednn_cache": Range(0, INT32, integer=True, null=True),
}


@dataclass(frozen=True)
class Choice:
    """One of ``words``; ``null`` allows None; ``file``: or an existing file, so named; ``items``: a list of them
    (``kernels.attention``), and only then a list."""

    words: tuple[str, ...]
    null: bool = False
    file: str = ""
    items: bool = False

    def __str__(self) -> str:
        text = f"one of {', '.join(self.words)}" if len(self.words) > 1 else self.words[0]
        text = f"a list of {text.removeprefix('one of ')}" if self.items else text
        return text + (f", or {self.file}" if self.file else "") + (" (or null)" if self.null else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.null
        words, file = isinstance(value, str) and value in self.words, bool(self.file) and isinstance(value, str)
        return words or file and Path(value).expanduser().is_file()

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name=value: must be one of <words>")`` (a missing file named so) unless allowed."""
        if self.items != isinstance(value, (list, tuple)) and not (value is None and self.null):
            raise ValueError(f"{name}={value!r}: must be {self}")
        for v in value if self.items and value is not None else [value]:
            if not self.ok(v):
                missing = " (no such file)" if self.file and isinstance(v, str) and ("/" in v or "." in v) else ""
                raise ValueError(f"{name}={value!r}{missing}: must be {self}")


EFLOMAL = "eflomal"  # data.align: links from the statistical aligner, computed at preparation
MODES, INTERVALS = Choice(("max", "min")), Choice(("step", "epoch"))  # higher or lower is better; how often
# what validation logs: a checkpoint, early stopping or a plateau schedule may watch it (val/aer: with gold links)
BETTER = {"val/bleu": "max", "val/chrf": "max", "val/loss": "min", "val/ppl": "min", "val/aer": "min"}  # each's mode
MONITORS = Choice(tuple(BETTER))
WATCHERS = {f"{w}.monitor": f"{w}.mode" for w in ("callbacks.checkpoint", "callbacks.early_stopping")} | \
    {"schedule.monitor": "schedule.scheduler.mode"}  # what watches a metric, and its key for which way is better

# The words of every setting that takes one of several (written once: the code's own tuples where it has them). An
# argument of a ``_target_`` (a model part's) annotated ``Literal[...]`` needs no entry: its words are its hint's
# (:func:`~nmt.config_keys.literal_words`), so a new choice of a model part is written in its signature alone.
CHOICES: dict[str, Choice] = {
    "schedule.interval": INTERVALS,
    "schedule.monitor": MONITORS,
    "schedule.scheduler.mode": MODES,
    "data.align": Choice((EFLOMAL,), null=True, file="a Pharaoh file of the training pairs' links"),
    "data.aligner.symmetrisation": Choice(COMBINATIONS),
    "data.aligner.lines": Choice(LINES),
    "data.prepare.spm.model_type": Choice(MODEL_TYPES),
    "data.prepare.on_bad_line": Choice(ON_BAD_LINE),
    "kernels.attention": Choice(tuple(ATTENTION_BACKENDS), items=True),
    "kernels.float32_matmul": Choice(tuple(FLOAT32_MATMUL)),
    "trainer.accelerator": Choice(("auto", "cpu", "gpu", "cuda")),
    "trainer.precision": Choice(  # in full
        ("auto", "32-true", "bf16-mixed", "16-mixed")  # the weights in float32: Lightning's -true halves and
    ),  # doubles convert each batch as a collection, which this project's frozen Batch is not
    "callbacks.checkpoint.mode": MODES,
    "callbacks.checkpoint.monitor": MONITORS,
    "callbacks.early_stopping.mode": MODES,
    "callbacks.early_stopping.monitor": MONITORS,
    "callbacks.lr_monitor.logging_interval": INTERVALS,
}


def check_config(cfg: Any) -> None:
    """Check every value of ``RANGES`` and ``CHOICES`` present in a composed config (an OmegaConf ``DictConfig``),
    and the rules between keys."""
    from omegaconf import OmegaConf

    from nmt.config_keys import missing_advice, missing_keys

    if missing := missing_keys(cfg):  # ??? in a config: a value the config chosen leaves to another
        raise ValueError(f"{missing[0]}: has no value{missing_advice(missing[0])}")
    missing, chosen = object(), choices(cfg)
    for key, allowed in [*RANGES.items(), *chosen.items()]:
        value = OmegaConf.select(cfg, key, default=missing)
        if value is missing:
            continue
        if key == "trainer.devices" and (value == "auto" or isinstance(value, str) or OmegaConf.is_list(value)):
            continue  # Lightning's other forms: "auto", "0,1", [0, 1]
        allowed.check(key, OmegaConf.to_container(value) if OmegaConf.is_list(value) else value)
    if (kernels := OmegaConf.select(cfg, "kernels")) is not None:  # its words checked above: the rest of its rules
        _check_kernels(cfg, OmegaConf.to_container(kernels))
    check_values(cfg, own={*RANGES, *chosen})  # the other keys, against their targets' hints
    if OmegaConf.select(cfg, "model.share_embeddings") is True and not OmegaConf.select(cfg, "data.prepare.spm.joint"):
        raise ValueError(
            "model.share_embeddings=true: needs one vocabulary for both languages: add data.prepare.spm.joint=true"
        )
    split = OmegaConf.select(cfg, "data.prepare.split")
    if split is not None and split.valid + split.test >= 1:
        total = split.valid + split.test
        raise ValueError(f"data.prepare.split.valid + data.prepare.split.test = {total:g}: must be below 1")
    k, top = OmegaConf.select(cfg, "average_best"), OmegaConf.select(cfg, "callbacks.checkpoint.save_top_k")
    if k and top is not None and top != -1 and k > top:
        raise ValueError(f"average_best={k}: must be at most callbacks.checkpoint.save_top_k ({top}): raise that too")
    if (decoding := OmegaConf.select(cfg, "decoding")) is not None:
        SearchOptions.check(decoding.beam_size, decoding.nbest, lambda name: f"decoding.{name}")
    interval = OmegaConf.select(cfg, "trainer.val_check_interval")
    if isinstance(interval, float) and interval > 1:  # Lightning: a float is a fraction of an epoch
        raise ValueError(
            f"trainer.val_check_interval={interval!r}: a fraction of an epoch must be at most 1.0; "
            f"every {interval:g} batches is trainer.val_check_interval={int(interval)}"
        )
    _check_budget(cfg)
    for key in ("trainer.max_time", "callbacks.deadline.after"):  # a time budget, counted from fitting or launch
        duration(OmegaConf.select(cfg, key), key)
    for watch, way in WATCHERS.items():  # a "best" checkpoint that is the worst, a stop or cut at each improvement
        metric, mode = OmegaConf.select(cfg, watch), OmegaConf.select(cfg, way)
        if metric in BETTER and mode is not None and mode != BETTER[metric]:
            kept, better = ("highest", "lower") if mode == "max" else ("lowest", "higher")
            raise ValueError(f"{way}={mode}: takes the {kept} {metric} as the best, and a {better} {metric} is "
                             f"better: add {way}={BETTER[metric]}")  # fmt: skip
    checkpoint = OmegaConf.select(cfg, "callbacks.checkpoint")
    if checkpoint is not None:
        last = checkpoint.get("save_last")
        if last not in (True, False):  # "link" would make last.ckpt a link to the best, not the latest state
            raise ValueError(f"callbacks.checkpoint.save_last={last!r}: must be true or false")
        if checkpoint.get("last_every_n_train_steps") and not last:
            raise ValueError(
                f"callbacks.checkpoint.last_every_n_train_steps={checkpoint.last_every_n_train_steps}: saves last.ckpt,"
                " which callbacks.checkpoint.save_last=false turns off: set save_last=true, or "
                "callbacks.checkpoint.last_every_n_train_steps=null"
            )


def _check_kernels(cfg: Any, section: dict) -> None:
    """The ``kernels`` section's settings, and attention backends that run on the device of the run (the CPU unless
    a GPU is asked for or found)."""
    from omegaconf import OmegaConf

    known = [f.name for f in fields(Kernels)]
    if unknown := sorted(set(section) - set(known)):
        raise ValueError(f"kernels.{unknown[0]}: not a setting ({', '.join(f'kernels.{k}' for k in known)})")
    on = "cpu" if trains_on_cpu(OmegaConf.select(cfg, "trainer.accelerator", default="auto")) else "cuda"
    written = lambda backends: f"kernels.attention=[{','.join(backends)}]"  # noqa: E731  as an override gives it
    Kernels.of(section).check(on, written, ", where this run trains")


TIME_UNITS = ("days", "hours", "minutes", "seconds")  # trainer.max_time's, as Lightning's Timer reads them


def duration(value: Any, key: str = "trainer.max_time") -> float | None:
    """The seconds of a time budget as Lightning's Timer reads ``trainer.max_time``: "DD:HH:MM:SS", or a mapping of
    :data:`TIME_UNITS`; None for None; a ValueError naming ``key`` for anything else."""
    import datetime

    from omegaconf import OmegaConf

    if value is None:
        return None
    given = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    parts = given.split(":") if isinstance(given, str) else []
    units = dict(zip(TIME_UNITS, map(int, parts))) if len(parts) == 4 and all(p.isdigit() for p in parts) else given
    if not isinstance(units, dict) or units.keys() - set(TIME_UNITS) or not all(map(WEIGHT.ok, units.values())):
        raise ValueError(f"{key}={given!r}: must be DD:HH:MM:SS (e.g. 00:00:15:00), or a mapping of "
                         f"{', '.join(TIME_UNITS)} (e.g. {{minutes: 15}})")  # fmt: skip
    if (seconds := datetime.timedelta(**units).total_seconds()) <= 0:
        raise ValueError(f"{key}={given!r}: must be more than no time")
    return seconds


def _check_budget(cfg: Any) -> None:
    """A schedule that anneals to the end of the run (it takes ``budgets``) needs a run with an end: ``max_steps``,
    ``max_epochs``, ``max_time``, or a callback with a ``budget()`` (a deadline; one that cannot be imported is given
    the benefit of the doubt: its instantiation names the problem)."""
    import inspect

    from omegaconf import OmegaConf

    schedule = located(OmegaConf.select(cfg, "schedule.scheduler._target_"))
    try:
        if schedule is None or "budgets" not in inspect.signature(schedule).parameters:
            return
    except (TypeError, ValueError):  # no signature to read
        return
    steps, time = OmegaConf.select(cfg, "trainer.max_steps"), OmegaConf.select(cfg, "trainer.max_time")
    if (steps is not None and steps > 0) or time is not None or OmegaConf.select(cfg, "trainer.max_epochs") != -1:
        return  # (Lightning takes 1,000 epochs where neither max_epochs nor max_steps is given)
    for node in (OmegaConf.select(cfg, "callbacks") or {}).values():  # a budget callback given a setting (a deadline)
        if node is not None and node.get("_target_"):
            found = located(node.get("_target_"))
            if found is None:
                return
            if not callable(getattr(found, "budget", None)):
                continue  # (read no further: other callbacks' values may interpolate Hydra's run folder)
            if any(node.get(k) is not None for k in node if k != "_target_"):
                return
    target = OmegaConf.select(cfg, "schedule.scheduler._target_")
    raise ValueError(
        f"schedule.scheduler._target_={target}: anneals to the end of the run's budget, and this run has none: "
        "give one, e.g. trainer.max_time=00:00:15:00, trainer.max_steps=5000 or trainer.max_epochs=5"
    )


def choices(cfg: Any) -> dict[str, Choice]:
    """:data:`CHOICES`, and the words of each ``Literal``-annotated argument of every ``_target_`` in ``cfg``
    (:func:`~nmt.config_keys.literal_words`)."""
    from omegaconf import OmegaConf

    found = dict(CHOICES)
    for path, node in config_nodes(OmegaConf.to_container(cfg, resolve=False)):
        if isinstance(node, dict):
            words = literal_words(node.get("_target_"))
            found.update({join_key(path, k): Choice(*w) for k, w in words.items() if k in node})
    return found
