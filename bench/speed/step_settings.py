"""The settings bench/speed/step_speed.py compares (MODEL:PRECISION[:attention=A+B...][:KIND]), each built as training
builds it, and the training step each runs: one registry of step kinds (eager, compiled, CUDA graphs)."""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from bench.common import MODELS, ROOT

# precision -> (Lightning's precision, kernels.float32_matmul): bf16's float32 products outside autocast in TF32
PRECISIONS = {"tf32": ("32-true", "high"), "highest": ("32-true", "highest"), "bf16": ("bf16-mixed", "high")}


def capturable(model: str) -> bool:
    """Whether ``conf/model/<model>.yaml``'s parts say their training step can be captured as a CUDA graph (as
    ``compile.graphs=true`` checks them)."""
    from omegaconf import OmegaConf

    from nmt.training.graphs import uncapturable_part

    return uncapturable_part(OmegaConf.load(ROOT / "conf" / "model" / f"{model}.yaml")) is None


@dataclass(frozen=True)
class Setting:
    """One way of training a model: MODEL:PRECISION[:attention=A+B...][:KIND]."""

    model: str
    precision: str
    attention: tuple[str, ...] | None = None
    kind: str = "eager"

    @classmethod
    def parse(cls, text: str) -> Setting:
        model, precision, *opts = text.split(":")
        if model not in MODELS or precision not in PRECISIONS:
            raise argparse.ArgumentTypeError(
                f"{text}: not MODEL:PRECISION[:OPTION...] (models {', '.join(MODELS)}; precisions "
                f"{', '.join(PRECISIONS)})"
            )
        attention, kind = None, "eager"
        for opt in opts:
            if opt.startswith("attention="):
                attention = tuple(opt.removeprefix("attention=").split("+"))
            elif opt in STEP_KINDS and opt != "eager":
                kind = opt
            else:
                raise argparse.ArgumentTypeError(
                    f"{text}: option {opt!r} is neither attention=A+B+... nor a step kind ({', '.join(STEP_KINDS)})"
                )
        if kind == "graphs" and not capturable(model):
            raise argparse.ArgumentTypeError(
                f"{text}: {model}'s training step depends on the data's values (compile.graphs=true refuses it)"
            )
        return cls(model, precision, attention, kind)

    @property
    def name(self) -> str:
        attention = [f"attention={'+'.join(self.attention)}"] if self.attention else []
        return ":".join([self.model, self.precision, *attention, *([self.kind] if self.kind != "eager" else [])])

    def overrides(self) -> list[str]:
        """train.py's overrides for this setting (its experiment, products, attention and step kind)."""
        out = [f"experiment=tatoeba_{self.model}", f"kernels.float32_matmul={PRECISIONS[self.precision][1]}"]
        out += [f"kernels.attention=[{','.join(self.attention)}]"] if self.attention else []
        return out + list(STEP_KINDS[self.kind].overrides)


@dataclass
class Trainee:
    """What one setting trains with: its module, optimiser and scheduler (built as training builds them), and how."""

    setting: Setting
    cfg: Any
    module: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any  # stepped after every update (a schedule of interval "step"), else None
    clip: float | None
    device: torch.device

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's context, as Lightning's bf16-mixed precision plugin makes it."""
        if self.setting.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()


Step = Callable[[Any], None]  # one training update on a batch


def eager_step(t: Trainee) -> Step:
    """What a training step does (Lightning's automatic optimisation of TranslationModule.training_step): the training
    loss under the precision's autocast, its finite check kept on the device, backward, gradient clipping to the total
    norm over the optimiser's parameters (as the module's ``configure_gradient_clipping`` and Lightning's clip:
    ``clip_grad_norm_``, foreach kernels on a GPU), the optimiser's step, the gradients set to None and the
    scheduler's step."""
    module, optimizer, scheduler, clip = t.module, t.optimizer, t.scheduler, t.clip
    params = [p for group in optimizer.param_groups for p in group["params"]]
    finite: list[torch.Tensor] = []

    def step(batch) -> None:
        with t.autocast():
            loss, _ = module.training_loss(batch)
        ok = torch.isfinite(loss.detach())
        finite[:] = [ok if not finite else finite[0] & ok]
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()

    return step


@dataclass(frozen=True)
class StepKind:
    """A kind of step: the config overrides its module needs, and how its step is made from the :class:`Trainee`
    (a CUDA-graph-captured step, say, would capture one graph per batch shape at its first call)."""

    overrides: tuple[str, ...]
    make: Callable[[Trainee], Step]


STEP_KINDS: dict[str, StepKind] = {
    "eager": StepKind(("compile.enabled=false",), eager_step),
    "compile": StepKind(("compile.enabled=true",), eager_step),  # the module's training loss is compiled
    # the loss's forward and backward captured as a CUDA graph per batch shape at its first call (in the warm-up),
    # replayed from then on (nmt/training/graphs.py); on a CPU the same static-shape loss, eager
    "graphs": StepKind(("compile.enabled=false", "compile.graphs=true"), eager_step),
}


def make_step(t: Trainee) -> Step:
    return STEP_KINDS[t.setting.kind].make(t)


def build(setting: Setting, cfg, tokenizer, device: torch.device) -> Trainee:
    """``setting``'s module and optimiser as training builds them: ``TranslationModule.from_config`` on the device,
    ``configure_optimizers`` seeing the trainer's precision and clipping (a stand-in for the Trainer)."""
    import lightning as L

    from nmt.training.module import TranslationModule

    L.seed_everything(1, verbose=False)
    module = TranslationModule.from_config(cfg, tokenizer).to(device)
    module.train()
    clip = cfg.trainer.get("gradient_clip_val")
    module._trainer = SimpleNamespace(  # what configure_optimizers reads of its trainer
        precision=PRECISIONS[setting.precision][0], gradient_clip_val=clip, strategy=None,
        estimated_stepping_batches=math.inf, callbacks=[],
    )  # fmt: skip
    try:
        configured = module.configure_optimizers()
    finally:
        module._trainer = None
    module.prepare_training_step(PRECISIONS[setting.precision][0], device)  # as setup("fit"): casts once, graphs
    scheduler = None
    if isinstance(configured, dict):
        lr = configured.get("lr_scheduler") or {}
        if lr.get("interval", "epoch") == "step":  # Lightning steps it after every update
            scheduler = lr["scheduler"]
        configured = configured["optimizer"]
    return Trainee(setting, cfg, module, configured, scheduler, float(clip) if clip else None, device)


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def kernels(t: Trainee) -> contextlib.AbstractContextManager:
    """The setting's attention backends and float32 products (``kernels``), as training applies them from setup."""
    return t.module.kernels.applied()
