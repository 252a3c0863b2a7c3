"""What a training run prints: each log line once, and none of Lightning's false alarms and noise (:data:`LEFT_OUT`)."""

from __future__ import annotations

import logging
import warnings

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
