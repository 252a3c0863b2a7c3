"""Training steps of several settings timed side by side in one process, on a fixed set of real batches whose every
shape was seen before the clock starts: a speed figure with its spread, which one call can trust.

    python -m bench.speed.step_speed [--settings transformer:tf32 transformer:bf16 ...] [--max-tokens 7440 ...]
                                [--batches 24] [--blocks 12] [--shapes K] [--time-limit S] [--accelerator gpu]

A setting is MODEL:PRECISION[:OPTION...]: the model (bahdanau, luong, transformer: the experiment=tatoeba_MODEL
config), the precision (tf32: float32 with TF32 products, kernels.float32_matmul=high; highest: IEEE float32; bf16:
bf16-mixed autocast as Lightning's, products in bf16 on float32 weights) and options: ``attention=A+B+...`` (the
kernels.attention backends, most preferred first, e.g. attention=cudnn+flash+efficient+math) and a step kind of
:data:`STEP_KINDS` (``compile``: compile.enabled=true, nmt/training/compiled.py; ``graphs``: compile.graphs=true,
nmt/training/graphs.py). Each setting has its own module and
optimiser, built as training builds them (``TranslationModule.from_config``, ``configure_optimizers`` seeing the
precision and clipping a Trainer would give it: fused or not as training's), and its step is what a training step
does: the training loss under the precision's autocast, backward, clipping to ``trainer.gradient_clip_val``, the
optimiser's and the scheduler's step, the gradients set to None.

The batches are the training sampler's at each --max-tokens with data.pad_multiple=8 (and data.shapes=K with --shapes):
one epoch's, grouped by padded shape (B, S, T), of which --batches are kept (one of each shape where there are no more
shapes than that, the rest spread evenly over the epoch's batches sorted by shape), moved to the device once. Every
setting first runs each batch once (warm-up: cuDNN plans, kernels chosen, graphs compiled, once per shape), then once
more, timed (its block's estimate); then --blocks blocks, each running every setting once over the whole batch list, in
an order rotated by one each block (drift spreads evenly over the settings), each setting's block timed on the host
after a device synchronise. Per setting: the median real target tokens/s of its blocks (the batches' host counts), the
blocks' IQR/median, the median ms a step, host ms a step (the Python step's own time, unsynchronised: what the host
needs to queue it), and on a GPU the share of the block it kept the GPU busy (the device time of its kernels and copies
in one profiled pass, torch.profiler, over its median block's wall time) with its GPU operations a step; its model FLOP
rate as a share of this card's GEMM rate in the same precision, measured in the same process. Ratios are between
settings of one model from the same blocks (the median of the per-block ratios), marked trusted where both settings'
IQR/median is at most 5% over at least 10 blocks. The JSON is written after every setting's warm-up and every block, so
that a run stopped from outside keeps what it measured (``state`` says where it was); --time-limit ends it itself: no
new warm-up where the longest of its kind so far would not end within 60% of it, no block that would pass it (by the
last block's time, or the warm-ups' estimates).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from bench.common import compose, corpus_overrides, gemm_gflops, options, peak_rss_gib, table, write_json
from bench.speed.step_batches import PAD_MULTIPLE, Batches, draw_batches
from bench.speed.step_settings import PRECISIONS, Setting, Step, Trainee, build, kernels, make_step, synchronise

TRUST_IQR = 0.05  # a ratio is trusted where both settings' blocks spread at most this much (IQR / median) ...
TRUST_BLOCKS = 10  # ... over at least this many blocks
WARMUP_SHARE = 0.6  # of --time-limit: no warm-up started that the last of its kind says would end past it


def timed_pass(step: Step, t: Trainee, batches: list) -> tuple[float, float]:
    """(wall seconds, host seconds) of one pass over ``batches``: the wall from a synchronised device to a
    synchronised device, the host's the sum of the step calls' own times (nothing synchronised between them)."""
    synchronise(t.device)
    host, started = 0.0, time.perf_counter()
    for batch in batches:
        t0 = time.perf_counter()
        step(batch)
        host += time.perf_counter() - t0
    synchronise(t.device)
    return time.perf_counter() - started, host


def device_activity(events) -> tuple[float, int]:
    """(microseconds, count) of the device's own activity among profiler events: kernels, copies and fills (their
    self device time; user annotations left out)."""
    from torch.autograd import DeviceType

    found = [e for e in events if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    return float(sum(e.self_device_time_total for e in found)), len(found)


def profiled_pass(step: Step, t: Trainee, batches: list) -> tuple[float, int]:
    """(device seconds, device operations) of one pass over ``batches`` under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    synchronise(t.device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for batch in batches:
            step(batch)
        synchronise(t.device)
    us, count = device_activity(prof.events())
    return us / 1e6, count


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(np.asarray(values, np.float64), [25, 50, 75])
    return float(q1), float(q2), float(q3)


def spread(values: list[float]) -> float | None:
    """IQR / median of ``values`` (None for fewer than 2)."""
    if len(values) < 2:
        return None
    q1, q2, q3 = quartiles(values)
    return (q3 - q1) / q2 if q2 else None


# --- the run -------------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One setting at one --max-tokens: what its warm-up, profiled pass and blocks gave."""

    setting: Setting
    batches: Batches
    walls: list[float] = field(default_factory=list)  # seconds of each block
    hosts: list[float] = field(default_factory=list)  # host seconds of each block's steps
    warmup_s: float | None = None
    estimate_s: float | None = None  # the warm-up's timed pass: what a block of it takes
    device_s: float | None = None  # device activity of the profiled pass
    device_ops: int | None = None
    peak_gpu_gib: float | None = None
    compiled: dict | None = None  # a compiled step's graphs and compiling seconds

    @property
    def key(self) -> str:
        return f"{self.setting.name}@{self.batches.max_tokens}"

    def rates(self) -> list[float]:
        return [self.batches.tokens / w for w in self.walls]

    def row(self, gemm: dict[str, float]) -> dict:
        n, rates = len(self.batches.device), self.rates()
        s = self.setting
        row = {"setting": s.name, "model": s.model, "precision": s.precision, "attention": list(s.attention or []),
               "kind": s.kind, "max_tokens": self.batches.max_tokens, "blocks": len(self.walls),
               "warmup_s": None if self.warmup_s is None else round(self.warmup_s, 2),
               **({"compiled": self.compiled} if self.compiled else {})}  # fmt: skip
        if not rates:
            return row
        wall = statistics.median(self.walls)
        flops = self.batches.flops[s.model] / wall
        iqr = spread(rates)
        row |= {
            "tgt_tokens_per_s": round(statistics.median(rates), 1),
            "iqr_over_median": None if iqr is None else round(iqr, 4),
            "step_ms": round(wall / n * 1e3, 3),
            "host_ms": round(statistics.median(self.hosts) / n * 1e3, 3),
            "gpu_busy": None if self.device_s is None else round(self.device_s / wall, 4),
            "gpu_ms": None if self.device_s is None else round(self.device_s / n * 1e3, 3),
            "gpu_ops_per_step": None if self.device_ops is None else round(self.device_ops / n, 1),
            "tgt_tokens_per_batch": round(self.batches.tokens / n, 1),
            "model_gflops_per_s": round(flops / 1e9, 1),
            "fraction_of_gemm": round(flops / 1e9 / gemm[s.precision], 4) if gemm.get(s.precision) else None,
            "peak_gpu_gib": self.peak_gpu_gib,
            "block_seconds": [round(w, 5) for w in self.walls],
            "block_host_seconds": [round(h, 5) for h in self.hosts],
        }
        return row


def ratios(runs: list[Run]) -> list[dict]:
    """Every ordered pair of runs of one model and --max-tokens: the median over their common blocks of the per-block
    ratio of tokens/s, its IQR/median, and whether it is trusted (both runs' IQR/median at most :data:`TRUST_IQR`
    over at least :data:`TRUST_BLOCKS` blocks)."""
    out = []
    for a, b in itertools.permutations(runs, 2):
        same = (a.setting.model, a.batches.max_tokens) == (b.setting.model, b.batches.max_tokens)
        blocks = min(len(a.walls), len(b.walls))
        if not same or not blocks:
            continue
        per_block = [ra / rb for ra, rb in zip(a.rates()[:blocks], b.rates()[:blocks])]
        spreads = [spread(a.rates()), spread(b.rates())]
        trusted = blocks >= TRUST_BLOCKS and all(x is not None and x <= TRUST_IQR for x in spreads)
        iqr = spread(per_block)
        out.append({"a": a.setting.name, "b": b.setting.name, "max_tokens": a.batches.max_tokens,
                    "value": round(statistics.median(per_block), 4), "blocks": blocks,
                    "iqr_over_median": None if iqr is None else round(iqr, 4),
                    "iqr_over_median_a": spreads[0], "iqr_over_median_b": spreads[1], "trusted": trusted})  # fmt: skip
    return out


def find_run(payload: dict, setting: str, max_tokens: int) -> dict | None:
    """A run's row in a step_speed JSON, or None."""
    return next((r for r in payload.get("runs", []) if (r["setting"], r["max_tokens"]) == (setting, max_tokens)), None)


def find_ratio(payload: dict, a: str, b: str, max_tokens: int) -> dict | None:
    """The ratio ``a`` / ``b`` at ``max_tokens`` in a step_speed JSON, or None."""
    key = (a, b, max_tokens)
    return next((r for r in payload.get("ratios", []) if (r["a"], r["b"], r["max_tokens"]) == key), None)


class Recorder:
    """The JSON of the run so far, rewritten at each stage (a run stopped from outside keeps what it measured)."""

    def __init__(self, args, device: torch.device):
        self.args, self.device = args, device
        self.sizes: list[Batches] = []
        self.runs: list[Run] = []
        self.gemm: dict[str, float] = {}
        self.state: dict = {"phase": "batches"}
        self.skipped: dict[str, str] = {}  # setting -> why it was not measured
        self.profile_error: str | None = None  # why GPU busy was not measured, where the profiler failed

    def write(self, complete: bool = False) -> None:
        where = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else None
        from bench.common import cpu_model

        write_json(self.args.json, {
            "device": where or f"{cpu_model()} ({self.args.threads} threads)",
            "accelerator": self.args.accelerator,
            "settings": [s.name for s in self.args.settings],
            "blocks_asked": self.args.blocks,
            "batches_asked": self.args.batches,
            "time_limit_s": self.args.time_limit,
            "trust": {"iqr_over_median": TRUST_IQR, "blocks": TRUST_BLOCKS},
            "gemm_gflops_per_s": {p: round(g, 1) for p, g in self.gemm.items()},
            "sizes": [b.info for b in self.sizes],
            "runs": [r.row(self.gemm) for r in self.runs],
            "ratios": ratios([r for r in self.runs if r.walls]),
            "not_measured": self.skipped,
            "profile_error": self.profile_error,
            "state": self.state,
            "peak_rss_gib": round(peak_rss_gib(), 3),
            "complete": complete,
        })  # fmt: skip


def warm_up(rec: Recorder, s: Setting, cfg, tokenizer, device: torch.device) -> tuple[Trainee, Step]:
    """``s`` built, and run over every batch of every size (its first meeting of each shape), then timed over them
    once more (its block's estimate); its runs added to ``rec``."""
    t0 = time.monotonic()
    t = build(s, cfg, tokenizer, device)
    step = make_step(t)
    gpu = device.type == "cuda"
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    with kernels(t):
        for b in rec.sizes:
            for batch in b.device:
                step(batch)
        estimates = [timed_pass(step, t, b.device)[0] for b in rec.sizes]
    seconds = time.monotonic() - t0
    done = t.module._train_loss  # the compiled loss, where compiled: its graphs and compiling seconds
    compiled = (
        None if done is None else {"graphs": done.graphs, "seconds": round(done.seconds, 1), "failed": done.failed}
    )
    for b, estimate in zip(rec.sizes, estimates):
        peak = round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if gpu else None
        rec.runs.append(Run(s, b, warmup_s=seconds, estimate_s=estimate, peak_gpu_gib=peak, compiled=compiled))
    return t, step


def timed_blocks(rec: Recorder, trainees: dict, order: list[Run], blocks: int, limit: float | None, elapsed) -> None:
    """``blocks`` blocks, each every run once over its batches in an order rotated by one each block; none that its
    estimate (the last block's time, or the warm-up's timed pass) says would end past ``limit``."""
    last = sum(r.estimate_s or 0.0 for r in order)
    for k in range(blocks):
        if limit and elapsed() + last > limit:
            rec.state = {"phase": "blocks", "stopped": f"the time limit: {k} of {blocks} blocks, "
                         f"{elapsed():.0f} s of {limit:.0f} s gone, a block takes {last:.1f} s"}  # fmt: skip
            break
        t_block = time.monotonic()
        for run in order[k % len(order) :] + order[: k % len(order)]:
            t, step = trainees[run.setting]
            with kernels(t):
                wall, host = timed_pass(step, t, run.batches.device)
            run.walls.append(wall)
            run.hosts.append(host)
        last = time.monotonic() - t_block
        rec.state = {"phase": "blocks", "blocks_done": k + 1}
        rec.write()


def measure_gemm(precisions: set[str], device: torch.device, n: int) -> dict[str, float]:
    """GFLOP/s of a GEMM in each precision's products (bf16; float32 with TF32 or IEEE products)."""
    from nmt.hardware import float32_products

    out = {}
    for p in sorted(precisions):
        with float32_products(PRECISIONS[p][1]):
            dtype = torch.bfloat16 if p == "bf16" else torch.float32
            out[p] = gemm_gflops(n, device=device.type, dtype=dtype)
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--settings", nargs="+", type=Setting.parse, metavar="MODEL:PRECISION[:OPTION]",
                   default=[Setting.parse(s) for s in ("transformer:tf32", "transformer:bf16")],
                   help="the settings compared (default: transformer:tf32 transformer:bf16)")  # fmt: skip
    p.add_argument("--max-tokens", type=int, nargs="+", default=[7440], help="padded tokens a batch (default: 7440)")
    p.add_argument("--batches", type=int, default=24, help="batches kept of each epoch (default: %(default)s)")
    p.add_argument("--blocks", type=int, default=12, help="timed blocks (default: %(default)s)")
    p.add_argument("--shapes", type=int, help="data.shapes=K: batches padded to at most K shapes (where data has it)")
    p.add_argument("--time-limit", type=float, help="seconds the run may take: it ends itself within them")
    p.add_argument("--no-profile", action="store_true", help="no profiled pass (GPU busy not measured)")
    p.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"], help="cpu, or gpu (one GPU, trainer=gpu)")
    options(p, "data", "cache", "threads", "json")
    p.add_argument("--gemm-n", type=int, default=1024, help="the GEMM's matrix size (a GPU's: at least 8,192)")
    p.add_argument("overrides", nargs="*", help="more train.py overrides for every setting, e.g. ++model.dropout=0")
    return p


def warm_all(rec: Recorder, args, cfgs: dict, tokenizer, device: torch.device, elapsed) -> dict:
    """Every setting built and warmed up, in turn, but none that the time limit says would not end in time (the
    longest warm-up of its kind so far); the JSON written after each."""
    trainees: dict[Setting, tuple[Trainee, Step]] = {}
    warm: dict[str, float] = {}  # step kind -> the longest warm-up of one of its settings so far
    for s in args.settings:
        if args.time_limit and elapsed() + warm.get(s.kind, 0.0) > WARMUP_SHARE * args.time_limit:
            rec.skipped[s.name] = (f"not warmed up: {elapsed():.0f} s of the {args.time_limit:.0f} s limit gone, "
                                   f"a warm-up of its kind took {warm.get(s.kind, 0):.0f} s")  # fmt: skip
            continue
        rec.state = {"phase": "warm-up", "setting": s.name, "since_s": round(elapsed(), 1)}
        if s.kind != "eager":  # a long warm-up (compiling): seen to have begun
            rec.write()
        t0 = time.monotonic()
        trainees[s] = warm_up(rec, s, cfgs[s], tokenizer, device)
        warm[s.kind] = max(warm.get(s.kind, 0.0), time.monotonic() - t0)
        rec.write()
    return trainees


def profile_all(rec: Recorder, trainees: dict, order: list[Run]) -> None:
    """One profiled pass of each run, untimed: a profiler that cannot start (no CUPTI, say) costs GPU busy alone."""
    rec.state = {"phase": "profile"}
    for run in order:
        t, step = trainees[run.setting]
        try:
            with kernels(t):
                run.device_s, run.device_ops = profiled_pass(step, t, run.batches.device)
        except RuntimeError as e:
            rec.profile_error = f"{type(e).__name__}: {str(e).strip()[:200]}"
            break


def main() -> None:
    from omegaconf import OmegaConf

    p = parser()
    args = p.parse_args()
    if len({s.name for s in args.settings}) < len(args.settings):
        p.error("argument --settings: a setting is named twice")
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    gpu = args.accelerator == "gpu"
    device = torch.device("cuda" if gpu else "cpu")
    base = ["trainer=gpu"] if gpu else []
    base += [f"data.pad_multiple={PAD_MULTIPLE}", "data.num_workers=0", *corpus_overrides(args.data, args.cache)]
    base += [f"data.shapes={args.shapes}"] if args.shapes is not None else []
    cfgs = {s: compose([*s.overrides(), *base, f"data.max_tokens={args.max_tokens[0]}", *args.overrides])
            for s in args.settings}  # fmt: skip
    data = OmegaConf.to_container(cfgs[args.settings[0]].data, resolve=True)
    if other := [s.name for s, c in cfgs.items() if OmegaConf.to_container(c.data, resolve=True) != data]:
        p.error(f"argument --settings: {', '.join(other)} read other data than {args.settings[0].name}")
    rec = Recorder(args, device)
    models = {s.model: OmegaConf.to_container(cfgs[s].model, resolve=True) for s in args.settings}
    dm = None
    for n in args.max_tokens:
        cfg = compose([*args.settings[0].overrides(), *base, f"data.max_tokens={n}", *args.overrides])
        batches, dm = draw_batches(cfg, args.batches, device, models)
        rec.sizes.append(batches)
    rec.gemm = measure_gemm({s.precision for s in args.settings}, device, args.gemm_n)
    rec.state = {"phase": "warm-up"}
    rec.write()
    elapsed = lambda: time.monotonic() - started  # noqa: E731
    trainees = warm_all(rec, args, cfgs, dm.tokenizer, device, elapsed)
    order = list(rec.runs)
    if gpu and not args.no_profile:
        profile_all(rec, trainees, order)
    timed_blocks(rec, trainees, order, args.blocks, args.time_limit, elapsed)
    rec.state |= {"phase": "done", "seconds": round(elapsed(), 1)}
    rec.write(complete=not rec.skipped)
    report(rec)


def report(rec: Recorder) -> None:
    """The table of runs, then the ratios."""
    cols = ["setting", "max_tokens", "blocks", "tgt_tokens_per_s", "iqr_over_median", "step_ms", "host_ms",
            "gpu_busy", "gpu_ops_per_step", "fraction_of_gemm", "warmup_s"]  # fmt: skip
    print(table([r.row(rec.gemm) for r in rec.runs], cols))
    if found := ratios([r for r in rec.runs if r.walls]):
        print(table([r | {"ratio": f"{r['a']} / {r['b']}"} for r in found],
                    ["ratio", "max_tokens", "value", "iqr_over_median", "blocks", "trusted"]))  # fmt: skip
    for name, why in rec.skipped.items():
        print(f"{name}: {why}")


if __name__ == "__main__":
    main()
