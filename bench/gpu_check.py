"""The GPU check in one call: the GPU tests, training speed of every model in float32 and bf16, the default run of
``train.py trainer=gpu`` and, where given, JoeyNMT 2.3.0 on the same GPU; one JSON with provenance and one log archive.

    python bench/gpu_check.py [--out DIR] [--data DIR] [--wheels DIR] [--budget 480]
                              [--joeynmt-wheels DIR --joeynmt-work DIR --joeynmt-anchor DIR]
    python bench/gpu_check.py --accelerator cpu --smoke        # a dry run of every step on a CPU, a few minutes

For a machine with PyTorch, Lightning, sentencepiece, sacrebleu, numpy, matplotlib and tensorboard only, --wheels names
a folder with the wheels of hydra-core==1.3.8, omegaconf==2.3.1 and antlr4-python3-runtime==4.9.3, installed
(--no-deps, from that folder alone) when Hydra is missing; make it on a machine with the network:

    pip wheel --no-deps hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 -w .whl

The steps, each in its own process with its log kept, the next one run whatever the last gave (a step that would
start with less than --min-step seconds of --budget left is skipped and says so):
  1. tests/test_gpu.py;
  2. bench/train_speed.py: the three models, float32 (TF32) and bf16-mixed, at 930, 7,440 and 16,000 padded tokens,
     eager; the Transformer compiled too; and the Transformer at 7,440 in full float32 (kernels.float32_matmul=highest)
     and in bf16 with cuDNN attention first, the two settings the defaults were chosen against;
  3. ``python train.py trainer=gpu`` on the built-in corpus: its results.json and wall time;
  4. with --joeynmt-wheels (JoeyNMT 2.3.0, sentencepiece 0.2.0 and importlib_metadata<10, e.g. from
     ``pip download joeynmt==2.3.0 sentencepiece==0.2.0 'importlib_metadata<10' -d DIR``), --joeynmt-work (the
     anchor's prep_data.py output on the Tatoeba splits) and --joeynmt-anchor (its configs and scripts): JoeyNMT's RNN
     and Transformer on the same GPU for --joeynmt-seconds each, at 16,384 padded tokens (its batches are not bucketed:
     8 x its 2,048, which match our 930, i.e. our 7,440), in a virtual environment beside this Python's packages.
Written to --out: gpu_check.json (every step's command, exit status, seconds and figures; the provenance) and
logs.tar.gz (every log and result file), two files in all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from common import DATA, ROOT, options, provenance

PINNED_WHEELS = ("hydra-core==1.3.8", "omegaconf==2.3.1", "antlr4-python3-runtime==4.9.3")
SIZES = (930, 7440, 16000)  # padded tokens a batch: JoeyNMT's CPU batch, 8 x it, a large GPU batch
SMOKE_SIZE = 240  # the dry run's one batch size: every step's code, in seconds on a CPU
CUDNN_FIRST = "[cudnn,flash,efficient,math]"  # the attention backends as PyTorch orders them on Hopper with cuDNN 9.15+
JOEYNMT_BATCH = 16384  # JoeyNMT's padded tokens (no bucketing) that match our 7,440


class Check:
    """Runs the steps, each a command with a log, under one time budget; keeps what each gave."""

    def __init__(self, out: Path, budget: float, min_step: float):
        self.out, self.logs = out, out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.deadline, self.min_step = time.monotonic() + budget, min_step
        self.steps: list[dict] = []

    def run(self, name: str, cmd: list[str], env: dict | None = None, cwd: Path = ROOT) -> dict:
        """``cmd`` with its output in logs/<name>.log, stopped at the budget's end; its record."""
        left = self.deadline - time.monotonic()
        step = {"name": name, "command": " ".join(map(str, cmd))}
        if left < self.min_step:
            step |= {"status": "skipped", "why": f"{left:.0f} s of the budget left"}
            print(f"[gpu_check] {name}: skipped ({step['why']})", flush=True)
            self.steps.append(step)
            return step
        print(f"[gpu_check] {name}: {step['command']}", flush=True)
        started = time.monotonic()
        with open(self.logs / f"{name}.log", "w") as log:
            try:
                proc = subprocess.run(
                    cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=left, check=False
                )
                step["rc"] = proc.returncode
                step["status"] = "ok" if proc.returncode == 0 else "failed"
            except subprocess.TimeoutExpired:
                step |= {"rc": None, "status": "timed out"}
        step["seconds"] = round(time.monotonic() - started, 1)
        print(f"[gpu_check] {name}: {step['status']} in {step['seconds']} s", flush=True)
        self.steps.append(step)
        return step

    def log_tail(self, name: str, lines: int = 3) -> list[str]:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []


def ensure_hydra(wheels: Path | None) -> str:
    """Hydra importable, from ``wheels`` if it is missing; what was done."""
    try:
        import hydra  # noqa: F401

        return "hydra present"
    except ImportError:
        pass
    if wheels is None:
        raise SystemExit(f"gpu_check: Hydra is missing: pass --wheels DIR with the wheels of {' '.join(PINNED_WHEELS)}")
    files = sorted(str(w) for w in wheels.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *files]
    subprocess.run(cmd, check=True)
    return f"installed {', '.join(Path(f).name for f in files)}"


def speed_steps(check: Check, args, env: dict) -> list[str]:
    """bench/train_speed.py's runs (step 2); the JSON files they write."""
    py, script = sys.executable, str(ROOT / "bench" / "train_speed.py")
    common = ["--accelerator", args.accelerator, "--data", str(args.data), "--cache", str(args.cache)]
    smoke = args.smoke
    steps = ["--steps", str(args.steps), "--warmup", "10"]
    if smoke:  # a small GEMM (a CPU without bf16 instructions takes 1.5 minutes for one of 1,024), one thread (a busy
        # machine's cores oversubscribed by several: each step ten times slower)
        steps = ["--steps", "10", "--warmup", "2", "--gemm-n", "128", "--threads", "1"]
    sizes = [str(s) for s in ((SMOKE_SIZE,) if smoke else SIZES)]
    transformer = ["--models", "transformer", "--max-tokens", sizes[len(sizes) // 2]]  # at 7,440 (smoke: its size)
    precisions = ["32-true", "bf16-mixed"]
    runs = {  # name -> the runs' arguments
        "speed_eager": ["--models", "bahdanau", "luong", "transformer", "--max-tokens", *sizes],
        "speed_compiled": ["--models", "transformer", "--max-tokens", *sizes, "--compile", "on"],
        "speed_highest": [*transformer, "--precision", "32-true", "kernels.float32_matmul=highest"],
        "speed_cudnn_first": [*transformer, "--precision", "bf16-mixed", f"kernels.attention={CUDNN_FIRST}"],
    }
    written = []
    for name, extra in runs.items():
        out = check.out / "parts" / f"{name}.json"
        precision = [] if "--precision" in extra else ["--precision", *precisions]
        overrides = [a for a in extra if "=" in a and not a.startswith("-")]  # before the options: --precision takes
        options = [a for a in extra if a not in overrides]  # every word after it
        cmd = [py, script, *overrides, *common, *steps, *precision, "--json", str(out), *options]
        if check.run(name, cmd, env).get("status") == "ok":
            written.append(str(out))
    return written


def joeynmt_step(check: Check, args, env: dict) -> list[dict]:
    """JoeyNMT 2.3.0's RNN and Transformer on this device (step 4): their steady-state target tokens/s."""
    venv = check.out / "joeynmt-venv"
    if not (venv / "bin" / "python").exists():
        made = check.run("joeynmt_venv", [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], env)
        if made.get("status") != "ok":
            return []
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index"]
    wanted = ["joeynmt==2.3.0", "sentencepiece==0.2.0", "importlib_metadata<10"]
    if check.run("joeynmt_install", [*pip, "--find-links", str(args.joeynmt_wheels), *wanted], env)["status"] != "ok":
        return []
    rows = []
    for config in ("rnn_bahdanau", "transformer"):
        work = check.out / "joeynmt" / config
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(args.joeynmt_work / "data", work / "data")
        text = (args.joeynmt_anchor / f"{config}.yaml").read_text()
        text = re.sub(r"use_cuda: False", f"use_cuda: {args.accelerator == 'gpu'}", text)
        text = re.sub(r"(\n  batch_size:) \d+( +# padded|\n  batch_type: \"token\")", rf"\1 {JOEYNMT_BATCH}\2", text)
        text = re.sub(r"logging_freq: \d+", "logging_freq: 5", text)
        anchor = work / "anchor"
        shutil.copytree(args.joeynmt_anchor, anchor)
        (anchor / f"{config}.yaml").write_text(text)
        if not Path("/usr/bin/time").exists():  # its peak-memory wrapper, where the machine lacks it
            script = anchor / "run_train.sh"
            script.write_text(script.read_text().replace('/usr/bin/time -v -o "$WORK/logs/train.time" \\\n', ""))
        run_env = dict(env, VENV=str(venv), WORK=str(work), CONFIG=config, BUDGET_S=str(args.joeynmt_seconds))
        step = check.run(f"joeynmt_{config}", ["bash", str(anchor / "run_train.sh")], run_env)
        log = work / "models" / config / "train.log"
        parse = [sys.executable, str(anchor / "parse_train_log.py"), str(log), "--skip", str(args.joeynmt_seconds // 3)]
        parsed = subprocess.run(parse, capture_output=True, text=True, check=False)
        row = {"config": config, "batch_padded_tokens": JOEYNMT_BATCH, "status": step.get("status")}
        try:
            row |= json.loads(parsed.stdout)
        except json.JSONDecodeError:
            row["parse_error"] = (parsed.stderr or parsed.stdout).strip()[-300:]
        for name in ("train.log",):
            if (work / "models" / config / name).is_file():
                shutil.copy(work / "models" / config / name, check.logs / f"joeynmt_{config}_{name}")
        rows.append(row)
    return rows


def default_run(check: Check, args, env: dict) -> dict:
    """``train.py trainer=gpu`` on the built-in corpus (step 3): its results and wall time."""
    run_dir = check.out / "default_run"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, str(ROOT / "train.py"), "trainer=gpu", f"hydra.run.dir={run_dir}",
           "trainer.enable_progress_bar=false", f"data.cache_dir={args.cache}"]  # fmt: skip
    if args.smoke:  # a dry run: the same command on a CPU, a few updates of a tiny corpus
        cmd += ["trainer.accelerator=cpu", "trainer.precision=32-true", "trainer.max_steps=20",
                "trainer.val_check_interval=10", "trainer.check_val_every_n_epoch=null", "data.source.train_size=600",
                "data.source.valid_size=24", "data.source.test_size=24", "data.prepare.spm.vocab_size=300"]  # fmt: skip
    step = check.run("default_run", cmd, env)
    results = run_dir / "results.json"
    out = {"step": step}
    if results.is_file():
        payload = json.loads(results.read_text())
        shutil.copy(results, check.logs / "default_run.results.json")
        out |= {
            "updates": payload.get("step"),
            "test_bleu": (payload.get("test") or {}).get("bleu"),
            "test_aer": (payload.get("test") or {}).get("aer"),
            "valid_bleu": (payload.get("valid") or {}).get("bleu"),
            "wall_s": step.get("seconds"),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu_check", help="where its files go")
    options(p, "data", "cache", cache=ROOT / "data")
    p.add_argument("--wheels", type=Path, help=f"wheels of {', '.join(PINNED_WHEELS)}, installed if Hydra is missing")
    p.add_argument("--accelerator", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--smoke", action="store_true", help="a dry run of every step, few updates (with --accelerator cpu)")
    p.add_argument("--budget", type=float, default=480, help="seconds for all steps (default: %(default)s)")
    p.add_argument("--min-step", type=float, default=20, help="a step needs this many seconds left to start")
    p.add_argument("--steps", type=int, default=20, help="timed updates of each speed run (default: %(default)s)")
    p.add_argument("--joeynmt-wheels", type=Path, help="JoeyNMT 2.3.0 and what it needs beside this Python's packages")
    p.add_argument("--joeynmt-work", type=Path, help="the JoeyNMT anchor's prep_data.py output (data/, spm models)")
    p.add_argument("--joeynmt-anchor", type=Path, default=DATA / "anchors" / "joeynmt", help="its configs, scripts")
    p.add_argument("--joeynmt-seconds", type=int, default=60, help="seconds of each JoeyNMT run (default: %(default)s)")
    args = p.parse_args()
    if args.smoke and args.accelerator == "gpu":
        p.error("argument --smoke: a dry run on a CPU: add --accelerator cpu")
    if args.joeynmt_wheels is not None and args.joeynmt_work is None:
        p.error("argument --joeynmt-wheels: needs --joeynmt-work DIR (the anchor's prep_data.py output)")
    shutil.rmtree(args.out / "parts", ignore_errors=True)
    check = Check(args.out, args.budget, args.min_step)
    setup = ensure_hydra(args.wheels)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if args.smoke:
        env["OMP_NUM_THREADS"] = "1"  # as --threads 1 above: a dry run on a machine that may be busy
    check.run("test_gpu", [sys.executable, "-m", "pytest", "-q", "-rs", str(ROOT / "tests" / "test_gpu.py")], env)
    parts = speed_steps(check, args, env)
    run = default_run(check, args, env)
    joeynmt = joeynmt_step(check, args, env) if args.joeynmt_wheels else []
    speed = {Path(f).stem: json.loads(Path(f).read_text()) for f in parts}
    payload = {
        "accelerator": args.accelerator,
        "smoke": args.smoke,
        "setup": setup,
        "tests": {"status": check.steps[0].get("status"), "summary": check.log_tail("test_gpu", 1)},
        "speed": speed,
        "default_run": run,
        "joeynmt": joeynmt,
        "steps": check.steps,
        "provenance": provenance(),
    }
    (args.out / "gpu_check.json").write_text(json.dumps(payload, indent=1) + "\n")
    with tarfile.open(args.out / "logs.tar.gz", "w:gz") as tar:
        tar.add(check.logs, arcname="logs")
        if (args.out / "parts").is_dir():
            tar.add(args.out / "parts", arcname="parts")
    print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'logs.tar.gz'}")
    for step in check.steps:
        print(f"  {step['name']:<20} {step.get('status'):<10} {step.get('seconds', '')}")


if __name__ == "__main__":
    main()
