"""The GPU check's summary: every target it answers (a ratio or a value, its threshold, pass or fail), worked out
from the steps' figures; a figure missing makes its target "not measured" and says why, never an error. The speed
figures are bench/speed/step_speed.py's: each with its blocks' IQR/median and whether it is trusted (at most 5% over
at least 10 blocks, both settings of a ratio); a ratio target passes or fails only where trusted, else it is
"untrusted".

    summary = summarise(speed, check.steps, default, joeynmt, reference, sizes)
    summary["bf16_vs_tf32.transformer.16000"]  # {"what": ..., "value": 1.8, "threshold": ">= 1.3", "pass": True, ...}
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from bench.common import ROOT
from bench.gpu.gpu_steps import CUDNN_SETTING, JOEYNMT_BATCH, SIZES
from bench.speed.step_speed import TRUST_BLOCKS, TRUST_IQR, find_ratio, find_run

GRAPHS = ":graphs"  # the step kind of compile.graphs=true (bench/speed/step_speed.py)
PRECISIONS = ("tf32", "bf16")  # what trainer=gpu's precision (auto) chooses between: the faster here
REFERENCE = ROOT / "bench" / "results" / "gpu" / "default_run_cpu_gpu_schedule.json"  # trainer=gpu's batch and
# schedule trained in float32 on a CPU: the default run's BLEU is compared with it
DEFAULT_RUN_WALL_S = 112  # the H200's default run before these defaults (default_run_h200_ac4e2cb.json)
STEP_MS = {"tf32": 8.0, "bf16": 6.0}  # the 6+6 Transformer's step at 7,440 tokens, at most
HOST_MS = 2.0  # the host's time to queue a step, at most
GPU_BUSY = 0.9  # the share of a step's wall time the GPU works, at least
LARGE_TOKENS_PER_S = 1e6  # the Transformer in bf16 at the largest size, real target tokens/s, at least
BF16_VS_TF32 = {"transformer": 1.3, "bahdanau": 1.0, "luong": 1.0}  # at the large sizes (the RNNs: at 7,440)

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
    "|x| <=": lambda v, t: abs(v) <= t,
}


@dataclass(frozen=True)
class Target:
    """A figure the GPU check answers: its key, what it is and its threshold (none: reported, not judged)."""

    key: str
    what: str
    op: str | None = None
    threshold: float | None = None
    ratio: bool = False  # a ratio of two speed runs: judged only where ``trusted``

    def judged(self, value: float | None, why: str = "", trusted: bool | None = None, **inputs) -> dict:
        """This target's entry: its value and pass/fail, or "not measured" and why; ``trusted`` (of a speed figure:
        its blocks spread little enough) beside it, and for a ratio where it is False "untrusted" and why instead of
        pass or fail."""
        entry: dict = {"what": self.what, "value": None if value is None else round(value, 3)}
        entry["threshold"] = None if self.op is None else f"{self.op} {self.threshold:g}"
        if value is None:
            entry |= {"pass": None, "status": "not measured", "why": why or "no figure"}
        elif self.op is None:
            entry |= {"pass": None, "status": "info"}
        elif self.ratio and trusted is False:
            entry |= {"pass": None, "status": "untrusted", "why": why}
        else:
            entry["pass"] = bool(OPS[self.op](value, self.threshold))
            entry["status"] = "pass" if entry["pass"] else "fail"
        entry |= {"trusted": trusted} if trusted is not None else {}
        return entry | ({"inputs": inputs} if inputs else {})


def step_why(steps: dict[str, dict], name: str) -> str:
    """Why step ``name`` gave no figure, in a few words."""
    step = steps.get(name)
    if step is None:
        return f"step {name} did not run"
    if step.get("status") == "ok":
        return f"step {name} gave no such figure"
    return f"step {name} {step.get('status')}" + (f" ({step['why']})" if step.get("why") else "")


def missing_why(payload: dict, steps: dict, part: str, setting: str) -> str:
    """Why ``part``'s JSON has no blocks of ``setting``: what step_speed.py said of it, or where it was stopped."""
    if why := (payload.get("not_measured") or {}).get(setting):
        return f"step {part}: {setting} {why}"
    state = payload.get("state") or {}
    if payload and state.get("phase") not in (None, "done"):
        where = ", ".join(f"{k} {v}" for k, v in state.items())
        return f"{step_why(steps, part)}; step_speed.py stopped at: {where}"
    return step_why(steps, part)


Figure = tuple[float | None, str]  # a value, or None and why there is none


@dataclass(frozen=True)
class Speed:
    """One run's figures (a step_speed.py row) or why there is none."""

    row: dict | None
    why: str = ""

    def get(self, key: str) -> Figure:
        value = None if self.row is None else self.row.get(key)
        if value is not None:
            return value, ""
        return None, self.why or f"no {key} in {self.row['setting']}'s run (none on a CPU, nor without a profiled pass)"

    @property
    def trusted(self) -> bool | None:
        """Whether its blocks spread little enough (:data:`TRUST_IQR` over :data:`TRUST_BLOCKS`); None without."""
        if self.row is None or self.row.get("iqr_over_median") is None:
            return None
        return self.row["iqr_over_median"] <= TRUST_IQR and self.row.get("blocks", 0) >= TRUST_BLOCKS

    def inputs(self) -> dict:
        row = self.row or {}
        return {k: row.get(k) for k in ("tgt_tokens_per_s", "iqr_over_median", "blocks", "step_ms", "host_ms",
                                        "gpu_busy", "gpu_ops_per_step", "fraction_of_gemm")}  # fmt: skip


@dataclass(frozen=True)
class Figures:
    """What the steps gave: ``speed`` (step_speed.py's JSON by step), ``steps`` (the step records by name),
    ``default`` (the default run's figures), ``joeynmt`` (parse_train_log.py's by model), ``reference`` (the CPU
    reference run's results.json) and ``sizes`` (the sizes the runs used, by the GPU's size they stand for)."""

    speed: dict
    steps: dict
    default: dict
    joeynmt: dict
    reference: dict
    sizes: dict[int, int]

    def part(self, n: int, compiled: bool = False) -> str:
        """The speed step that measures size ``n``."""
        return "speed_compiled" if compiled else ("speed_7440" if n == SIZES[0] else "speed_large")

    def run(self, setting: str, n: int, compiled: bool = False) -> Speed:
        part = self.part(n, compiled)
        payload = self.speed.get(part) or {}
        row = find_run(payload, setting, self.sizes[n])
        if row is not None and row.get("blocks"):
            return Speed(row)
        return Speed(None, missing_why(payload, self.steps, part, setting))

    def ratio(self, a: str, b: str, n: int, compiled: bool = False) -> tuple[Figure, dict]:
        """(a / b of the same blocks, or why not; its inputs: both runs' figures, its spread and trust)."""
        part = self.part(n, compiled)
        found = find_ratio(self.speed.get(part) or {}, a, b, self.sizes[n])
        ra, rb = self.run(a, n, compiled), self.run(b, n, compiled)
        inputs = {"a": a, "b": b, "max_tokens": self.sizes[n]}
        for side, run in (("a", ra), ("b", rb)):
            inputs |= {f"{side}_{k}": run.get(k)[0] for k in ("tgt_tokens_per_s", "iqr_over_median")}
        if found is None:
            return (None, ra.why or rb.why or step_why(self.steps, part)), inputs
        inputs |= {"blocks": found["blocks"], "iqr_over_median": found["iqr_over_median"], "trusted": found["trusted"]}
        return (found["value"], ""), inputs


def judged(target: Target, figure: Figure, **inputs) -> dict[str, dict]:
    """``target``'s entry by its key."""
    return {target.key: target.judged(*figure, **inputs)}


def judged_ratio(target: Target, figure: Figure, inputs: dict) -> dict[str, dict]:
    """A ratio target's entry: judged where trusted, "untrusted" (and why) where not."""
    inputs = dict(inputs)
    trusted = inputs.pop("trusted", None)
    why = figure[1]
    if trusted is False and figure[0] is not None:
        spreads = ", ".join(f"{inputs[side]} {inputs[f'{side}_iqr_over_median'] or 0:.1%}" for side in ("a", "b"))
        why = (f"blocks' IQR/median {spreads} over {inputs.get('blocks')} blocks (trusted: at most {TRUST_IQR:.0%} "
               f"over at least {TRUST_BLOCKS})")  # fmt: skip
    return {target.key: target.judged(figure[0], why, trusted, **inputs)}


def setting(model: str, precision: str) -> str:
    return f"{model}:{precision}"


def speed_targets(f: Figures) -> dict[str, dict]:
    """The 6+6 Transformer at 7,440 tokens in TF32 and bf16, eager and with CUDA graphs (``:graphs``, keys ending in
    ``.graphs``): ms a step, host ms a step, GPU busy; its bf16 tokens/s at the largest size, both ways."""
    out, m, big = {}, SIZES[0], SIZES[-1]
    for kind, label in (("", ""), (GRAPHS, ", CUDA graphs (compile.graphs=true)")):
        for p in PRECISIONS:
            run = f.run(setting("transformer", p) + kind, m)
            extra = {"trusted": run.trusted, **run.inputs(), "max_tokens": f.sizes[m]}
            end = f"{m}.{p}{kind.replace(':', '.')}"
            what = f"ms a step, Transformer 6+6, {p}{label}, {m:,} padded tokens (median of the blocks)"
            out |= judged(Target(f"step_ms.transformer.{end}", what, "<=", STEP_MS[p]), run.get("step_ms"), **extra)
            what = f"host ms a step (the Python step unsynchronised: time to queue it), Transformer, {p}{label}, {m:,}"
            out |= judged(Target(f"host_ms.transformer.{end}", what, "<=", HOST_MS), run.get("host_ms"), **extra)
            what = f"GPU busy: device time of its kernels and copies / wall time of a step, Transformer, {p}{label}"
            out |= judged(Target(f"gpu_busy.transformer.{end}", what, ">=", GPU_BUSY), run.get("gpu_busy"), **extra)
        run = f.run(setting("transformer", "bf16") + kind, big)
        what = f"real target tokens/s, Transformer, bf16{label}, {big:,} padded tokens"
        extra = {"trusted": run.trusted, **run.inputs(), "max_tokens": f.sizes[big]}
        target = Target(f"tokens_per_s.transformer.{big}.bf16{kind.replace(':', '.')}", what, ">=", LARGE_TOKENS_PER_S)
        out |= judged(target, run.get("tgt_tokens_per_s"), **extra)
    for p in PRECISIONS:  # what capture gives, from the same blocks
        what = f"CUDA graphs / eager target tokens/s, Transformer, {p}, {m:,} (same blocks)"
        eager = setting("transformer", p)
        out |= judged_ratio(Target(f"graphs_vs_eager.transformer.{m}.{p}", what, ratio=True),
                            *f.ratio(eager + GRAPHS, eager, m))  # fmt: skip
    return out


def precision_targets(f: Figures) -> dict[str, dict]:
    """bf16 against TF32: the Transformer at every size (judged at the large ones), the RNNs at 7,440; both against
    IEEE float32; cuDNN's attention first; each from the same blocks."""
    out, m = {}, SIZES[0]
    for model, sizes in (("transformer", SIZES), ("bahdanau", SIZES[:1]), ("luong", SIZES[:1])):
        for n in sizes:
            bar = None if (model, n) == ("transformer", m) else BF16_VS_TF32[model]
            what = f"bf16-mixed / float32 (TF32) target tokens/s, {model}, {n:,} padded tokens (same blocks)"
            target = Target(f"bf16_vs_tf32.{model}.{n}", what, ">=" if bar else None, bar, ratio=True)
            out |= judged_ratio(target, *f.ratio(setting(model, "bf16"), setting(model, "tf32"), n))
    for a, b, bar in (("bf16", "highest", 1.5), ("tf32", "highest", 1.3)):
        what = f"{a} / IEEE float32 (kernels.float32_matmul=highest), Transformer, {m:,} (same blocks)"
        out |= judged_ratio(Target(f"{a}_vs_highest.transformer.{m}", what, ">=", bar, ratio=True),
                            *f.ratio(setting("transformer", a), setting("transformer", b), m))  # fmt: skip
    what = f"bf16 with cuDNN attention first / the default backends, Transformer, {m:,} (what the default avoids)"
    out |= judged_ratio(Target(f"cudnn_first_vs_default.transformer.{m}", what, ratio=True),
                        *f.ratio(CUDNN_SETTING, setting("transformer", "bf16"), m))  # fmt: skip
    return out


def ratio(a: Figure, b: Figure) -> Figure:
    """a / b of two (value, why) pairs; the first why where either is missing."""
    if a[0] is None or b[0] is None or not b[0]:
        return None, a[1] or b[1] or "a zero denominator"
    return a[0] / b[0], ""


def auto(f: Figures, model: str, n: int) -> tuple[Speed, str]:
    """What ``trainer.precision=auto`` (trainer=gpu's) trains ``model`` with at ``n`` tokens: the faster of the
    settings of :data:`PRECISIONS` that were measured, and which it is."""
    runs = {p: f.run(setting(model, p), n) for p in PRECISIONS}
    measured = [p for p in PRECISIONS if runs[p].row is not None]
    chosen = max(measured, key=lambda p: runs[p].row["tgt_tokens_per_s"]) if measured else PRECISIONS[-1]
    return runs[chosen], chosen


def joeynmt_targets(f: Figures) -> dict[str, dict]:
    """Ours as trainer=gpu trains (precision auto) against JoeyNMT 2.3.0 in float32 (as it runs by default),
    Bahdanau against its RNN: our step_speed.py figure (batches on the GPU already) against JoeyNMT's own (its loader
    in its steps)."""
    out, m = {}, SIZES[0]
    for model, ours_model in (("rnn", "bahdanau"), ("transformer", "transformer")):
        row = f.joeynmt.get(model)
        if row is None:
            theirs = None, step_why(f.steps, f"joeynmt_{model}")
        else:
            theirs = row.get("tok_per_s_steady_median"), row.get("parse_error", "no steady-state interval logged")
        ours, precision = auto(f, ours_model, m)
        what = (f"ours ({ours_model}, {precision}: trainer=gpu's precision=auto, the faster here; {m:,} tokens, "
                f"bucketed, step_speed.py) / JoeyNMT 2.3.0 ({model}, float32, {JOEYNMT_BATCH:,} padded tokens, "
                "un-bucketed), target tokens/s")  # fmt: skip
        out |= judged(Target(f"ours_vs_joeynmt.{model}", what, ">=", 5), ratio(ours.get("tgt_tokens_per_s"), theirs),
                      ours=ours.get("tgt_tokens_per_s")[0], ours_precision=precision,
                      ours_iqr_over_median=ours.get("iqr_over_median")[0],
                      ours_tf32=f.run(setting(ours_model, "tf32"), m).get("tgt_tokens_per_s")[0],
                      ours_bf16=f.run(setting(ours_model, "bf16"), m).get("tgt_tokens_per_s")[0], joeynmt=theirs[0],
                      joeynmt_batch=(row or {}).get("batch_padded_tokens"))  # fmt: skip
    return out


def default_run_targets(f: Figures) -> dict[str, dict]:
    """The default run's test BLEU against the CPU reference's, and its wall time."""
    ref_bleu, bleu = (f.reference.get("test") or {}).get("bleu"), f.default.get("test_bleu")
    why = step_why(f.steps, "default_run") if bleu is None else "no reference BLEU"
    delta = bleu - ref_bleu if bleu is not None and ref_bleu is not None else None
    what = f"the default run's test BLEU minus the CPU reference's (same batch and schedule): {REFERENCE.name}"
    out = judged(Target("default_run.bleu_vs_cpu", what, "|x| <=", 1), (delta, why), test_bleu=bleu,
                 reference_test_bleu=ref_bleu, updates=f.default.get("updates"),
                 reference_updates=f.reference.get("step"))  # fmt: skip
    what = "the default run's wall time, seconds (train.py's process, start to end)"
    wall = f.default.get("wall_s"), step_why(f.steps, "default_run")
    return out | judged(Target("default_run.wall_s", what, "<", DEFAULT_RUN_WALL_S), wall)


def test_gpu_target(f: Figures) -> dict[str, dict]:
    """How many of tests/test_gpu.py's tests did not pass, from pytest's last line."""
    tests = f.steps.get("test_gpu", {})
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tests.get("result", ""))}
    not_passed = sum(counts.values()) - counts.get("passed", 0) if counts else None
    why = step_why(f.steps, "test_gpu") + (f": {tests['result']!r}" if tests.get("result") else "")
    what = "tests/test_gpu.py green: how many of its tests did not pass (failed, skipped, errors)"
    return judged(Target("test_gpu", what, "==", 0), (not_passed, why), result=tests.get("result"))


def compiled_targets(f: Figures) -> dict[str, dict]:
    """The compiled Transformer against the eager one, in each precision, from the same blocks: reported, not
    judged."""
    out, m = {}, SIZES[0]
    for p in PRECISIONS:
        what = f"compiled / eager target tokens/s, Transformer, {m:,}, {p} (same blocks)"
        eager = setting("transformer", p)
        out |= judged_ratio(Target(f"compiled_vs_eager.transformer.{m}.{p}", what, ratio=True),
                            *f.ratio(f"{eager}:compile", eager, m, compiled=True))  # fmt: skip
    return out


def summarise(speed: dict, steps: dict, default: dict, joeynmt: dict, reference: dict, sizes: dict[int, int]) -> dict:
    """Every target as :meth:`Target.judged` states it, by key, from the figures :class:`Figures` names. Never raises
    on a missing figure: its target says "not measured" and why."""
    f = Figures(speed, steps, default, joeynmt, reference, sizes)
    return (speed_targets(f) | precision_targets(f) | joeynmt_targets(f) | default_run_targets(f) | test_gpu_target(f)
            | compiled_targets(f))  # fmt: skip


def memory(speed: dict) -> list[dict]:
    """GPU peak memory (during each setting's warm-up: every setting's weights resident) beside the host's peak RSS,
    for each speed run."""
    keys = ("setting", "max_tokens", "peak_gpu_gib")
    return [{"step": part, **{k: row.get(k) for k in keys}, "peak_rss_gib": payload.get("peak_rss_gib")}
            for part, payload in speed.items() for row in payload.get("runs", [])]  # fmt: skip
