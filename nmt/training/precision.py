"""``trainer.precision: auto``: the faster of float32 and bfloat16 mixed precision on the machine a run starts on,
measured there. Which is faster depends on the processor (a CPU with AVX512-BF16 or AMX may gain from bf16, or lose
to oneDNN's per-shape primitives; a GPU's tensor cores gain), so it is measured, not assumed."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.batching import Batch, BatchDataset, BatchPlan, TokenBucketSampler
from nmt.training.module import TranslationModule

log = logging.getLogger(__name__)

AUTO = "auto"
CHOSEN = "NMT_AUTO_PRECISION"  # the choice, for the processes Lightning starts for the other devices to take as it is
CANDIDATES = ("32-true", "bf16-mixed")  # what auto chooses between


@dataclass(frozen=True)
class Probe:
    """What the probe measured: seconds a training step (forward and backward) of the same batches took in each
    precision (the median of its rounds), and the choice."""

    seconds: dict[str, float]
    batches: int
    choice: str

    def describe(self) -> str:
        f32, bf16 = (self.seconds[c] for c in CANDIDATES)
        return (
            f"trainer.precision=auto: {self.choice} (a step of bf16-mixed took {f32 / bf16:.2f}x float32's speed "
            f"over {self.batches} batches of the training data: {bf16 * 1e3:.0f} ms against {f32 * 1e3:.0f} ms)"
        )


def probe_batches(datamodule, n: int) -> list[Batch]:
    """``n`` training batches spread over the plan's lengths (short to long), as the first epoch will meet them."""
    corpus = datamodule.corpus.splits["train"]
    limit = datamodule.max_sentences or math.inf
    plan = BatchPlan.cached(corpus, datamodule.max_tokens, limit)
    sampler = TokenBucketSampler(corpus.src_lens, corpus.tgt_lens, datamodule.max_tokens, False, plan=plan)
    picks = np.unique(np.linspace(0, len(sampler) - 1, n).round().astype(int))
    dataset = BatchDataset(corpus, pad_multiple=datamodule.pad_multiple)
    return [dataset[sampler.batch(int(k), 0)] for k in picks]


def _autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(module: TranslationModule, batches: list[Batch], device: torch.device, rounds: int = 1) -> Probe:
    """Time a forward and backward pass over ``batches`` in each candidate precision, in turns (so that a machine's
    changing load falls on both alike), after a pass of each that is not timed (first calls build kernels)."""
    model = copy.deepcopy(module.model).to(device).train()
    moved = [b.to(device) for b in batches]
    smoothing = module.label_smoothing

    def one_pass(precision: str) -> float:
        _synchronise(device)
        start = time.perf_counter()
        for b in moved:
            with _autocast(device, precision):
                loss, *_ = model.loss(b.src, b.src_len, b.tgt_in, b.tgt_out, smoothing,
                                      host_len=b.host.src, tgt_tokens=b.host.tgt_tokens)  # fmt: skip
            loss.backward()
        _synchronise(device)
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    with module.kernels.applied():
        for precision in CANDIDATES:
            one_pass(precision)
        times: dict[str, list[float]] = {p: [] for p in CANDIDATES}
        for _ in range(rounds):
            for precision in CANDIDATES:
                times[precision].append(one_pass(precision))
    seconds = {p: statistics.median(t) / len(moved) for p, t in times.items()}
    return Probe(seconds, len(moved), min(CANDIDATES, key=seconds.__getitem__))


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
    accelerator = trainer_cfg.get("accelerator", "auto")
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    started = time.perf_counter()
    probe = measure(module, probe_batches(datamodule, batches), torch.device("cuda" if on_gpu else "cpu"))
    trainer_cfg.precision = os.environ[CHOSEN] = probe.choice
    log.info("%s; probe %.0f s", probe.describe(), time.perf_counter() - started)
    return probe.choice
