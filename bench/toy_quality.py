"""The built-in corpus with the defaults: wall-clock time and test BLEU, chrF and attention AER, both models.

    python bench/toy_quality.py [--models bahdanau luong] [--threads 2]

Runs `python train.py model=<name>` exactly as the quick start does (the corpus is generated on a
cold cache, so generation and sentencepiece training count), then reads the test scores that
train.py logged to TensorBoard (the best checkpoint on the test split). The runs stay in
runs/bench_toy_<name> (bench/alignment.py reads them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

from common import ROOT, table, write_json
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["bahdanau", "luong"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", default="bench/results/toy_quality.json")
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=str(ROOT))
    rows = []
    for model in args.models:
        run_dir = ROOT / "runs" / f"bench_toy_{model}"
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [sys.executable, str(ROOT / "train.py"), f"model={model}", f"hydra.run.dir={run_dir}"]
        cmd += [f"data.cache_dir={run_dir / 'cache'}", "trainer.enable_progress_bar=false"]  # cold: a new folder
        start = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)
        wall = time.perf_counter() - start
        events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
        events.Reload()
        last = {tag: events.Scalars(tag)[-1].value for tag in ("test/bleu", "test/chrf", "test/aer")}
        steps = events.Scalars("train/loss")[-1].step
        row = {"model": model, "wall_min": round(wall / 60, 2), "updates": steps}
        row |= {"test_bleu": round(last["test/bleu"], 1), "test_chrf": round(last["test/chrf"], 1)}
        rows.append(row | {"test_aer": round(last["test/aer"], 3)})
        print(table(rows[-1:], list(rows[-1])), flush=True)
    print(table(rows, list(rows[0])))
    write_json(args.json, {"threads": args.threads, "command": "python train.py model=<model>", "runs": rows})


if __name__ == "__main__":
    main()
