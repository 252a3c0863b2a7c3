"""The built-in corpus with the defaults: wall-clock time and test BLEU, chrF and attention AER, each model.

    python -m bench.quality.toy_quality [--models bahdanau luong transformer] [--threads 2]
    python -m bench.quality.toy_quality --tag guided loss.align_weight=0.1 ...  # runs/bench_toy_<model>_<tag>

Runs `python train.py model=<name>` exactly as the quick start does (the corpus is generated on a
cold cache, so generation and sentencepiece training count), then reads the test scores the run
left in its results.json (the best checkpoint on the test split): test aer is the AER of the attention
choice (layer, head, readout) of lowest validation AER, which the checkpoint records. The runs stay in
runs/bench_toy_<name> (bench/alignment/alignment.py reads them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

from bench.common import ROOT, options, table, write_json
from nmt.training.results import RunResults


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "models")
    p.add_argument("--tag", default="", help="names the runs and the JSON file of a variant given by overrides")
    p.add_argument("overrides", nargs="*", help="more train.py overrides, e.g. loss.align_weight=0.1")
    options(p, "threads", "json", json=None)
    args = p.parse_args()
    suffix = f"_{args.tag}" if args.tag else ""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    rows = []
    for model in args.models:
        run_dir = ROOT / "runs" / f"bench_toy_{model}{suffix}"
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, str(ROOT / "train.py"), f"model={model}", f"hydra.run.dir={run_dir}", *args.overrides]
        cmd += [f"data.cache_dir={run_dir / 'cache'}", "trainer.enable_progress_bar=false"]  # cold: a new folder
        start = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)
        wall = time.perf_counter() - start
        results = RunResults.read(run_dir)  # what the run left in its directory
        row = {"model": model, "wall_min": round(wall / 60, 2), "updates": results.step}
        row |= {"test_bleu": round(results.test["bleu"], 1), "test_chrf": round(results.test["chrf"], 1)}
        rows.append(row | {"test_aer": round(results.test["aer"], 3), "alignment": results.alignment})
        print(table(rows[-1:], list(rows[-1])), flush=True)
    print(table(rows, list(rows[0])))
    command = " ".join(["python train.py model=<model>", *args.overrides])
    out = {"threads": args.threads, "command": command, "runs": rows}
    write_json(args.json or f"bench/results/toy_quality{suffix}.json", out)


if __name__ == "__main__":
    main()
