"""The hardware a run computes on: asking for what is not there fails at once, with one line naming what was asked
and what there is; :class:`Kernels` says how products and attention are computed on it."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

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


def trains_on_cpu(accelerator: str) -> bool:
    """Whether a trainer of ``trainer.accelerator`` trains on the CPU: ``cpu``, or ``auto`` with no GPU here."""
    return accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())


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
    if on_cpu:  # Lightning's CPU takes a number of processes, nothing else (its TypeError comes after preparation)
        n = int(devices) if isinstance(devices, str) and devices.strip().isdigit() else devices
        if devices != "auto" and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"trainer.devices={_shown(devices)}: on the CPU, the number of processes to train with: "
                             "an integer from 1, or auto")  # fmt: skip
    if accelerator not in ("gpu", "cuda"):
        return  # "auto" runs on what there is; "cpu" is always there
    if not torch.cuda.is_available():
        raise ValueError(
            f"trainer.accelerator={accelerator}: {available()}; "
            "on the CPU: add trainer.accelerator=cpu trainer.precision=32-true"
        )
    count = torch.cuda.device_count()
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > count:
        raise ValueError(f"trainer.devices={devices}: only {available()}")
    indices = devices.split(",") if isinstance(devices, str) and "," in devices else devices
    if isinstance(indices, Sequence) and not isinstance(indices, str):  # GPU indices: [0, 1] or "0,1"
        if missing := [i for i in indices if not str(i).strip().isdigit() or int(str(i)) >= count]:
            raise ValueError(f"trainer.devices={_shown(devices)}: no GPU {missing[0]}; {available()} "
                             f"(numbered from 0)")  # fmt: skip


def _shown(value: Any) -> str:
    """A config value as the command line writes it (``[0, 1]``, not ``ListConfig``'s repr)."""
    return str(list(value)) if isinstance(value, Sequence) and not isinstance(value, str) else str(value)


ATTENTION_BACKENDS = {  # kernels.attention's names of scaled_dot_product_attention's backends
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
FLOAT32_MATMUL = ("high", "highest")  # kernels.float32_matmul: TF32 on a GPU, or full float32
_APPLIED: list[contextlib.ExitStack] = []  # what Kernels.apply() entered for the rest of the process: kept alive


def _legacy_precision() -> tuple[str, bool] | None:
    """``torch.get_float32_matmul_precision()`` and ``torch.backends.cudnn.allow_tf32``, the switches Lightning,
    Dynamo and Inductor read; None where torch's new fp32_precision API has set them into a mix those cannot read."""
    try:
        return torch.get_float32_matmul_precision(), bool(torch.backends.cudnn.allow_tf32)
    except RuntimeError:
        return None


def _set_legacy_precision(matmul: str, cudnn_tf32: bool) -> None:
    """cuBLAS's float32 products as ``matmul`` and cuDNN's (convolutions and recurrent layers) in TF32 or not, through
    the legacy switches; oneDNN's CPU products, which the legacy matmul switch sets too, stay as they were."""
    cpu = torch.backends.mkldnn.matmul.fp32_precision
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    for op in (torch.backends.cudnn.conv, torch.backends.cudnn.rnn):  # named too: the switch leaves them at "none"
        op.fp32_precision = "tf32" if cudnn_tf32 else "ieee"
    torch.backends.mkldnn.matmul.fp32_precision = cpu


@contextlib.contextmanager
def float32_products(setting: str) -> Iterator[None]:
    """Within the block: float32 products on a GPU in TF32 (``high``) or full float32 (``highest``), cuBLAS's and
    cuDNN's (its recurrent layers included); CPU products as they were. Set through the legacy switches, so that
    ``torch.get_float32_matmul_precision()`` and ``torch.backends.cuda.matmul.allow_tf32``, which Lightning, Dynamo
    and Inductor read, answer within and after it; everything as it was after it."""
    before = _legacy_precision()
    if before is None:  # the caller mixed the two APIs: its new-API values, put back the same way
        switches = [("cuda", "matmul"), ("mkldnn", "matmul"), ("cuda", "conv"), ("cuda", "rnn")]
        saved = {s: torch._C._get_fp32_precision_getter(*s) for s in switches}
    _set_legacy_precision(setting, setting == "high")
    try:
        yield
    finally:
        if before is not None:
            _set_legacy_precision(*before)
        else:
            for switch, value in saved.items():
                torch._C._set_fp32_precision_setter(*switch, value)


@dataclass(frozen=True)
class Kernels:
    """How products and attention are computed (``conf/config.yaml``'s ``kernels``), the same for training,
    validation, ``translate.py``, ``align.py`` and ``serve.py``.

    ``attention``: the backends ``scaled_dot_product_attention`` may use, most preferred first (PyTorch picks the
    first that supports the call; ``math`` runs anything). The default leaves cuDNN out: it builds an execution plan
    for every new shape, and length-bucketed batches bring new shapes at nearly every step.
    ``float32_matmul``: ``high`` lets float32 products on a GPU use TF32 tensor cores, ``highest`` keeps them full
    float32 (cuBLAS's and cuDNN's recurrent layers alike, :func:`float32_products`). CPU products are left as they are.
    Checked once, with the config (``nmt.settings.check_config``) or a command's options (``nmt.cli.options``):
    their words there, the rest by :meth:`check`; built later from what they passed, it is trusted.
    """

    attention: tuple[str, ...] = ("flash", "efficient", "math")
    float32_matmul: str = "high"

    @classmethod
    def of(cls, section: dict | None) -> Kernels:
        """A checked config's ``kernels`` section as a Kernels (defaults for what it leaves out)."""
        section = dict(section or {})
        if isinstance(section.get("attention"), str):
            section["attention"] = [section["attention"]]
        if "attention" in section:
            section["attention"] = tuple(section["attention"])
        return cls(**section)

    def check(self, device_type: str, written: Callable[[Sequence[str]], str], where: str) -> None:
        """Raise one line unless ``attention`` names some backend, each once, and one that runs every call on
        ``device_type``: the rules of the backends beyond their words (``CHOICES``, or the command's choices).
        ``written`` renders a list of backends as the user gives them (``kernels.attention=[math]``,
        ``--attention-backends math``); ``where`` says where the run is (a CPU's advice adds math)."""
        given = written(self.attention)
        if not self.attention:
            raise ValueError(f"{given}: name at least one of {', '.join(ATTENTION_BACKENDS)}")
        if len(set(self.attention)) != len(self.attention):
            raise ValueError(f"{given}: a backend is named twice")
        if not self.runs_on(device_type):
            raise ValueError(f"{given}: none of these runs on the CPU{where}: add math, e.g. "
                             f"{written([*self.attention, 'math'])}")  # fmt: skip

    def runs_on(self, device_type: str) -> bool:
        """Whether a backend of ``attention`` runs every call on this kind of device: a CPU has math (its flash
        kernel takes some calls only); a GPU has them all."""
        return device_type != "cpu" or "math" in self.attention

    @property
    def backends(self) -> list[SDPBackend]:
        return [ATTENTION_BACKENDS[name] for name in self.attention]

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block: attention restricted to ``attention``, in that order of preference, and float32
        products as ``float32_matmul`` asks; both as they were after it."""
        with float32_products(self.float32_matmul), sdpa_kernel(self.backends, set_priority=True):
            yield

    def apply(self) -> None:
        """The same for the rest of the process (a command that only translates: every thread, its server's too).
        The block entered is kept, never exited (a dropped generator would be closed, and so undone, at once)."""
        stack = contextlib.ExitStack()
        stack.enter_context(self.applied())
        _APPLIED.append(stack)


def current_attention_backends() -> Sequence[SDPBackend]:
    """The attention backends enabled now, in the order PyTorch tries them."""
    from torch.nn.attention import _cur_sdpa_kernel_backends

    order = [SDPBackend(i) for i in torch._C._get_sdp_priority_order()]
    enabled = set(_cur_sdpa_kernel_backends())
    return [b for b in order if b in enabled]
