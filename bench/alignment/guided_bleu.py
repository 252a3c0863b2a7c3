"""Does guided alignment cost BLEU? The same model trained with and without eflomal's guidance, several seeds, the
same number of updates, one run of this script, then test BLEU/chrF greedy and beam 5.

    python -m bench.alignment.guided_bleu [--models luong] [--seeds 1 2] [--updates 300] [--parallel 2] [--data DIR] \
        [--guide data.align=eflomal loss.align_weight=0.05] [--json bench/results/guided_bleu.json]

Each run is ``train.py experiment=tatoeba_<model>`` bounded by updates alone (no time budget, so a busy machine
changes no figure), on one thread, ``--parallel`` runs at a time, all on one data cache (prepared once, eflomal's links
computed once). The guided runs add ``--guide`` (for the Transformer also ``loss.align_layer=-2 loss.align_head=0``,
head 0 of the penultimate layer, as OpenNMT-py guides). The JSON holds every run and, per model and condition, the
mean, lowest and highest score over the seeds, and the guided minus plain mean.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sacrebleu
import torch

from bench.common import ROOT, corpus_overrides, options, table, write_json
from nmt import checkpoint
from nmt.data.readers import read_tsv
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator

TRANSFORMER_GUIDE = ["loss.align_layer=-2", "loss.align_head=0"]
SMALL_TRANSFORMER = [  # the 3+3 size that uses a short budget best (docs: results)
    "model.encoder.num_layers=3",
    "model.decoder.num_layers=3",
    "optim.lr=1e-3",
    "schedule.scheduler.warmup_steps=400",
]


def train(model: str, seed: int, guided: bool, args, cache: str, runs: Path) -> Path:
    run_dir = runs / f"{model}_{'guided' if guided else 'plain'}_seed{seed}"
    overrides = [f"experiment=tatoeba_{model}", *corpus_overrides(args.data, cache), f"seed={seed}"]
    overrides += SMALL_TRANSFORMER if model == "transformer" else []
    if guided:
        overrides += args.guide + (TRANSFORMER_GUIDE if model == "transformer" else [])
    overrides += [
        f"trainer.max_steps={args.updates}",
        "trainer.max_time=null",
        "trainer.max_epochs=100",
        "callbacks.early_stopping=null",
        "trainer.enable_progress_bar=false",
        "data.num_workers=0",
        "run_test=false",
        f"hydra.run.dir={run_dir}",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    log = run_dir.with_suffix(".log")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        subprocess.run(
            [sys.executable, str(ROOT / "train.py"), *overrides],
            env=env,
            cwd=ROOT,
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return run_dir


def score(run_dir: Path, test) -> dict:
    loaded = checkpoint.load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    out = {"updates": torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]}
    for name, beam in (("greedy", 1), ("beam 5", 5)):
        translator = Translator(
            loaded.model, loaded.tokenizer, SearchOptions(beam_size=beam), Batching(64, "sentences")
        )
        hyps = [r.text for r in translator.translate(test.src)]
        out[name] = {
            "bleu": round(sacrebleu.corpus_bleu(hyps, [test.tgt]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [test.tgt]).score, 2),
        }
    return out


def spread(values: list[float]) -> dict:
    return {"mean": round(statistics.mean(values), 2), "min": min(values), "max": max(values)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "models", models=["luong"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    p.add_argument("--updates", type=int, default=300, help="updates of every run (default: %(default)s)")
    p.add_argument("--parallel", type=int, default=2, help="runs at a time, one thread each (default: %(default)s)")
    p.add_argument("--guide", nargs="+", default=["data.align=eflomal", "loss.align_weight=0.05"])
    options(p, "data", "cache", cache=None)
    p.add_argument("--runs", default=str(ROOT / "runs" / "guided_bleu"), help="run folders (default: %(default)s)")
    options(p, "json")
    args = p.parse_args()
    cache, runs = args.cache or tempfile.mkdtemp(prefix="nmt-guided-cache-"), Path(args.runs).resolve()
    jobs = [(m, s, g) for m in args.models for s in args.seeds for g in (False, True)]
    with ThreadPoolExecutor(args.parallel) as pool:
        dirs = list(pool.map(lambda job: train(*job, args, cache, runs), jobs))
    torch.set_num_threads(2)
    test = read_tsv(args.data / "test.tsv")
    rows = [{"model": m, "seed": s, "guided": g, **score(d, test)} for (m, s, g), d in zip(jobs, dirs)]
    summary = []
    for model in args.models:
        for guided in (False, True):
            mine = [r for r in rows if r["model"] == model and r["guided"] == guided]
            summary.append(
                {
                    "model": model,
                    "guided": guided,
                    **{k: spread([r[k]["bleu"] for r in mine]) for k in ("greedy", "beam 5")},
                }
            )
    for model in args.models:
        plain, guided = (next(s for s in summary if s["model"] == model and s["guided"] == g) for g in (False, True))
        for s in (plain, guided):
            s["guided_minus_plain_beam5"] = round(guided["beam 5"]["mean"] - plain["beam 5"]["mean"], 2)
    flat = [
        {
            "model": r["model"],
            "seed": r["seed"],
            "guided": r["guided"],
            "updates": r["updates"],
            "greedy": r["greedy"]["bleu"],
            "beam5": r["beam 5"]["bleu"],
        }
        for r in rows
    ]
    print(table(flat, ["model", "seed", "guided", "updates", "greedy", "beam5"]))
    write_json(
        args.json,
        {
            "updates": args.updates,
            "seeds": args.seeds,
            "guide": args.guide,
            "threads_per_run": 1,
            "runs": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
