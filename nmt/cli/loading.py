"""What ``--ckpt`` names, loaded: one checkpoint, several (an ensemble), or a model directory ``export.py`` wrote (the
CTranslate2 engine). The one place that knows both engines: everything below it sees a ``TranslationModel``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from nmt.ct2.engine import check_members, load_export
from nmt.hardware import Kernels
from nmt.inference.loading import TranslationModel, load_checkpoints


def load_model(
    paths: Sequence[str | Path],
    device: torch.device,
    threads: int = 0,
    compute_type: str | None = None,
    kernels: Kernels | None = None,
) -> TranslationModel:
    """The checkpoint, the ensemble of several, or the exported model ``paths`` names, on ``device``; ``threads``
    (0: as they come) for the PyTorch path or the engine; ``compute_type`` is the engine's (an exported model's
    quantisation by default); ``kernels`` how the PyTorch path computes (default: as training does)."""
    if check_members(paths):
        if kernels is not None:
            raise ValueError(
                "--attention-backends and --float32-matmul: apply to a checkpoint, not to a model export.py wrote "
                "(CTranslate2 runs kernels of its own; --compute-type sets its precision)"
            )
        return load_export(paths[0], device, threads, compute_type or "default")
    if compute_type is not None:
        raise ValueError(f"--compute-type={compute_type}: applies to a model export.py wrote, not to a checkpoint")
    return load_checkpoints(paths, device, threads, kernels)
