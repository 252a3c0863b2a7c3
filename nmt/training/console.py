"""What a training run prints: each log line once, and none of Lightning's false alarms."""

from __future__ import annotations

import logging
import warnings


def one_console() -> None:
    """Each log line once, on the console and in the run's log file: Lightning's loggers print through Hydra's
    handlers (the root logger's) where Hydra set them up, not through their own console handler as well; and
    none of Lightning's warnings that are false here."""
    import lightning  # noqa: F401 - sets up its "lightning" logger and its console handler

    if logging.getLogger().handlers:  # Hydra's job logging (hydra/job_logging=none leaves Lightning's own)
        logging.getLogger("lightning").handlers.clear()
    false_alarms = [
        # the data module restores the position within the epoch itself (its state_dict), which Lightning cannot see
        "You're resuming from a checkpoint that ended before the epoch ended",
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # inside Lightning, with this torch
    ]
    for message in false_alarms:
        warnings.filterwarnings("ignore", message=message)
    # an advertisement, not a log line
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "Tip:" not in str(r.msg))
