"""The values a user can set in ``conf/``, checked before anything is built or prepared: each number against its
range, each word against its words (:func:`allowed`), and the rules between keys (:func:`check_config`).

A range or a set of words is written once, where the value is taken: on the argument of the project's ``_target_``
(or of a typed section's type) that takes it, as ``Annotated[int, SIZE]`` or ``Literal[...]``; :data:`RANGES` and
:data:`CHOICES` hold those of the keys no argument of the project's code takes. A bad value fails with one line naming
the key, the value and the range or the words, instead of a traceback from deep inside torch, sentencepiece or
Lightning, hours of data preparation later. Every numeric key of ``conf/`` has a range, and every word-valued one its
words or a place in ``FREE`` (tests walk the configs to keep it so).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from nmt.arguments import literal_words, located, value_bounds
from nmt.bounds import BIG, BIG0, FRACTION, INT32, SEED, STEPS, WEIGHT, Choice, Range
from nmt.config_keys import check_values, join_key, targeted_nodes, tree_value
from nmt.hardware import ATTENTION_BACKENDS, FLOAT32_MATMUL, Kernels, trains_on_cpu
from nmt.inference.search import SearchOptions

# The ranges of the keys no argument of the project's code takes: other libraries' arguments (torch's optimisers and
# schedulers, Lightning's Trainer and callbacks) and the sections read by hand (loss, the top level). The project's own
# arguments carry theirs in their signatures (``Annotated[int, SIZE]``: :func:`allowed`); tests keep RANGES to these.
RANGES: dict[str, Range] = {
    "seed": SEED,
    "optim.lr": Range(0, lo_open=True),  # finite: a rate too high ends in a NaN loss naming its step
    "optim.betas": Range(0, 1, hi_open=True, items=True),
    "optim.weight_decay": WEIGHT,
    "schedule.scheduler.factor": Range(0, 1, lo_open=True, hi_open=True),
    "schedule.scheduler.patience": BIG0,
    "loss.label_smoothing": FRACTION,
    "loss.align_weight": WEIGHT,
    "loss.align_layer": Range(-256, 255, integer=True),  # a layer of at most LAYERS, negative from the last
    "loss.align_head": Range(0, 1023, integer=True, null=True),  # a head of at most HEADS
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
    "callbacks.early_stopping.patience": BIG0,
    "callbacks.snapshots.every_n_train_steps": BIG,
    "callbacks.snapshots.save_top_k": STEPS,
    "callbacks.ema.decay": Range(0, 1, lo_open=True, hi_open=True),
    "callbacks.ema.update_starting_at_step": Range(0, INT32, integer=True, null=True),
    "average_best": BIG0,
    "onednn_cache": Range(0, INT32, integer=True, null=True),
}


MODES, INTERVALS = Choice(("max", "min")), Choice(("step", "epoch"))  # higher or lower is better; how often
# what validation logs: a checkpoint, early stopping or a plateau schedule may watch it (val/aer: with gold links)
BETTER = {"val/bleu": "max", "val/chrf": "max", "val/loss": "min", "val/ppl": "min", "val/aer": "min"}  # each's mode
MONITORS = Choice(tuple(BETTER))
WATCHERS = {f"{w}.monitor": f"{w}.mode" for w in ("callbacks.checkpoint", "callbacks.early_stopping")} | \
    {"schedule.monitor": "schedule.scheduler.mode"}  # what watches a metric, and its key for which way is better

# The words of the keys no argument of the project's code takes (written once: the code's own tuples where it has
# them). An argument of the project's annotated ``Literal[...]`` or ``Annotated[str, Choice(...)]`` needs no entry:
# its words are its hint's (:func:`~nmt.arguments.literal_words`, :func:`~nmt.arguments.value_bounds`), so a new
# choice of a model part is written in its signature alone.
CHOICES: dict[str, Choice] = {
    "schedule.interval": INTERVALS,
    "schedule.monitor": MONITORS,
    "schedule.scheduler.mode": MODES,
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

    from nmt.config_keys import config_tree, missing_advice, missing_keys

    tree = config_tree(cfg)  # converted once for the checks that read the whole config
    if missing := missing_keys(tree):  # ??? in a config: a value the config chosen leaves to another
        raise ValueError(f"{missing[0]}: has no value{missing_advice(missing[0])}")
    bounds = _check_bounds(cfg, tree)
    if (kernels := OmegaConf.select(cfg, "kernels")) is not None:  # its words checked above: the rest of its rules
        _check_kernels(cfg, OmegaConf.to_container(kernels))
    check_values(tree, own=bounds)  # the other keys, against their targets' hints
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
    if (checkpoint := OmegaConf.select(cfg, "callbacks.checkpoint")) is not None:
        _check_checkpoint(checkpoint)


def _check_bounds(cfg: Any, tree: dict) -> set[str]:
    """Check each value that ``allowed`` bounds against its range or choices; return the keys it bounds."""
    from omegaconf import OmegaConf

    missing, bounds = object(), allowed(tree)
    for key, bound in bounds.items():
        value = tree_value(tree, key, missing)
        if isinstance(value, str) and "${" in value:  # an interpolation: the value it gives
            value = OmegaConf.select(cfg, key, default=missing)
            value = OmegaConf.to_container(value) if OmegaConf.is_list(value) else value
        if value is missing:
            continue
        if key == "trainer.devices" and isinstance(value, str | list):
            continue  # Lightning's other forms: "auto", "0,1", [0, 1]
        bound.check(key, value)
    return set(bounds)


def _check_checkpoint(checkpoint: Any) -> None:
    """``callbacks.checkpoint``: a last.ckpt that is the latest state, and kept when steps ask for it."""
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


def allowed(cfg: Any) -> dict[str, Range | Choice]:
    """The range or the words of every key of ``cfg`` (an OmegaConf config, or its tree) that has one: :data:`RANGES`,
    :data:`CHOICES`, and the ``Annotated`` bounds and ``Literal`` words of the arguments of the project's code that
    each ``_target_`` and typed section reaches (:func:`~nmt.arguments.value_bounds`,
    :func:`~nmt.arguments.literal_words`)."""
    found: dict[str, Range | Choice] = {**RANGES, **CHOICES}
    for path, target, node in targeted_nodes(cfg):
        words = {k: Choice(*w) for k, w in literal_words(target).items()}
        found.update({join_key(path, k): b for k, b in (words | value_bounds(target)).items() if k in node})
    return found
