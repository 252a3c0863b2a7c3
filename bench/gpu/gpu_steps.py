"""The GPU check's steps: each a process (group) with its own log, stopped at its cap so that none eats another's
time, and what each step runs (the wheels, the speed runs, the default run, JoeyNMT's runs); its records by name.

    check = Check(work, budget=480)
    check.run("test_gpu", [sys.executable, "-m", "pytest", ...], env)   # {"status": "ok", "rc": 0, "seconds": ...}
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.common import ROOT
from bench.gpu.gpu_pack import WHEELS

BUDGET = 480  # seconds of the device call the steps may take; the caps below add up to it
MIN_STEP = 5  # a step with fewer seconds left is skipped
CUDNN_FIRST = "cudnn+flash+efficient+math"  # the attention backends as PyTorch orders them on Hopper with cuDNN 9.15+
SIZES = (7440, 16000, 32000)  # padded tokens a batch: 8 x JoeyNMT's CPU batch (our match of its 16,384), two large
SMOKE_SIZES = {7440: 240, 16000: 320, 32000: 400}  # the dry run's stand-ins, so that every target has a value
JOEYNMT_BATCH = 16384  # JoeyNMT's padded tokens, un-bucketed: about our 7,440 (8 x its 2,048 and our 930)
JOEYNMT_SMOKE_BATCH = 512  # a CPU step of a few seconds, so that the interrupt comes soon after SIGINT
JOEYNMT_SKIP_S = 5  # JoeyNMT's first seconds of training left out of its median (CUDA and cuDNN warm-up)
JOEYNMT_MARGIN_S = 8  # of its step's cap, for start-up's end and the checkpoint saved at the interrupt
SPEED_MARGIN_S = 10  # of a speed step's cap, for Python's start-up and exit: step_speed.py's --time-limit is the rest
# step_speed.py's settings (MODEL:PRECISION[:OPTION]) of each speed step: speed_7440 at SIZES[0], speed_large at the
# others, speed_compiled at SIZES[0]
CUDNN_SETTING = f"transformer:bf16:attention={CUDNN_FIRST}"
SETTINGS_7440 = ("transformer:tf32", "transformer:bf16", "transformer:highest", CUDNN_SETTING,
                 "transformer:tf32:graphs", "transformer:bf16:graphs",  # compile.graphs=true: CUDA graphs per shape
                 "bahdanau:tf32", "bahdanau:bf16", "luong:tf32", "luong:bf16")  # fmt: skip
SETTINGS_LARGE = ("transformer:tf32", "transformer:bf16", "transformer:bf16:graphs")
SETTINGS_COMPILED = ("transformer:tf32", "transformer:bf16", "transformer:tf32:compile", "transformer:bf16:compile")


@dataclass(frozen=True)
class Step:
    """One step of the check: its cap on a GPU (seconds of :data:`BUDGET`), its time there (measured on an H100 where
    it finished, else a guess; the last step's beyond its cap: it gets what the others leave), its cap in the dry run
    on a CPU (seconds of :data:`SMOKE_BUDGET`; the two scale with --budget), what it does."""

    name: str
    cap: float
    estimate: float
    smoke_cap: float
    what: str


STEPS = (
    Step("wheels", 5, 1, 5, "Hydra's and pytest's wheels installed into the work folder, where they are missing"),
    Step("test_gpu", 90, 60, 15, "tests/test_gpu.py: every model trained with trainer=gpu, checked against the CPU"),
    Step("speed_7440", 90, 72, 130, "step_speed.py 7,440: Transformer TF32/bf16/IEEE/bf16 cuDNN-first; RNNs TF32/bf16"),
    Step("speed_large", 50, 42, 75, "step_speed.py at 16,000 and 32,000 tokens: the Transformer in TF32 and bf16"),
    Step("default_run", 115, 107, 55, "python train.py trainer=gpu on the built-in corpus: test BLEU, wall time"),
    Step("joeynmt_env", 8, 6, 10, "JoeyNMT 2.3.0's venv beside this Python's packages (bench/anchors/joeynmt_env.py)"),
    Step("joeynmt_rnn", 36, 30, 40, "JoeyNMT's RNN (Bahdanau) at 16,384 padded tokens, no validation in its window"),
    Step("joeynmt_transformer", 36, 30, 40, "JoeyNMT's Transformer, the same way"),
    Step("speed_compiled", 50, 130, 170, "the Transformer at 7,440 eager and compiled, TF32 and bf16 (gets the rest)"),
)
SMOKE_BUDGET = 540  # the dry run's: a CPU compiles the Transformer slowly, and its other steps are small
assert sum(s.cap for s in STEPS) == BUDGET and sum(s.smoke_cap for s in STEPS) == SMOKE_BUDGET


STEPS_HELP = """\
The steps, in this order, each a process (group) with its own log, each run whatever the last gave. Each stops at its
cap, so that no step eats another's time (the last also gets what the others left unused); a step with under 5 s left
is skipped and says so. Seconds: the cap on a GPU (scaled by --budget/480); the time on one H100 (measured where the
step finished in the first check, 2026-11-28: wheels, default_run, joeynmt_env, and the JoeyNMT runs, which take their
cap less 6 s; test_gpu, timed out at 75 s and run in parallel since, the step_speed.py steps, new since, and
speed_compiled, stopped at 112 s, are guesses); the cap of --smoke (scaled by --budget/540):
"""


def steps_help() -> str:
    rows = [f"  {s.name:<20} {s.cap:>4.0f} {s.estimate:>4.0f} {s.smoke_cap:>5.0f}  {s.what}" for s in STEPS]
    sums = [sum(getattr(s, k) for s in STEPS) for k in ("cap", "estimate", "smoke_cap")]
    total = f"  {'total':<20} {sums[0]:>4.0f} {sums[1]:>4.0f} {sums[2]:>5.0f}"
    return STEPS_HELP + "\n".join([f"  {'step':<20} {'cap':>4} {'est.':>4} {'smoke':>5}", *rows, total])


class Check:
    """Runs the steps, each a command with a log, within its cap and the budget; keeps what each gave."""

    def __init__(self, work: Path, budget: float, smoke: bool = False):
        self.work, self.logs = work, work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.smoke, self.scale = smoke, budget / (SMOKE_BUDGET if smoke else BUDGET)
        self.deadline = time.monotonic() + budget
        self.steps: dict[str, dict] = {}

    def limit(self, name: str) -> float:
        """The seconds ``name`` may take now: its cap, or what is left of the budget if less (the last step: all
        that is left)."""
        left = self.deadline - time.monotonic()
        step = next(s for s in STEPS if s.name == name)
        return left if step is STEPS[-1] else min((step.smoke_cap if self.smoke else step.cap) * self.scale, left)

    def skip(self, name: str, why: str) -> dict:
        print(f"[gpu_check] {name}: skipped ({why})", flush=True)
        self.steps[name] = {"name": name, "status": "skipped", "why": why}
        return self.steps[name]

    def run(self, name: str, cmd: list, env: dict | None = None, cwd: Path = ROOT) -> dict:
        """``cmd`` with its output in logs/<name>.log, stopped (its whole process group) at its limit; its record."""
        limit = self.limit(name)
        if limit < MIN_STEP:
            return self.skip(name, f"{max(limit, 0):.0f} s of the budget left")
        step = {"name": name, "command": " ".join(map(str, cmd)), "limit_s": round(limit, 1)}
        print(f"[gpu_check] {name} (at most {limit:.0f} s): {step['command']}", flush=True)
        started = time.monotonic()
        with open(self.logs / f"{name}.log", "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
            try:
                step["rc"] = proc.wait(timeout=limit)
                step["status"] = "ok" if step["rc"] == 0 else "failed"
            except subprocess.TimeoutExpired:
                step |= {"rc": None, "status": "timed out"}
            stop(proc, grace=0 if step["rc"] is not None else 5)  # nothing of it left to hold the GPU
        step["seconds"] = round(time.monotonic() - started, 1)
        print(f"[gpu_check] {name}: {step['status']} in {step['seconds']} s", flush=True)
        self.steps[name] = step
        return step

    def log_tail(self, name: str, lines: int = 1) -> list[str]:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []


def stop(proc: subprocess.Popen, grace: float = 5) -> None:
    """``proc`` and every process it started (its session's group): SIGTERM, SIGKILL to what is left after
    ``grace`` seconds (a JoeyNMT run or a loader worker may outlive the shell or script that started it)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # none left
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


# --- the steps -----------------------------------------------------------------------------------------------------


def setup_wheels(check: Check, args, env: dict) -> None:
    """Hydra and pytest importable by the steps: each group of :data:`~gpu_pack.WHEELS` whose module is missing
    installed from its folder (``--wheels``, ``--pytest-wheels``) into the work folder, put first on PYTHONPATH."""
    missing = [wheels for wheels in WHEELS if wheels.missing()]
    if not missing:
        why = f"present: {', '.join(w.module for w in WHEELS)}"
        check.steps["wheels"] = {"name": "wheels", "status": "ok", "why": why, "seconds": 0}
        return
    target = check.work / "packages"
    shutil.rmtree(target, ignore_errors=True)
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
    code += "from bench.anchors.joeynmt_env import install"
    for w in missing:
        folder = getattr(args, w.option)
        code += f"\nprint({w.module!r}, install({w.requirements!r}, Path({str(folder)!r}), Path({str(target)!r})))"
    check.run("wheels", [sys.executable, "-c", code], env)["installed"] = [w.module for w in missing]
    env["PYTHONPATH"] = os.pathsep.join([str(target), env["PYTHONPATH"]])


def speed_steps(check: Check, args, env: dict, sizes: dict[int, int]) -> dict[str, dict]:
    """bench/speed/step_speed.py's eager runs, a step each: every setting at 7,440 tokens, the Transformer at the large
    sizes; the JSON of each that wrote one, by step name."""
    large = [str(sizes[n]) for n in SIZES[1:]]
    return {
        "speed_7440": speed_run(check, "speed_7440", args, env, SETTINGS_7440, [str(sizes[SIZES[0]])]),
        "speed_large": speed_run(check, "speed_large", args, env, SETTINGS_LARGE, large),
    }


def speed_run(check: Check, name: str, args, env: dict, settings, max_tokens: list[str], more=(), opts=()) -> dict:
    """One step_speed.py step of ``settings`` at ``max_tokens``, ended by its own --time-limit within the step's
    limit, with more ``opts`` and train.py overrides ``more`` (before the options, as --settings takes every word
    after it); its JSON, or {} where it wrote none."""
    out = check.work / "parts" / f"{name}.json"
    margin = SPEED_MARGIN_S * (2 if args.smoke else 1)  # a busy CPU starts Python slowly
    cmd = [sys.executable, "-m", "bench.speed.step_speed", *more, "--accelerator", args.accelerator]
    cmd += ["--data", str(args.data), "--cache", str(args.cache), "--json", str(out)]
    cmd += ["--time-limit", f"{max(check.limit(name) - margin, MIN_STEP):.0f}"]
    if args.smoke:  # a small GEMM (a CPU without bf16 instructions takes 1.5 minutes for one of 1,024), one thread (a
        # busy machine's cores oversubscribed by several: each step ten times slower), few batches and blocks
        cmd += ["--batches", "2", "--blocks", "3", "--gemm-n", "128", "--threads", "1"]
    else:  # the threads of the first H200 measurement (train_speed_h200_ac4e2cb.json)
        cmd += ["--batches", str(args.batches), "--blocks", str(args.blocks), "--threads", "8"]
    cmd += [*opts, "--max-tokens", *max_tokens, "--settings", *settings]
    out.unlink(missing_ok=True)  # an earlier check's figures are not this one's
    step = check.run(name, cmd, env)
    if not out.is_file():
        return {}
    result = json.loads(out.read_text())  # a step stopped at its cap keeps the blocks it finished (complete: false)
    step["runs_measured"] = sum(1 for r in result.get("runs", []) if r.get("blocks"))
    step["speed_state"] = result.get("state")
    return result


def compiled_step(check: Check, args, env: dict, sizes: dict[int, int]) -> dict:
    """The Transformer at 7,440 eager and compiled, both precisions, side by side (the dry run's: 1+1 layers, as a CPU
    compiles slowly); no profiled pass."""
    small = ["++model.encoder.num_layers=1", "++model.decoder.num_layers=1"] if args.smoke else []
    return speed_run(check, "speed_compiled", args, env, SETTINGS_COMPILED, [str(sizes[SIZES[0]])], small,
                     ["--no-profile"])  # fmt: skip


def default_run(check: Check, args, env: dict) -> dict:
    """``train.py trainer=gpu`` on the built-in corpus: its results and wall time."""
    run_dir = check.work / "default_run"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, str(ROOT / "train.py"), "trainer=gpu", f"hydra.run.dir={run_dir}",
           "trainer.enable_progress_bar=false", f"data.cache_dir={args.cache}"]  # fmt: skip
    if args.smoke:  # a dry run: the same command on a CPU, a few updates of a tiny corpus
        cmd += ["trainer.accelerator=cpu", "trainer.precision=32-true", "trainer.max_steps=20",
                "trainer.val_check_interval=10", "trainer.check_val_every_n_epoch=null", "data.source.train_size=600",
                "data.source.valid_size=24", "data.source.test_size=24", "data.prepare.spm.vocab_size=300"]  # fmt: skip
    step = check.run("default_run", cmd, env)
    results = run_dir / "results.json"
    if not results.is_file():
        return {}
    payload = json.loads(results.read_text())
    shutil.copy(results, check.logs / "default_run.results.json")
    test, valid = payload.get("test") or {}, payload.get("valid") or {}
    return {"updates": payload.get("step"), "test_bleu": test.get("bleu"), "test_chrf": test.get("chrf"),
            "test_aer": test.get("aer"), "valid_bleu": valid.get("bleu"), "wall_s": step.get("seconds")}  # fmt: skip


def joeynmt_config(text: str, gpu: bool, batch: int, logging_freq: int) -> str:
    """The anchor's config for a timed run: on the GPU or not, at ``batch`` padded tokens, logging every
    ``logging_freq`` updates, with no validation (it would fall in the timed window)."""
    cfg = yaml.safe_load(text)
    cfg["use_cuda"] = cfg["training"]["use_cuda"] = gpu
    cfg["training"] |= {"batch_size": batch, "logging_freq": logging_freq, "validation_freq": 10**9}
    return yaml.safe_dump(cfg, sort_keys=False)


def joeynmt_steps(check: Check, args, env: dict) -> dict[str, dict]:
    """JoeyNMT 2.3.0's venv, then its RNN and Transformer on this device for their steps' caps: JoeyNMT's own
    steady-state target tokens/s (parse_train_log.py) by model."""
    venv = check.work / "joeynmt-venv"
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
        "from bench.anchors.joeynmt_env import make_env; "
        f"make_env(Path({str(venv)!r}), Path({str(args.joeynmt_wheels)!r}))"
    )
    if (made := check.run("joeynmt_env", [sys.executable, "-c", code], env)).get("status") != "ok":
        for model in ("rnn", "transformer"):
            check.skip(f"joeynmt_{model}", f"joeynmt_env {made['status']}")
        return {}
    batch, freq = (JOEYNMT_SMOKE_BATCH, 1) if args.smoke else (JOEYNMT_BATCH, 5)
    rows = {}
    for model, config in (("rnn", "rnn_bahdanau"), ("transformer", "transformer")):
        name, work = f"joeynmt_{model}", check.work / "joeynmt" / config
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "data").symlink_to((args.joeynmt_work / "data").resolve())
        anchor = work / "anchor"
        shutil.copytree(args.joeynmt_anchor, anchor, copy_function=shutil.copyfile)
        config_file = anchor / f"{config}.yaml"
        config_file.write_text(joeynmt_config(config_file.read_text(), args.accelerator == "gpu", batch, freq))
        script, time_file = anchor / "run_train.sh", work / "logs" / "train.time"
        if not Path("/usr/bin/time").is_file():  # its peak-memory wrapper, where the machine lacks it
            script.write_text(script.read_text().replace('/usr/bin/time -v -o "$WORK/logs/train.time" \\\n', ""))
        seconds = int(check.limit(name) - JOEYNMT_MARGIN_S)
        if seconds < 2 * MIN_STEP:
            check.skip(name, f"{seconds + JOEYNMT_MARGIN_S} s of the budget left")
            continue
        run_env = dict(env, VENV=str(venv), WORK=str(work), CONFIG=config, BUDGET_S=str(seconds))
        step = check.run(name, ["bash", str(script)], run_env)
        log = work / "models" / config / "train.log"
        if log.is_file():
            shutil.copy(log, check.logs / f"{name}.train.log")
        skip = 0 if args.smoke else JOEYNMT_SKIP_S
        parse = [sys.executable, str(anchor / "parse_train_log.py"), str(log)]
        parse += [str(time_file)] if time_file.is_file() else []
        parsed = subprocess.run([*parse, "--skip", str(skip)], capture_output=True, text=True, check=False)
        row = {"config": config, "batch_padded_tokens": batch, "timed_s": seconds, "skip_s": skip,
               "status": step.get("status")}  # fmt: skip
        try:
            row |= json.loads(parsed.stdout)
        except json.JSONDecodeError:
            row["parse_error"] = (parsed.stderr or parsed.stdout).strip()[-300:]
        rows[model] = row
    return rows
