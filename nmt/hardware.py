"""Asking for hardware that is not there fails at once, with one line naming what was asked and what there is."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

log = logging.getLogger(__name__)


def available() -> str:
    """What this torch can run on, in words."""
    if not torch.cuda.is_available():
        built = "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no GPU visible"
        return f"no GPU (torch {torch.__version__}, {built})"
    return f"{torch.cuda.device_count()} GPU(s): " + ", ".join(
        torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
    )


def device(option: str, value: str) -> torch.device:
    """``auto`` (a GPU where there is one), ``cpu`` or ``cuda[:N]``, checked to exist."""
    if value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{option}={value}: not a device (auto, cpu or cuda[:N])") from None
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"{option}={value}: not available here: {available()}")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{option}={value}: not supported (auto, cpu or cuda[:N])")
    return dev


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (x86's AVX512-BF16 or AMX-BF16, Arm's BF16); without them bf16
    products are emulated."""
    capabilities = torch.cpu.get_capabilities()
    return any(capabilities.get(name) for name in ("avx512_bf16", "amx_bf16", "bf16"))


ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def bound_onednn_cache(capacity: int | None) -> None:
    """Bound oneDNN's cache of CPU primitives to ``capacity`` (bf16 matrix products keep one per shape met, 1,024 by
    default, and length-bucketed batches meet many), unless the environment already sets it; None: oneDNN's own
    default. oneDNN reads it when it first builds such a primitive: call this before training."""
    if capacity is not None:
        os.environ.setdefault(ONEDNN_CACHE, str(capacity))


def check_trainer(trainer: Any) -> None:
    """Raise a ValueError if ``trainer`` (the ``trainer`` section of the config) asks for GPUs that are not here;
    warn where it asks for bf16 on a CPU that would emulate it."""
    accelerator, devices = trainer.get("accelerator", "auto"), trainer.get("devices", 1)
    precision = str(trainer.get("precision", "32-true"))
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if on_cpu and precision.startswith("bf16") and not cpu_computes_bf16():
        log.warning(
            "trainer.precision=%s: this CPU has no bfloat16 instructions (AVX512-BF16, AMX or Arm's BF16), so its "
            "bf16 products are emulated and slower than float32's: trainer.precision=32-true trains faster here",
            precision,
        )
    if accelerator not in ("gpu", "cuda"):
        return  # "auto" runs on what there is; "cpu" is always there
    if not torch.cuda.is_available():
        raise ValueError(
            f"trainer.accelerator={accelerator}: {available()}; "
            "on the CPU: add trainer.accelerator=cpu trainer.precision=32-true"
        )
    if isinstance(devices, int) and devices > torch.cuda.device_count():
        raise ValueError(f"trainer.devices={devices}: only {available()}")
