"""What a training run prints: each log line once, none of Lightning's false alarms and noise (:data:`LEFT_OUT`),
and a progress bar of the loss, the learning rate and target tokens/s (:class:`ProgressBar`)."""

from __future__ import annotations

import logging
import math
import time
import warnings

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

# Lightning's warnings that are false alarms here (regular expressions of their messages)
FALSE_ALARMS = (
    # the data module restores the position within the epoch itself (its state_dict), which Lightning cannot see
    "You're resuming from a checkpoint that ended before the epoch ended",
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # inside Lightning, with this torch
    # data.num_workers is set per trainer config (conf/trainer): on a CPU, more workers take cores from training
    "The '.*' does not have many workers",
    # a resume writes into its own run directory on purpose; a fresh run never writes over a checkpoint (FreshRun)
    "Checkpoint directory .* exists and is not empty",
    # trainer.accelerator=cpu is a choice the command line made, not an oversight
    "GPU available but not used",
    # logging counts updates across epochs, not within one: a short epoch still logs every log_every_n_steps updates
    r"The number of training batches \(\d+\) is smaller than the logging interval",
    # a plateau schedule at an epoch's end before the first validation: its step waits for a score (strict=False)
    "ReduceLROnPlateau conditioned on metric .* which is not available but strict is set to `False`",
)
# Lightning's log lines that are noise here: logger -> what the messages left out contain
NOISE = {
    "lightning.pytorch.utilities.rank_zero": ("Tip:",),  # an advertisement, not a log line
    "lightning.pytorch.accelerators.cuda": ("LOCAL_RANK:",),  # every rank's CUDA_VISIBLE_DEVICES
    # checkpoints are the run's own (nmt.checkpoint reads every other with weights_only)
    "lightning.pytorch.trainer.connectors.checkpoint_connector": ("`weights_only` was not set",),
}
LEFT_OUT = (*FALSE_ALARMS, *(start for starts in NOISE.values() for start in starts))


class NotNoise(logging.Filter):
    """Leaves out the log lines whose message contains one of ``starts``."""

    def __init__(self, starts: tuple[str, ...]):
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(s in str(record.msg) for s in self.starts)


def one_console() -> None:
    """Each log line once, on the console and in the run's log file: Lightning's loggers print through Hydra's
    handlers (the root logger's) where Hydra set them up, not through their own console handler as well; and
    none of Lightning's warnings that are false here (:data:`FALSE_ALARMS`) nor its noise (:data:`NOISE`)."""
    import lightning  # noqa: F401 - sets up its "lightning" logger and its console handler

    if logging.getLogger().handlers:  # Hydra's job logging (hydra/job_logging=none leaves Lightning's own)
        logging.getLogger("lightning").handlers.clear()
    for message in FALSE_ALARMS:
        warnings.filterwarnings("ignore", message=message)
    for name, starts in NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, NotNoise) for f in logger.filters):  # once, however often a process trains
            logger.addFilter(NotNoise(starts))


# what the progress bar shows (the rest is in TensorBoard and the log): name on the bar -> how it is written
BAR = {"loss": "{:.3f}", "lr": "{:.2e}", "tokens/s": "{:,.0f}"}


class ProgressBar(TQDMProgressBar):
    """Lightning's progress bar with the training loss, the learning rate and target tokens/s only (:data:`BAR`):
    not the validation scores, nor Lightning's own additions (``v_num``). Added by ``train.py`` where
    ``trainer.enable_progress_bar`` is true."""

    MIN_INTERVAL = 0.1  # seconds between redraws (tqdm's own mininterval)
    _drawn = -math.inf  # when it last redrew

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, int | str | float | dict]:
        return bar_metrics(trainer)

    def _should_update(self, current: int, total: int) -> bool:
        """Lightning's rule (every ``refresh_rate`` batches and the last), and at most every ``MIN_INTERVAL`` seconds:
        a redraw costs the host hundreds of Python calls, which a GPU step of a few milliseconds should not wait for
        ten times a second more than a person can read."""
        if not super()._should_update(current, total):
            return False
        now = time.monotonic()
        if current != total and now - self._drawn < self.MIN_INTERVAL:
            return False
        self._drawn = now
        return True


def bar_metrics(trainer: L.Trainer) -> dict[str, str]:
    """The progress bar's metrics, from what training has logged so far: the loss of the last logging step (read from
    the device there, so that the bar makes no step wait for the GPU), the learning rate now, the target tokens/s of
    the last window (all ranks' where there are several)."""
    logged = trainer.logged_metrics
    tokens = logged.get("train/items_per_sec", logged.get("train/device/items_per_sec"))
    values = {
        "loss": getattr(trainer.lightning_module, "logged", {}).get("train/loss"),
        "lr": trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else None,
        "tokens/s": tokens,
    }
    return {name: BAR[name].format(float(v)) for name, v in values.items() if v is not None}
