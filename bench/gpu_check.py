"""The GPU check in one call: the GPU tests, training speed of every model in float32 (TF32) and bf16, full float32
and cuDNN-first attention, the default run of ``train.py trainer=gpu``, JoeyNMT 2.3.0 on the same GPU and the compiled
step; one JSON whose ``summary`` states every target (ratio or value, threshold, pass or fail) and one log archive.

    python bench/gpu_check.py --pack                    # once, on a machine with the network and ../shared: .gpu/
    python bench/gpu_check.py --out "$OUT"              # on the GPU machine, carrying the one path .gpu
    python bench/gpu_check.py --accelerator cpu --smoke --budget 540   # every step on a CPU, a dry run

The GPU machine needs PyTorch, Lightning, sentencepiece, sacrebleu, numpy, pytest, matplotlib and tensorboard, and
neither the network, ../shared nor .git: --pack makes the ignored folder .gpu/ (about 27 MiB; it must stay under the
64 MiB a device call carries) holding all the rest:
  .gpu/wheels/hydra     hydra-core==1.3.8, omegaconf==2.3.1, antlr4-python3-runtime==4.9.3 (--wheels), installed
                        (--no-deps, from there alone, into the work folder) where Hydra is missing
  .gpu/wheels/joeynmt   joeynmt==2.3.0, subword-nmt==0.3.8, importlib_metadata==8.7.0, sentencepiece==0.2.0 (its
                        wheels for Python 3.10-3.12) (--joeynmt-wheels): bench/joeynmt_env.py makes JoeyNMT's venv
  .gpu/fra-eng          the Tatoeba splits train/valid/test.tsv (--data)
  .gpu/joeynmt/anchor   the JoeyNMT anchor: its configs and scripts (--joeynmt-anchor)
  .gpu/joeynmt/prep     its prep_data.py output on those splits: plain text and sentencepiece models (--joeynmt-work)
  .gpu/COMMIT           the commit packed (with "-dirty" if the work tree differed): the provenance where .git is
                        not copied (rerun --pack before a call: the parts made are kept, COMMIT is rewritten)

Written to --out: gpu_check.json (summary, every step's command, exit status and seconds, the speed runs, the default
run, JoeyNMT, provenance) and logs.tar.gz (every step's log and JSON), two files in all; everything else (JoeyNMT's
venv and checkpoints, the default run, the speed runs' JSON) goes to --work.
"""

from __future__ import annotations

import argparse
import datetime
import json
import operator
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from common import MODELS, ROOT, SPLITS, git, options, provenance
from joeynmt_env import download

PACK = ROOT / ".gpu"
HYDRA = ("hydra-core==1.3.8", "omegaconf==2.3.1", "antlr4-python3-runtime==4.9.3")
CARRY_LIMIT = 64 * 2**20  # bytes a device call carries
BUDGET = 480  # seconds of the device call the steps may take; the caps below add up to it
MIN_STEP = 5  # a step with fewer seconds left is skipped
CUDNN_FIRST = "[cudnn,flash,efficient,math]"  # the attention backends as PyTorch orders them on Hopper with cuDNN 9.15+
SIZES = (7440, 16000)  # padded tokens a batch: 8 x JoeyNMT's CPU batch (our match of its 16,384), a large GPU batch
SMOKE_SIZES = {7440: 240, 16000: 480}  # the dry run's stand-ins, so that every target has a value
JOEYNMT_BATCH = 16384  # JoeyNMT's padded tokens, un-bucketed: about our 7,440 (8 x its 2,048 and our 930)
JOEYNMT_SMOKE_BATCH = 512  # a CPU step of a few seconds, so that the interrupt comes soon after SIGINT
JOEYNMT_SKIP_S = 5  # JoeyNMT's first seconds of training left out of its median (CUDA and cuDNN warm-up)
JOEYNMT_MARGIN_S = 8  # of its step's cap, for start-up's end and the checkpoint saved at the interrupt
OURS_PRECISION = "bf16-mixed"  # trainer=gpu's: ours against JoeyNMT (which trains in float32) as each runs by default
REFERENCE = ROOT / "bench" / "results" / "gpu" / "default_run_cpu_gpu_schedule.json"  # trainer=gpu's batch and
# schedule trained in float32 on a CPU: the default run's BLEU is compared with it
DEFAULT_RUN_WALL_S = 112  # the H200's default run before these defaults (default_run_h200_ac4e2cb.json)


@dataclass(frozen=True)
class Step:
    """One step of the check: its cap on a GPU (seconds of :data:`BUDGET`), a rough estimate of its time there, its
    cap in the dry run on a CPU (seconds of :data:`SMOKE_BUDGET`; the two scale with --budget), what it does."""

    name: str
    cap: float
    estimate: float
    smoke_cap: float
    what: str


STEPS = (
    Step("hydra", 10, 3, 5, "Hydra's wheels installed into the work folder, where Hydra is missing"),
    Step("test_gpu", 75, 55, 15, "tests/test_gpu.py: every model trained with trainer=gpu, checked against the CPU"),
    Step("speed_7440", 50, 40, 80, "train_speed.py: the three models in float32 (TF32) and bf16, 7,440 tokens"),
    Step("speed_16000", 45, 35, 75, "the same at 16,000 tokens"),
    Step("speed_highest", 20, 15, 25, "the Transformer at 7,440 in IEEE float32 (kernels.float32_matmul=highest)"),
    Step("speed_cudnn_first", 20, 15, 25, f"the Transformer at 7,440 in bf16, kernels.attention={CUDNN_FIRST}"),
    Step("default_run", 115, 100, 55, "python train.py trainer=gpu on the built-in corpus: test BLEU, wall time"),
    Step("joeynmt_env", 10, 5, 10, "JoeyNMT 2.3.0's venv beside this Python's packages (bench/joeynmt_env.py)"),
    Step("joeynmt_rnn", 40, 40, 40, "JoeyNMT's RNN (Bahdanau) at 16,384 padded tokens, no validation in its window"),
    Step("joeynmt_transformer", 40, 40, 40, "JoeyNMT's Transformer, the same way"),
    Step("speed_compiled", 55, 50, 170, "the Transformer at 7,440 compiled, float32 and bf16 (gets what is left)"),
)
SMOKE_BUDGET = 540  # the dry run's: a CPU compiles the Transformer slowly, and its other steps are small
assert sum(s.cap for s in STEPS) == BUDGET and sum(s.smoke_cap for s in STEPS) == SMOKE_BUDGET


STEPS_HELP = """\
The steps, in this order, each a process (group) with its own log, each run whatever the last gave. Each stops at its
cap, so that no step eats another's time (the last also gets what the others left unused); a step with under 5 s left
is skipped and says so. Seconds: the cap on a GPU (scaled by --budget/480), a rough estimate on one H100 or H200, the
cap of --smoke (scaled by --budget/540):
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


# --- the pack: what the device call carries ----------------------------------------------------------------------


def pack_parts(pack: Path) -> dict[str, Path]:
    """The pack's folders by the option that reads them."""
    return {
        "wheels": pack / "wheels" / "hydra",
        "joeynmt_wheels": pack / "wheels" / "joeynmt",
        "data": pack / "fra-eng",
        "joeynmt_anchor": pack / "joeynmt" / "anchor",
        "joeynmt_work": pack / "joeynmt" / "prep",
    }


def made(part: Path, make: Callable[[Path], None]) -> None:
    """``part`` made by ``make`` (into a partial folder, renamed once done) unless it is there."""
    if part.is_dir():
        print(f"pack: {part} kept")
        return
    partial = part.with_name(part.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    make(partial)
    partial.rename(part)
    print(f"pack: {part} made")


def copy_files(src: Path, dest: Path, names) -> None:
    """``names`` from ``src`` into ``dest``, without their modes (../shared's are read-only)."""
    for name in names:
        shutil.copyfile(src / name, dest / name)


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def make_pack(pack: Path, shared: Path) -> int:
    """The folder the device call carries, from the network and ``shared`` (../shared); its size in bytes."""
    parts, anchor = pack_parts(pack), shared / "anchors" / "joeynmt"
    if not (anchor / "prep_data.py").is_file() or not (shared / "data" / "fra-eng").is_dir():
        raise SystemExit(f"gpu_check: --shared {shared}: no anchors/joeynmt or data/fra-eng there; pass ../shared")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    made(parts["wheels"], lambda d: subprocess.run([*pip, "wheel", "--no-deps", "-w", str(d), *HYDRA], check=True))
    made(parts["joeynmt_wheels"], download)
    made(parts["data"], lambda d: copy_files(shared / "data" / "fra-eng", d, SPLITS))
    made(parts["joeynmt_anchor"], lambda d: copy_files(anchor, d, [f.name for f in anchor.iterdir() if f.is_file()]))
    prep = [sys.executable, str(parts["joeynmt_anchor"] / "prep_data.py"), "--shared", str(parts["data"])]
    made(parts["joeynmt_work"], lambda d: subprocess.run([*prep, "--out", str(d)], check=True))
    commit = git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    (pack / "COMMIT").write_text(commit + "\n")
    size = folder_size(pack)
    print(f"pack: {pack} holds {size / 2**20:.1f} MiB (at commit {commit}); on the device: python bench/gpu_check.py")
    if size > CARRY_LIMIT:
        raise SystemExit(f"gpu_check: {pack} is {size / 2**20:.1f} MiB, over the {CARRY_LIMIT // 2**20} MiB carried")
    return size


def unready(args) -> str | None:
    """The first input the check lacks, as one line that says how to make it; None when all are there."""
    needs = {
        "data": SPLITS,
        "joeynmt_wheels": ("joeynmt-2.3.0-py3-none-any.whl",),
        "joeynmt_anchor": ("rnn_bahdanau.yaml", "transformer.yaml", "run_train.sh", "parse_train_log.py"),
        "joeynmt_work": ("data/train.fr", "data/spm/fr.model", "data/spm/en.model"),
    }
    if not hydra_present():
        needs["wheels"] = ("hydra_core-1.3.8-py3-none-any.whl",)
    for option, files in needs.items():
        folder = getattr(args, option)
        if missing := [f for f in files if not (folder / f).is_file()]:
            return (
                f"gpu_check: --{option.replace('_', '-')} {folder}: no {', '.join(missing)} there; make the pack with "
                f"`python bench/gpu_check.py --pack` (on a machine with the network and ../shared), then carry .gpu"
            )
    return None


def hydra_present() -> bool:
    import importlib.util

    return importlib.util.find_spec("hydra") is not None


# --- the steps -----------------------------------------------------------------------------------------------------


def setup_hydra(check: Check, args, env: dict) -> None:
    """Hydra importable by the steps: installed from ``--wheels`` into the work folder (on PYTHONPATH) if missing."""
    if hydra_present():
        check.steps["hydra"] = {"name": "hydra", "status": "ok", "why": "present", "seconds": 0}
        return
    target = check.work / "hydra"
    shutil.rmtree(target, ignore_errors=True)
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); from pathlib import Path; "
        f"from joeynmt_env import install; print(install({HYDRA!r}, Path({str(args.wheels)!r}), Path({str(target)!r})))"
    )
    check.run("hydra", [sys.executable, "-c", code], env)
    env["PYTHONPATH"] = os.pathsep.join([str(target), env["PYTHONPATH"]])


def speed_steps(check: Check, args, env: dict, sizes: dict[int, int]) -> dict[str, dict]:
    """bench/train_speed.py's runs, a step each; the JSON of each that wrote one, by step name."""
    match = ["--models", "transformer", "--max-tokens", str(sizes[SIZES[0]])]
    runs = {  # step -> (train.py overrides, options)
        **{f"speed_{n}": ([], [*BOTH, "--max-tokens", str(sizes[n])]) for n in SIZES},
        "speed_highest": (["kernels.float32_matmul=highest"], [*match, "--precision", "32-true"]),
        "speed_cudnn_first": ([f"kernels.attention={CUDNN_FIRST}"], [*match, "--precision", "bf16-mixed"]),
    }
    return {name: speed_run(check, name, args, env, *run) for name, run in runs.items()}


BOTH = ["--precision", "32-true", "bf16-mixed"]


def speed_run(check: Check, name: str, args, env: dict, overrides: list[str], opts: list[str]) -> dict:
    """One train_speed.py step (its train.py overrides before the options, as --precision takes every word after
    it); its JSON, or {} where it wrote none."""
    out = check.work / "parts" / f"{name}.json"
    cmd = [sys.executable, str(ROOT / "bench" / "train_speed.py"), *overrides, "--accelerator", args.accelerator]
    cmd += ["--data", str(args.data), "--cache", str(args.cache), "--json", str(out)]
    if args.smoke:  # a small GEMM (a CPU without bf16 instructions takes 1.5 minutes for one of 1,024), one thread (a
        # busy machine's cores oversubscribed by several: each step ten times slower)
        cmd += ["--steps", "10", "--warmup", "2", "--gemm-n", "128", "--threads", "1"]
    else:  # the threads of the first H200 measurement (train_speed_h200_ac4e2cb.json)
        cmd += ["--steps", str(args.steps), "--warmup", "10", "--threads", "8"]
    step = check.run(name, [*cmd, *opts], env)
    return json.loads(out.read_text()) if step.get("status") == "ok" and out.is_file() else {}


def compiled_step(check: Check, args, env: dict, sizes: dict[int, int]) -> dict:
    """The Transformer at 7,440 compiled, both precisions (the dry run's: 1+1 layers, as a CPU compiles slowly)."""
    small = ["++model.encoder.num_layers=1", "++model.decoder.num_layers=1"] if args.smoke else []  # ++: train_speed
    # composes them without the experiment too (for its kernels), where the default model has no such keys
    opts = ["--models", "transformer", "--max-tokens", str(sizes[SIZES[0]]), "--compile", "on", *BOTH]
    return speed_run(check, "speed_compiled", args, env, small, opts)


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
        f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); from pathlib import Path; "
        f"from joeynmt_env import make_env; make_env(Path({str(venv)!r}), Path({str(args.joeynmt_wheels)!r}))"
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


# --- the summary ---------------------------------------------------------------------------------------------------

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


def summarise(speed: dict, steps: dict, default: dict, joeynmt: dict, reference: dict, sizes: dict[int, int]) -> dict:
    """Every target as :meth:`Target.judged` states it, by key: ``speed`` (train_speed.py's JSON by step), ``steps``
    (the step records by name), ``default`` (the default run's figures), ``joeynmt`` (parse_train_log.py's by
    model), ``reference`` (the CPU reference run's results.json) and ``sizes`` (the sizes the runs used, by the
    GPU's size they stand for). Never raises on a missing figure: its target says "not measured" and why."""
    out: dict[str, dict] = {}
    m = SIZES[0]

    def rate(part: str, model: str, n: int, precision: str, compiled: bool = False) -> tuple[float | None, str]:
        return speed_rate(speed, steps, part, model, sizes[n], precision, compiled)

    def eager(model: str, n: int, precision: str) -> tuple[float | None, str]:
        return rate(f"speed_{n}", model, n, precision)

    def add(target: Target, value: tuple[float | None, str], **inputs) -> None:
        out[target.key] = target.judged(*value, **inputs)

    for model in MODELS:
        for n in SIZES:
            bf16, tf32 = eager(model, n, "bf16-mixed"), eager(model, n, "32-true")
            what = f"bf16-mixed / float32 (TF32) target tokens/s, {model}, {n:,} padded tokens"
            bar = 1.5 if (model, n) == ("transformer", m) else 1.0
            add(Target(f"bf16_vs_tf32.{model}.{n}", what, ">=", bar), ratio(bf16, tf32), bf16=bf16[0],
                float32_tf32=tf32[0], max_tokens=sizes[n])  # fmt: skip
    bf16, tf32 = eager("transformer", m, "bf16-mixed"), eager("transformer", m, "32-true")
    highest = rate("speed_highest", "transformer", m, "32-true")
    what = f"bf16-mixed / IEEE float32 (kernels.float32_matmul=highest), Transformer, {m:,}"
    add(Target(f"bf16_vs_highest.transformer.{m}", what, ">=", 1.5), ratio(bf16, highest), bf16=bf16[0],
        float32_highest=highest[0])  # fmt: skip
    what = f"float32 TF32 / IEEE float32 (highest), Transformer, {m:,}"
    add(Target(f"tf32_vs_highest.transformer.{m}", what, ">=", 1.3), ratio(tf32, highest), float32_tf32=tf32[0],
        float32_highest=highest[0])  # fmt: skip
    cudnn = rate("speed_cudnn_first", "transformer", m, "bf16-mixed")
    what = f"bf16 with cuDNN attention first / the default backends, Transformer, {m:,} (what the default avoids)"
    add(Target(f"cudnn_first_vs_default.transformer.{m}", what), ratio(cudnn, bf16), cudnn_first=cudnn[0],
        default=bf16[0])  # fmt: skip

    for model, ours_model in (("rnn", "bahdanau"), ("transformer", "transformer")):
        row = joeynmt.get(model)
        if row is None:
            theirs = None, step_why(steps, f"joeynmt_{model}")
        else:
            theirs = row.get("tok_per_s_steady_median"), row.get("parse_error", "no steady-state interval logged")
        ours = eager(ours_model, m, OURS_PRECISION)
        what = (f"ours ({ours_model}, {OURS_PRECISION}, {m:,} tokens, bucketed) / JoeyNMT 2.3.0 ({model}, float32, "
                f"{JOEYNMT_BATCH:,} padded tokens, un-bucketed), target tokens/s")  # fmt: skip
        add(Target(f"ours_vs_joeynmt.{model}", what, ">=", 5), ratio(ours, theirs), ours=ours[0],
            ours_float32=eager(ours_model, m, "32-true")[0], joeynmt=theirs[0],
            joeynmt_batch=(row or {}).get("batch_padded_tokens"))  # fmt: skip

    ref_bleu, bleu = (reference.get("test") or {}).get("bleu"), default.get("test_bleu")
    why = step_why(steps, "default_run") if bleu is None else "no reference BLEU"
    delta = bleu - ref_bleu if bleu is not None and ref_bleu is not None else None
    what = f"the default run's test BLEU minus the CPU reference's (same batch and schedule): {REFERENCE.name}"
    add(
        Target("default_run.bleu_vs_cpu", what, "|x| <=", 1),
        (delta, why),
        test_bleu=bleu,
        reference_test_bleu=ref_bleu,
        updates=default.get("updates"),
        reference_updates=reference.get("step"),
    )
    what = "the default run's wall time, seconds (train.py's process, start to end)"
    add(Target("default_run.wall_s", what, "<", DEFAULT_RUN_WALL_S), (default.get("wall_s"), step_why(steps,
        "default_run")))  # fmt: skip

    tests = steps.get("test_gpu", {})
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tests.get("result", ""))}
    not_passed = sum(counts.values()) - counts.get("passed", 0) if counts else None
    why = step_why(steps, "test_gpu") + (f": {tests['result']!r}" if tests.get("result") else "")
    what = "tests/test_gpu.py green: how many of its tests did not pass (failed, skipped, errors)"
    add(Target("test_gpu", what, "==", 0), (not_passed, why), result=tests.get("result"))

    for precision in ("32-true", "bf16-mixed"):
        compiled, base = rate("speed_compiled", "transformer", m, precision, True), eager("transformer", m, precision)
        what = f"compiled / eager target tokens/s, Transformer, {m:,}, {precision}"
        add(Target(f"compiled_vs_eager.transformer.{m}.{precision}", what), ratio(compiled, base),
            compiled=compiled[0], eager=base[0])  # fmt: skip
    return out


def memory(speed: dict) -> list[dict]:
    """GPU peak memory beside host RSS for each speed run."""
    keys = ("model", "max_tokens", "precision", "compiled", "peak_gpu_gib", "peak_rss_gib")
    return [
        {"step": part, **{k: row.get(k) for k in keys}} for part, payload in speed.items() for row in payload["runs"]
    ]


# --- the call ------------------------------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(
        description=f"{__doc__}\n{steps_help()}", formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parts = pack_parts(PACK)
    p.add_argument("--pack", type=Path, nargs="?", const=PACK, metavar="DIR",
                   help=f"make the pack (default {PACK.name}) from the network and --shared, and stop")  # fmt: skip
    p.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="../shared, for --pack")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check", help="where its two files go")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "gpu_check_work", help="its working files")
    options(p, "data", "cache", data=parts["data"], cache=ROOT / "data")
    p.add_argument("--wheels", type=Path, default=parts["wheels"], help=f"wheels of {', '.join(HYDRA)}")
    p.add_argument("--accelerator", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--smoke", action="store_true", help="a dry run of every step, few updates (with --accelerator cpu)")
    p.add_argument("--budget", type=float, help=f"seconds for all steps (default: {BUDGET}; --smoke: {SMOKE_BUDGET})")
    p.add_argument("--steps", type=int, default=20, help="timed updates of each speed run (default: %(default)s)")
    p.add_argument("--joeynmt-wheels", type=Path, default=parts["joeynmt_wheels"], help="JoeyNMT's wheels")
    p.add_argument("--joeynmt-work", type=Path, default=parts["joeynmt_work"], help="the anchor's prep_data.py output")
    p.add_argument("--joeynmt-anchor", type=Path, default=parts["joeynmt_anchor"], help="its configs and scripts")
    args = p.parse_args()
    if args.pack is not None:
        make_pack(args.pack, args.shared)
        return
    if args.smoke and args.accelerator == "gpu":
        p.error("argument --smoke: a dry run on a CPU: add --accelerator cpu")
    if args.budget is None:
        args.budget = SMOKE_BUDGET if args.smoke else BUDGET
    if line := unready(args):
        raise SystemExit(line)
    commit_file = PACK / "COMMIT"
    if not git("rev-parse", "HEAD") and commit_file.is_file():  # no .git copied: the commit packed
        os.environ.setdefault("NMT_COMMIT", commit_file.read_text().strip())
    run(args)


def run(args) -> None:
    """Every step, then the JSON and the log archive."""
    work = args.work
    for folder in ("logs", "parts", "default_run", "joeynmt"):
        shutil.rmtree(work / folder, ignore_errors=True)
    check = Check(work, args.budget, args.smoke)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if args.smoke:
        env["OMP_NUM_THREADS"] = "1"  # as --threads 1: a dry run on a machine that may be busy
    sizes = SMOKE_SIZES if args.smoke else {n: n for n in SIZES}
    setup_hydra(check, args, env)
    tests = check.run(
        "test_gpu", [sys.executable, "-m", "pytest", "-q", "-rs", str(ROOT / "tests" / "test_gpu.py")], env
    )
    tests["result"] = next(iter(check.log_tail("test_gpu")), "")
    speed = speed_steps(check, args, env, sizes)
    default = default_run(check, args, env)
    joeynmt = joeynmt_steps(check, args, env)
    speed["speed_compiled"] = compiled_step(check, args, env, sizes)
    speed = {name: payload for name, payload in speed.items() if payload}
    reference = json.loads(REFERENCE.read_text())
    summary = summarise(speed, check.steps, default, joeynmt, reference, sizes)
    payload = {
        "accelerator": args.accelerator,
        "smoke": args.smoke,
        "sizes": {str(n): used for n, used in sizes.items()},
        "summary": summary,
        "memory": memory(speed),
        "reference": {
            "file": str(REFERENCE.relative_to(ROOT)),
            "test_bleu": reference["test"]["bleu"],
            "test_chrf": reference["test"]["chrf"],
            "updates": reference["step"],
            "command": reference["provenance"]["command"],
            "wall_s_threshold": DEFAULT_RUN_WALL_S,
        },
        "default_run": default,
        "joeynmt": joeynmt,
        "speed": speed,
        "steps": list(check.steps.values()),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "provenance": provenance(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    with tarfile.open(args.out / "logs.tar.gz", "w:gz") as tar:
        tar.add(check.logs, arcname="logs")
        if (work / "parts").is_dir():
            tar.add(work / "parts", arcname="parts")
    print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'logs.tar.gz'}")
    for step in check.steps.values():
        print(f"  {step['name']:<20} {step.get('status'):<10} {step.get('seconds', '')}")
    print("summary:")
    for key, entry in summary.items():
        value = "-" if entry["value"] is None else f"{entry['value']:g}"
        print(f"  {key:<42} {value:>8} {entry['threshold'] or '':>8}  {entry['status']}  {entry.get('why', '')}")


if __name__ == "__main__":
    main()
