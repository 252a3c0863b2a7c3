"""Distributed training's failures: a node that stops ends the others with one line, and every rank leaves the
process group together at the end."""

from __future__ import annotations

import re
from pathlib import Path

import torch.distributed as dist

# what the collectives raise when a rank of the run is gone (gloo's and NCCL's words; torch's DistError family)
_LOST_PEER = re.compile(r"Connection (reset|closed) by peer|Broken pipe|Socket Timeout|Timed out waiting|NCCL|gloo")


def lost_peer(e: BaseException) -> str | None:
    """What a collective said when another rank of a distributed run stopped or stopped answering (its first
    line, shortened), or None when ``e`` (or the error it arose from) is not that."""
    for err in (e, e.__context__, e.__cause__):
        if err is None:
            continue
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, dist.DistError) or (isinstance(err, RuntimeError) and _LOST_PEER.search(text)):
            return text.split("] ", 1)[-1][:160]  # without gloo's source location
    return None


def lost_node(e: BaseException, run_dir: Path, global_zero: bool) -> ConnectionError | None:
    """The one-line error for ``e`` when it says another node of the run is gone (None otherwise): what the
    collective said, and how to resume from the checkpoints global rank 0 wrote."""
    said = lost_peer(e)
    if said is None:
        return None
    where = run_dir / "checkpoints" / "last.ckpt" if global_zero else "checkpoints/last.ckpt"
    return ConnectionError(
        f"another node of the run stopped or cannot be reached ({said}); the checkpoints are intact: launch every "
        f"node again as before, adding ckpt_path={where} (global rank 0's run directory; copy it where the other "
        "nodes can read it)"
    )


def leave() -> None:
    """Leave the process group together: a rank that exits while gloo's threads still talk to the others can be
    aborted on the way out ("terminate called without an active exception")."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
