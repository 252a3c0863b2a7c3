"""Training speed of our Transformer against JoeyNMT 2.3.0's, in turn on the same machine (the anchor's sizes).

    python -m bench.anchors.joeynmt_transformer --venv /path/to/joeynmt-venv --work /path/to/anchor-work
        [--joeynmt-anchor DIR] [--rounds 2]

--joeynmt-anchor is the JoeyNMT 2.3 anchor's folder (default data/anchors/joeynmt: transformer.yaml, run_train.sh,
train_budget.py, parse_train_log.py); --work a folder made by its prep_data.py (plaintext splits and the
sentencepiece models); --venv a virtual environment with JoeyNMT 2.3.0 (see the anchor's README). Each round runs
  1. JoeyNMT's Transformer anchor (transformer.yaml, logging every 2 updates) for --seconds on 2 threads
     through the anchor's run_train.sh; its steady-state target tokens/s is the median of JoeyNMT's own
     "Tokens per Sec" log values after the first 60 s (the anchor's parse_train_log.py);
  2. ours, experiment=tatoeba_transformer, through bench/speed/train_speed.py at JoeyNMT's batch (--max-tokens
     1860: ~1,610 real target tokens, what JoeyNMT's 4,096 padded tokens without bucketing give) and at ours
     (2,400: ~2,080).
The ratios are of medians over the rounds. With ``--precision 32-true bf16-mixed`` ours runs at each (JoeyNMT's anchor
trains in float32: ``fp16: False``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import DATA, ROOT, joeynmt_anchor, options, table, write_json


def joeynmt_round(anchor: Path, venv: Path, work: Path, seconds: int) -> dict:
    """One JoeyNMT Transformer run of ``seconds`` (the scripts and config of the anchor's folder ``anchor``): its
    steady-state tokens/s and what its log says."""
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        for name in ("run_train.sh", "train_budget.py", "parse_train_log.py"):
            shutil.copy(anchor / name, here / name)
        config = (anchor / "transformer.yaml").read_text().replace("logging_freq: 50", "logging_freq: 2")
        (here / "transformer.yaml").write_text(config)
        shutil.rmtree(work / "models" / "transformer", ignore_errors=True)
        env = dict(os.environ, VENV=str(venv), WORK=str(work), BUDGET_S=str(seconds), CONFIG="transformer")
        subprocess.run(["bash", str(here / "run_train.sh")], env=env, check=True, capture_output=True)
        log = work / "models" / "transformer" / "train.log"
        out = subprocess.run(
            [str(venv / "bin" / "python"), str(here / "parse_train_log.py"), str(log), "--skip", "60"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    parsed = json.loads(out)
    keep = ("tok_per_s_steady_median", "tok_per_s_steady_min_max", "n_log_intervals_used", "updates", "params")
    return {k: parsed[k] for k in keep}


def ours_round(steps: int, precisions: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speed.json"
        cmd = [sys.executable, "-m", "bench.speed.train_speed", "--models", "transformer"]
        cmd += ["--max-tokens", "1860", "2400", "--steps", str(steps), "--warmup", "10", "--json", str(out)]
        cmd += ["--precision", *precisions]
        subprocess.run(cmd, check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        data = json.loads(out.read_text())
    gemm = data["gemm_gflops_per_s"]
    dtype = {"32-true": "float32", "bf16-mixed": "bfloat16"}
    return [r | {"gemm_gflops_per_s": gemm[dtype[r["precision"]]]} for r in data["runs"]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--venv", required=True, type=Path)
    p.add_argument("--work", required=True, type=Path)
    p.add_argument(
        "--joeynmt-anchor",
        type=joeynmt_anchor,
        default=str(DATA / "anchors" / "joeynmt"),
        metavar="DIR",
        help="the JoeyNMT 2.3 anchor's folder: transformer.yaml, run_train.sh, train_budget.py, parse_train_log.py "
        "(default: %(default)s)",
    )
    p.add_argument("--seconds", type=int, default=240)
    p.add_argument("--steps", type=int, default=60, help="our timed updates per batch size")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--precision", nargs="+", default=["32-true"], help="ours at each (e.g. 32-true bf16-mixed)")
    options(p, "json")
    args = p.parse_args()
    rounds = []
    for r in range(args.rounds):
        joey = joeynmt_round(args.joeynmt_anchor, args.venv.resolve(), args.work.resolve(), args.seconds)
        ours = ours_round(args.steps, args.precision)
        rounds.append({"joeynmt": joey, "ours": ours})
        print(f"round {r + 1}: JoeyNMT {joey['tok_per_s_steady_median']} tokens/s; ours", flush=True)
        columns = ["max_tokens", "precision", "tgt_tokens_per_batch", "tgt_tokens_per_s", "fraction_of_gemm"]
        print(table(ours, columns), flush=True)
    joey = statistics.median(r["joeynmt"]["tok_per_s_steady_median"] for r in rounds)
    joey_row = {"system": "JoeyNMT 2.3.0", "precision": "32-true", "batch": "4,096 padded tokens"}
    rows = [joey_row | {"tgt_tokens_per_s": joey, "ratio": 1.0}]
    for max_tokens, precision in itertools.product((1860, 2400), args.precision):
        runs = [o for r in rounds for o in r["ours"] if (o["max_tokens"], o["precision"]) == (max_tokens, precision)]
        speed = statistics.median(o["tgt_tokens_per_s"] for o in runs)
        batch = round(statistics.median(o["tgt_tokens_per_batch"] for o in runs))
        rows.append(
            {
                "system": "ours",
                "precision": precision,
                "batch": f"{max_tokens} padded tokens (~{batch} real target tokens)",
                "tgt_tokens_per_s": speed,
                "ratio": round(speed / joey, 2),
                "fraction_of_gemm": statistics.median(o["fraction_of_gemm"] for o in runs),
            }
        )
    print(table(rows, list(rows[-1])))
    write_json(args.json, {"seconds": args.seconds, "threads": 2, "summary": rows, "rounds": rounds})


if __name__ == "__main__":
    main()
