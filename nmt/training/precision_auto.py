"""``trainer.precision: auto``: the faster of float32 and bfloat16 mixed precision on the machine a run starts on,
measured there. Which is faster depends on the processor (a CPU with AVX512-BF16 or AMX may gain from bf16, or lose
to oneDNN's per-shape primitives; a GPU's tensor cores gain), so it is measured, not assumed. A CPU without bfloat16
instructions takes float32 unmeasured: there its bf16 products are emulated, tens of times slower."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import statistics
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from nmt.data.batching import BatchPlan, TokenBucketSampler
from nmt.data.collate import Batch, BatchDataset
from nmt.hardware import Kernels, cpu_computes_bf16, trains_on_cpu
from nmt.training.module import TranslationModule

log = logging.getLogger(__name__)

AUTO = "auto"
CHOSEN = "NMT_AUTO_PRECISION"  # the choice, for the processes Lightning starts for the other devices to take as it is
CANDIDATES = ("32-true", "bf16-mixed")  # what auto chooses between
CUTOFF = 4.0  # a candidate's untimed pass stopped past this many times the first's: it cannot win, and the probe
# would cost minutes (emulated bf16 products run tens of times slower than float32's)


@dataclass(frozen=True)
class Probe:
    """What the probe measured: seconds a training step (forward and backward) of the same batches took in each
    precision (the median of its rounds), and the choice."""

    seconds: dict[str, float]
    batches: int
    choice: str

    def describe(self) -> str:
        f32, bf16 = (self.seconds[c] for c in CANDIDATES)
        if math.isinf(bf16):
            return (
                f"trainer.precision=auto: {self.choice} (bf16-mixed stopped after more than {CUTOFF:g}x float32's "
                f"time over {self.batches} batches of the training data: float32 {f32 * 1e3:.0f} ms a step)"
            )
        return (
            f"trainer.precision=auto: {self.choice} (a step of bf16-mixed took {f32 / bf16:.2f}x float32's speed "
            f"over {self.batches} batches of the training data: {bf16 * 1e3:.0f} ms against {f32 * 1e3:.0f} ms)"
        )


def probe_batches(datamodule, n: int, spread: tuple[float, float] = (0.0, 1.0)) -> list[Batch]:
    """``n`` training batches spread over the plan's lengths (short to long), as the first epoch will meet them;
    ``spread``: the share of the plan they are taken from (``(0.2, 0.8)``: the typical batches, not the extremes)."""
    corpus = datamodule.corpus.splits["train"]
    limit = datamodule.max_sentences or math.inf
    plan = BatchPlan.cached(corpus, datamodule.max_tokens, limit)
    sampler = TokenBucketSampler(corpus.src_lens, corpus.tgt_lens, datamodule.max_tokens, False, plan=plan)
    last = len(sampler) - 1
    picks = np.unique(np.linspace(spread[0] * last, spread[1] * last, n).round().astype(int))
    dataset = BatchDataset(corpus, pad_multiple=datamodule.pad_multiple)
    return [dataset[sampler.batch(int(k), 0)] for k in picks]


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timer(module: TranslationModule, batches: list[Batch], device: torch.device):
    """A function that times one forward and backward pass of a copy of the model over ``batches`` in a precision,
    under the kernels it is given (the model itself is left as it was)."""
    model = copy.deepcopy(module.model).to(device).train()
    moved = [b.to(device) for b in batches]
    smoothing = module.label_smoothing

    def one_pass(precision: str, kernels: Kernels, deadline: float = math.inf) -> float:
        """Seconds of the pass; inf where it ran past ``deadline`` seconds (stopped after that batch)."""
        with kernels.applied():
            _synchronise(device)
            start = time.perf_counter()
            for b in moved:
                with _autocast(device, precision):
                    loss, *_ = model.loss(b.src, b.src_len, b.tgt_in, b.tgt_out, smoothing,
                                          host_len=b.host.src, tgt_tokens=b.host.tgt_tokens)  # fmt: skip
                loss.backward()
                if time.perf_counter() - start > deadline:
                    break
            _synchronise(device)
        model.zero_grad(set_to_none=True)
        took = time.perf_counter() - start
        return math.inf if took > deadline else took

    return one_pass


def measure(module: TranslationModule, batches: list[Batch], device: torch.device, rounds: int = 1) -> Probe:
    """Time a forward and backward pass over ``batches`` in each candidate precision, in turns (so that a machine's
    changing load falls on both alike), after a pass of each that is not timed (first calls build kernels). A
    candidate whose untimed pass runs past :data:`CUTOFF` times the first one's is not timed: the first wins."""
    one_pass = _timer(module, batches, device)
    first = one_pass(CANDIDATES[0], module.kernels)
    if math.isinf(one_pass(CANDIDATES[1], module.kernels, deadline=CUTOFF * first)):
        return Probe({CANDIDATES[0]: first / len(batches), CANDIDATES[1]: math.inf}, len(batches), CANDIDATES[0])
    times: dict[str, list[float]] = {p: [] for p in CANDIDATES}
    for _ in range(rounds):
        for precision in CANDIDATES:
            times[precision].append(one_pass(precision, module.kernels))
    seconds = {p: statistics.median(t) / len(batches) for p, t in times.items()}
    return Probe(seconds, len(batches), min(CANDIDATES, key=seconds.__getitem__))


CPU_KERNELS = ("flash", "math")  # the attention kernels a CPU has: which is faster depends on the CPU and precision


def cpu_attention(module: TranslationModule, datamodule, precision: str, batches: int = 3, rounds: int = 2) -> str:
    """On a CPU, where ``kernels.attention`` allows both of :data:`CPU_KERNELS` and the model has scaled-dot
    attention: flash or not, whichever trains faster, measured on typical training batches in the run's precision
    (bf16 can make the CPU's flash kernel several times slower than the plain products; float32 faster). A CPU takes
    flash whenever it is allowed, whatever the order, so the choice of math leaves flash out of the module's kernels.
    A line for the log, or "" where there was nothing to choose."""
    from nmt.models.attention import DotProductAttention

    kernels = module.kernels
    if not set(CPU_KERNELS) <= set(kernels.attention) or not any(
        isinstance(m, DotProductAttention) for m in module.model.modules()
    ):
        return ""
    log.info("kernels.attention: timing flash against math attention on this CPU in %s (%d passes of %d training "
             "batches each), to train with the faster", precision, rounds + 1, batches)  # fmt: skip
    started = time.perf_counter()
    one_pass = _timer(module, probe_batches(datamodule, batches, spread=(0.2, 0.8)), torch.device("cpu"))
    ways = {"flash": kernels, "math": replace(kernels, attention=tuple(k for k in kernels.attention if k != "flash"))}
    for way in ways.values():
        one_pass(precision, way)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            times[name].append(one_pass(precision, way))
    seconds = {name: statistics.median(t) for name, t in times.items()}
    best = min(seconds, key=seconds.__getitem__)
    module.kernels = ways[best]
    took = ", ".join(f"{name} {v * 1e3:.0f} ms" for name, v in seconds.items())
    return (f"kernels.attention on this CPU in {precision}: {best} ({took} a pass of {batches}"
            f" batches); now {', '.join(module.kernels.attention)}; probe {time.perf_counter() - started:.0f} s")


def resolve(trainer_cfg, module: TranslationModule, datamodule, batches: int = 4) -> str | None:
    """Where ``trainer.precision`` is ``auto``: the faster candidate, written into ``trainer_cfg`` and logged; else
    None. Measured on the device the trainer will use (a GPU where ``trainer.accelerator`` asks for one or finds
    one) by each node's first process (every run of a sweep anew); the processes Lightning starts for its other
    devices take its choice."""
    if str(trainer_cfg.get("precision")) != AUTO:
        return None
    if os.environ.get("LOCAL_RANK", "0") != "0" and (chosen := os.environ.get(CHOSEN)):  # started by Lightning
        trainer_cfg.precision = chosen
        return chosen
    started = time.perf_counter()
    on = "cpu" if trains_on_cpu(trainer_cfg.get("accelerator", "auto")) else "cuda"
    if on == "cpu" and not cpu_computes_bf16():  # nothing to measure: emulated bf16 is many times slower
        trainer_cfg.precision = os.environ[CHOSEN] = CANDIDATES[0]
        log.info("trainer.precision=auto: %s (this CPU has no bfloat16 instructions, AVX512-BF16, AMX or Arm's BF16: "
                 "its bf16 products would be emulated; not measured)", CANDIDATES[0])
        return CANDIDATES[0]
    log.info("trainer.precision=auto: timing %s on %s training batches (%s), to train in the faster",
             " and ".join(CANDIDATES), batches, on)  # fmt: skip
    probe = measure(module, probe_batches(datamodule, batches), torch.device(on))
    trainer_cfg.precision = os.environ[CHOSEN] = probe.choice
    log.info("%s; probe %.0f s", probe.describe(), time.perf_counter() - started)
    return probe.choice
