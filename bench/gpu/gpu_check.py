"""The GPU check in one call: the GPU tests, training speed of every model in float32 (TF32) and bf16, full float32
and cuDNN-first attention, the default run of ``train.py trainer=gpu``, JoeyNMT 2.3.0 on the same GPU and the compiled
step; one JSON whose ``summary`` states every target (ratio or value, threshold, pass or fail) and one log archive.

    python -m bench.gpu.gpu_check --pack        # once, on a machine with the network and ../shared: .gpu/
    python -m bench.gpu.gpu_check --out "$OUT"  # on the GPU machine, carrying the one path .gpu
    python -m bench.gpu.gpu_check --accelerator cpu --smoke --budget 540   # every step on a CPU, a dry run

The speed steps are bench/speed/step_speed.py's, each one process comparing its settings side by side: a fixed set of
real batches (--batches of each size, every shape warmed up first), --blocks interleaved blocks, each setting's median
tokens/s with its IQR/median, ms and host ms a step and GPU busy; the ratios of settings come from the same blocks and
are judged only where both spread at most 5%. Each ends itself within its step's cap (--time-limit) and writes its
JSON after every block, so that a step stopped at its cap still answers with what it measured.

The GPU machine needs PyTorch, Lightning, sentencepiece, sacrebleu, numpy, matplotlib and tensorboard, and neither
the network, ../shared nor .git: --pack makes the ignored folder .gpu/ (about 29 MiB; it must stay under the 64 MiB a
device call carries) holding all the rest:
  .gpu/wheels/hydra     hydra-core==1.3.8, omegaconf==2.3.1, antlr4-python3-runtime==4.9.3 (--wheels), installed
                        (--no-deps, from there alone, into the work folder) where Hydra is missing
  .gpu/wheels/pytest    pytest==9.2.0, pytest-timeout==2.4.0, pluggy, iniconfig, pygments, packaging
                        (--pytest-wheels), installed the same way where pytest is missing
  .gpu/wheels/joeynmt   joeynmt==2.3.0, subword-nmt==0.3.8, importlib_metadata==8.7.0, sentencepiece==0.2.0 (its
                        wheels for Python 3.10-3.12) (--joeynmt-wheels): bench/anchors/joeynmt_env.py makes
                        JoeyNMT's venv
  .gpu/fra-eng          the Tatoeba splits train/valid/test.tsv (--data)
  .gpu/joeynmt/anchor   the JoeyNMT anchor: its configs and scripts (--joeynmt-anchor)
  .gpu/joeynmt/prep     its prep_data.py output on those splits: plain text and sentencepiece models (--joeynmt-work)
  .gpu/COMMIT           the commit packed (with "-dirty" if the work tree differed): the provenance, before any
                        .git the copy carries, which may be older (rerun --pack before a call: the parts made are
                        kept, COMMIT is rewritten)

Written to --out: gpu_check.json (summary, every step's command, exit status and seconds, the speed runs, the default
run, JoeyNMT, provenance) and logs.tar.gz (every step's log and JSON), two files in all; everything else (JoeyNMT's
venv and checkpoints, the default run, the speed runs' JSON) goes to --work. The pack is bench/gpu/gpu_pack.py, the
steps and their caps bench/gpu/gpu_steps.py, the targets and the summary bench/gpu/gpu_summary.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

from bench.common import ROOT, git, options, provenance
from bench.gpu.gpu_pack import HYDRA, PACK, PYTEST, make_pack, pack_parts, unready
from bench.gpu.gpu_steps import (
    BUDGET,
    SIZES,
    SMOKE_BUDGET,
    SMOKE_SIZES,
    Check,
    compiled_step,
    default_run,
    joeynmt_steps,
    setup_wheels,
    speed_steps,
    steps_help,
)
from bench.gpu.gpu_summary import DEFAULT_RUN_WALL_S, REFERENCE, memory, summarise

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
    p.add_argument("--pytest-wheels", type=Path, default=parts["pytest_wheels"], help=f"wheels of {', '.join(PYTEST)}")
    p.add_argument("--accelerator", choices=["gpu", "cpu"], default="gpu")
    p.add_argument("--smoke", action="store_true", help="a dry run of every step, few updates (with --accelerator cpu)")
    p.add_argument("--budget", type=float, help=f"seconds for all steps (default: {BUDGET}; --smoke: {SMOKE_BUDGET})")
    p.add_argument("--batches", type=int, default=6, help="each speed step's batches a size (default: %(default)s)")
    p.add_argument("--blocks", type=int, default=12, help="each speed step's timed blocks (default: %(default)s)")
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
    setup_wheels(check, args, env)
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
    write(args.out, payload, check.logs, work / "parts")
    report(check.steps, summary)


def write(out: Path, payload: dict, logs: Path, parts: Path) -> None:
    """The check's two files in ``out``: gpu_check.json and logs.tar.gz (the steps' logs and the speed runs' JSON)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        tar.add(logs, arcname="logs")
        if parts.is_dir():
            tar.add(parts, arcname="parts")
    print(f"wrote {out / 'gpu_check.json'} and {out / 'logs.tar.gz'}")


def report(steps: dict[str, dict], summary: dict[str, dict]) -> None:
    """Each step's status and seconds, then each target's value, threshold, status and why."""
    for step in steps.values():
        print(f"  {step['name']:<20} {step.get('status'):<10} {step.get('seconds', '')}")
    print("summary:")
    for key, entry in summary.items():
        value = "-" if entry["value"] is None else f"{entry['value']:g}"
        print(f"  {key:<42} {value:>8} {entry['threshold'] or '':>8}  {entry['status']}  {entry.get('why', '')}")


if __name__ == "__main__":
    main()
