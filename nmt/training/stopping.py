"""When a run validates and stops, and why: validation intervals an epoch can hold (:func:`check_epoch_settings`), a
time budget that trains for its time (:func:`follow_time_budget`), and what ended the run (:func:`stop_reason`), for
the summary."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("train")


def launched() -> float:
    """When this process started, in seconds since the epoch (Linux's record of it, to the second); else now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))  # fmt: skip
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def follow_time_budget(trainer_cfg: Any, overrides: Sequence[str]) -> None:
    """A time budget (:data:`TIME_BUDGETS`) given on the command line without ``trainer.max_epochs``: the run trains
    for that time, with no epoch limit (the configs' epoch limit would end a short corpus's run long before its
    budget)."""
    given = {o.lstrip("+~").split("=", 1)[0]: o.split("=", 1)[-1] for o in overrides}
    budget = next((key for key in TIME_BUDGETS if given.get(key) not in (None, "null")), None)
    if budget is not None and "trainer.max_epochs" not in given:
        if trainer_cfg.get("max_epochs") not in (None, -1):
            log.info("%s=%s: no epoch limit (trainer.max_epochs=%s of the config dropped; give it to keep it)",
                     budget, given[budget], trainer_cfg.max_epochs)  # fmt: skip
        trainer_cfg.max_epochs = -1


TIME_BUDGETS = ("trainer.max_time", "callbacks.deadline.after")  # counted from the start of fitting, and of launch


def stop_reason(trainer: Any) -> str:
    """What ended fitting, in a few words: the budget it reached (with the updates made), early stopping, or an
    interruption."""
    from lightning.pytorch.callbacks import EarlyStopping, Timer

    from nmt.training.callbacks import Deadline

    steps = f"after {trainer.global_step:,} updates, {trainer.current_epoch} epoch(s)"
    if trainer.interrupted:
        return f"interrupted {steps}"
    early = [c for c in trainer.callbacks if isinstance(c, EarlyStopping) and c.wait_count >= c.patience]
    if early:
        return f"early stopping ({early[0].monitor} did not improve for {early[0].patience} validations), {steps}"
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    if timer is not None and timer.time_remaining() is not None and timer.time_remaining() <= 0:
        return f"trainer.max_time reached {steps}"
    deadline = next((c for c in trainer.callbacks if isinstance(c, Deadline) and c.at is not None), None)
    if deadline is not None and time.time() >= deadline.at:
        named = f"callbacks.deadline.after={deadline.after}" if deadline.after else "the budget counted from launch"
        return f"{named} reached {steps}"
    if 0 < trainer.max_steps <= trainer.global_step:
        return f"trainer.max_steps={trainer.max_steps} reached {steps}"
    if trainer.max_epochs not in (None, -1) and trainer.current_epoch >= trainer.max_epochs:
        return f"trainer.max_epochs={trainer.max_epochs} reached {steps}"
    return f"stopped {steps}"


def check_epoch_settings(trainer: Any, batches: int) -> None:
    """A ValueError where the trainer's settings ask for what an epoch of ``batches`` training batches (on each
    process) cannot give: a validation every more batches than an epoch has, counted within each epoch. Checked
    once the data is prepared, before fitting starts."""
    interval, every_epoch = trainer.get("val_check_interval"), trainer.get("check_val_every_n_epoch")
    limit = trainer.get("limit_train_batches")
    if isinstance(limit, int) and not isinstance(limit, bool):
        batches = min(batches, limit)
    elif isinstance(limit, float):
        batches = int(batches * limit)
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > batches and every_epoch is not None:
        raise ValueError(
            f"trainer.val_check_interval={interval}: more than the {batches} training batches of an epoch of this "
            f"data, and counted within each epoch; add trainer.check_val_every_n_epoch=null to validate every "
            f"{interval} batches across epochs, or give at most {batches}"
        )
