"""When a run validates and stops, and why: validation intervals an epoch can hold (:func:`check_epoch_settings`), a
time budget that trains for its time (:func:`follow_time_budget`), and what ended the run (:func:`stop_reason`), for
the summary."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("train")


def follow_time_budget(trainer_cfg: Any, overrides: Sequence[str]) -> None:
    """``trainer.max_time`` given on the command line without ``trainer.max_epochs``: the run trains for that time,
    with no epoch limit (the configs' epoch limit would end a short corpus's run long before its budget)."""
    given = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    if "trainer.max_time" in given and "trainer.max_epochs" not in given and trainer_cfg.get("max_time") is not None:
        if trainer_cfg.get("max_epochs") not in (None, -1):
            log.info("trainer.max_time=%s: no epoch limit (trainer.max_epochs=%s of the config dropped; give it to "
                     "keep it)", trainer_cfg.max_time, trainer_cfg.max_epochs)  # fmt: skip
        trainer_cfg.max_epochs = -1


def stop_reason(trainer: Any) -> str:
    """What ended fitting, in a few words: the budget it reached (with the updates made), early stopping, or an
    interruption."""
    import time

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
    if any(isinstance(c, Deadline) and time.time() >= c.at for c in trainer.callbacks):
        return f"the time budget counted from launch reached {steps}"
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
