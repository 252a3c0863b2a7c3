"""The GPU check's summary: every target it answers (a ratio or a value, its threshold, pass or fail), worked out
from the steps' figures; a figure missing makes its target "not measured" and says why, never an error.

    summary = summarise(speed, check.steps, default, joeynmt, reference, sizes)
    summary["bf16_vs_tf32.transformer.7440"]  # {"what": ..., "value": 1.8, "threshold": ">= 1.5", "pass": True, ...}
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from bench.common import MODELS, ROOT
from bench.gpu.gpu_steps import JOEYNMT_BATCH, SIZES

PRECISIONS = ("32-true", "bf16-mixed")  # what trainer=gpu's precision (auto) chooses between: the faster here
REFERENCE = ROOT / "bench" / "results" / "gpu" / "default_run_cpu_gpu_schedule.json"  # trainer=gpu's batch and
# schedule trained in float32 on a CPU: the default run's BLEU is compared with it
DEFAULT_RUN_WALL_S = 112  # the H200's default run before these defaults (default_run_h200_ac4e2cb.json)

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
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

    def judged(self, value: float | None, why: str = "", **inputs) -> dict:
        """This target's entry: its value and pass/fail, or "not measured" and why."""
        entry: dict = {"what": self.what, "value": None if value is None else round(value, 3)}
        entry["threshold"] = None if self.op is None else f"{self.op} {self.threshold:g}"
        if value is None:
            entry |= {"pass": None, "status": "not measured", "why": why or "no figure"}
        elif self.op is None:
            entry |= {"pass": None, "status": "info"}
        else:
            entry["pass"] = bool(OPS[self.op](value, self.threshold))
            entry["status"] = "pass" if entry["pass"] else "fail"
        return entry | ({"inputs": inputs} if inputs else {})


def step_why(steps: dict[str, dict], name: str) -> str:
    """Why step ``name`` gave no figure, in a few words."""
    step = steps.get(name)
    if step is None:
        return f"step {name} did not run"
    if step.get("status") == "ok":
        return f"step {name} gave no such figure"
    return f"step {name} {step.get('status')}" + (f" ({step['why']})" if step.get("why") else "")


def speed_rate(speed: dict, steps: dict, part: str, model: str, tokens: int, precision: str, compiled: bool = False):
    """(target tokens/s of one speed run, why not) from the part ``part`` of the speed runs."""
    for row in speed.get(part, {}).get("runs", []):
        if (row["model"], row["max_tokens"], row["precision"], bool(row["compiled"])) == (
            model,
            tokens,
            precision,
            compiled,
        ):
            return row["tgt_tokens_per_s"], ""
    return None, step_why(steps, part)


def ratio(a: tuple, b: tuple) -> tuple[float | None, str]:
    """a / b of two (value, why) pairs; the first why where either is missing."""
    if a[0] is None or b[0] is None or not b[0]:
        return None, a[1] or b[1] or "a zero denominator"
    return a[0] / b[0], ""


Figure = tuple[float | None, str]  # a value, or None and why there is none


@dataclass(frozen=True)
class Figures:
    """What the steps gave: ``speed`` (train_speed.py's JSON by step), ``steps`` (the step records by name),
    ``default`` (the default run's figures), ``joeynmt`` (parse_train_log.py's by model), ``reference`` (the CPU
    reference run's results.json) and ``sizes`` (the sizes the runs used, by the GPU's size they stand for)."""

    speed: dict
    steps: dict
    default: dict
    joeynmt: dict
    reference: dict
    sizes: dict[int, int]

    def rate(self, part: str, model: str, n: int, precision: str, compiled: bool = False) -> Figure:
        return speed_rate(self.speed, self.steps, part, model, self.sizes[n], precision, compiled)

    def eager(self, model: str, n: int, precision: str) -> Figure:
        return self.rate(f"speed_{n}", model, n, precision)


def judged(target: Target, figure: Figure, **inputs) -> dict[str, dict]:
    """``target``'s entry by its key."""
    return {target.key: target.judged(*figure, **inputs)}


def precision_targets(f: Figures) -> dict[str, dict]:
    """bf16 against float32 (TF32), each model and size; both against IEEE float32; cuDNN's attention first."""
    out, m = {}, SIZES[0]
    for model in MODELS:
        for n in SIZES:
            bf16, tf32 = f.eager(model, n, "bf16-mixed"), f.eager(model, n, "32-true")
            what = f"bf16-mixed / float32 (TF32) target tokens/s, {model}, {n:,} padded tokens"
            bar = 1.5 if (model, n) == ("transformer", m) else 1.0
            out |= judged(Target(f"bf16_vs_tf32.{model}.{n}", what, ">=", bar), ratio(bf16, tf32), bf16=bf16[0],
                          float32_tf32=tf32[0], max_tokens=f.sizes[n])  # fmt: skip
    bf16, tf32 = f.eager("transformer", m, "bf16-mixed"), f.eager("transformer", m, "32-true")
    highest = f.rate("speed_highest", "transformer", m, "32-true")
    what = f"bf16-mixed / IEEE float32 (kernels.float32_matmul=highest), Transformer, {m:,}"
    out |= judged(Target(f"bf16_vs_highest.transformer.{m}", what, ">=", 1.5), ratio(bf16, highest), bf16=bf16[0],
                  float32_highest=highest[0])  # fmt: skip
    what = f"float32 TF32 / IEEE float32 (highest), Transformer, {m:,}"
    out |= judged(Target(f"tf32_vs_highest.transformer.{m}", what, ">=", 1.3), ratio(tf32, highest),
                  float32_tf32=tf32[0], float32_highest=highest[0])  # fmt: skip
    cudnn = f.rate("speed_cudnn_first", "transformer", m, "bf16-mixed")
    what = f"bf16 with cuDNN attention first / the default backends, Transformer, {m:,} (what the default avoids)"
    out |= judged(Target(f"cudnn_first_vs_default.transformer.{m}", what), ratio(cudnn, bf16), cudnn_first=cudnn[0],
                  default=bf16[0])  # fmt: skip
    return out


def auto(f: Figures, model: str, n: int) -> tuple[Figure, str]:
    """What ``trainer.precision=auto`` (trainer=gpu's) trains ``model`` with at ``n`` tokens: the faster of the eager
    runs of :data:`PRECISIONS` that were measured, and which it is."""
    runs = {p: f.eager(model, n, p) for p in PRECISIONS}
    measured = [p for p in PRECISIONS if runs[p][0] is not None]
    chosen = max(measured, key=lambda p: runs[p][0]) if measured else PRECISIONS[-1]
    return runs[chosen], chosen


def joeynmt_targets(f: Figures) -> dict[str, dict]:
    """Ours as trainer=gpu trains (precision auto) against JoeyNMT 2.3.0 in float32 (as it runs by default),
    Bahdanau against its RNN."""
    out, m = {}, SIZES[0]
    for model, ours_model in (("rnn", "bahdanau"), ("transformer", "transformer")):
        row = f.joeynmt.get(model)
        if row is None:
            theirs = None, step_why(f.steps, f"joeynmt_{model}")
        else:
            theirs = row.get("tok_per_s_steady_median"), row.get("parse_error", "no steady-state interval logged")
        ours, precision = auto(f, ours_model, m)
        what = (f"ours ({ours_model}, {precision}: trainer=gpu's precision=auto, the faster here; {m:,} tokens, "
                f"bucketed) / JoeyNMT 2.3.0 ({model}, float32, {JOEYNMT_BATCH:,} padded tokens, un-bucketed), "
                "target tokens/s")  # fmt: skip
        out |= judged(Target(f"ours_vs_joeynmt.{model}", what, ">=", 5), ratio(ours, theirs), ours=ours[0],
                      ours_precision=precision, ours_float32=f.eager(ours_model, m, "32-true")[0],
                      ours_bf16=f.eager(ours_model, m, "bf16-mixed")[0], joeynmt=theirs[0],
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
    """The compiled Transformer against the eager one, in each precision: reported, not judged."""
    out, m = {}, SIZES[0]
    for precision in ("32-true", "bf16-mixed"):
        compiled = f.rate("speed_compiled", "transformer", m, precision, compiled=True)
        base = f.eager("transformer", m, precision)
        what = f"compiled / eager target tokens/s, Transformer, {m:,}, {precision}"
        out |= judged(Target(f"compiled_vs_eager.transformer.{m}.{precision}", what), ratio(compiled, base),
                      compiled=compiled[0], eager=base[0])  # fmt: skip
    return out


def summarise(speed: dict, steps: dict, default: dict, joeynmt: dict, reference: dict, sizes: dict[int, int]) -> dict:
    """Every target as :meth:`Target.judged` states it, by key, from the figures :class:`Figures` names. Never raises
    on a missing figure: its target says "not measured" and why."""
    f = Figures(speed, steps, default, joeynmt, reference, sizes)
    return precision_targets(f) | joeynmt_targets(f) | default_run_targets(f) | test_gpu_target(f) | compiled_targets(f)


def memory(speed: dict) -> list[dict]:
    """GPU peak memory beside host RSS for each speed run."""
    keys = ("model", "max_tokens", "precision", "compiled", "peak_gpu_gib", "peak_rss_gib")
    return [
        {"step": part, **{k: row.get(k) for k in keys}} for part, payload in speed.items() for row in payload["runs"]
    ]
