"""Quality after a wall-clock training budget on real data, as in the JoeyNMT anchor.

    python -m bench.quality.quality --model bahdanau [--budget 00:00:15:00] [--data DIR] [--threads 2]
    python -m bench.quality.quality --model transformer --tag small model.encoder.num_layers=3 ...    # a variant
    python -m bench.quality.quality --model transformer --experiment tatoeba_fast --tag seed2 seed=2  # another one

Runs `train.py experiment=tatoeba_<model>` (or --experiment) on --threads CPU threads until the budget is spent,
counted from the launch of train.py: start-up, data preparation (sentencepiece training and encoding, on a cold cache: a
new cache folder unless --cache is given) and validation count against it, as for JoeyNMT. Then translates the test
split with the final checkpoint, greedy and beam 5, and scores it with sacrebleu (detokenised output against the raw
references, default 13a tokenisation), on the whole split and on its unseen part: the pairs whose English side is not
among the training targets of the run (nmt.data.targets, read from the run's own config). The translations are kept
beside the JSON (bench/results/hypotheses/, gzipped), so that a record can be scored again. --data is a folder with the
splits train.tsv, valid.tsv and test.tsv (default data/fra-eng), e.g. a copy of the Tatoeba splits JoeyNMT's anchor was
measured on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.common import MODELS, ROOT, corpus_overrides, cpu, options, peak_rss_gib, table, write_json
from bench.quality import hypotheses
from bench.quality.curve import run_targets, trained_settings
from nmt import checkpoint
from nmt.data.readers import Pairs, read_tsv
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator
from nmt.scores import bleu_signature, score_split

COLUMNS = ["model", "search", "bleu", "chrf", "unseen_bleu", "unseen_chrf", "unseen_sentences", "sentences"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="bahdanau", choices=MODELS)
    p.add_argument("--experiment", help="another experiment of --model's family (e.g. tatoeba_fast)")
    p.add_argument("--tag", default="", help="names the run and the JSON file of a variant given by overrides")
    p.add_argument("overrides", nargs="*", help="more train.py overrides")
    p.add_argument("--budget", default="00:00:15:00", help="DD:HH:MM:SS, start-up and data preparation included")
    options(p, "data", "cache", "threads", cache=None)
    p.add_argument("--run-dir", default=None)
    options(p, "json", json=None)
    args = p.parse_args()
    name = (args.experiment or args.model) + (f"_{args.tag}" if args.tag else "")
    run_dir = Path(args.run_dir or ROOT / "runs" / f"bench_quality_{name}").resolve()
    wall = train(args, run_dir)
    torch.set_num_threads(args.threads)
    module = checkpoint.load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    json_path = Path(args.json or f"bench/results/quality_{name}.json")
    rows, signature = scored(module, read_tsv(args.data / "test.tsv"), run_targets(run_dir), name, json_path)
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")
    steps, epochs = ckpt["global_step"], ckpt["epoch"]
    print(f"{name}: {wall / 60:.1f} min wall-clock (budget {args.budget}), {steps} updates, epoch {epochs}, "
          f"peak RSS {peak_rss_gib(True):.2f} GiB")  # fmt: skip
    print(table(rows, COLUMNS))
    experiment = args.experiment or f"tatoeba_{args.model}"
    out = {"model": name, "experiment": experiment, "overrides": args.overrides, "threads": args.threads, "cpu": cpu(),
           "settings": trained_settings(run_dir),
           "parameters": sum(p.numel() for p in module.model.parameters()),
           "budget": args.budget, "wall_min": round(wall / 60, 2), "updates": steps, "epoch": epochs}  # fmt: skip
    out |= {"peak_rss_gib": round(peak_rss_gib(True), 3), "bleu_signature": signature, "runs": rows}
    write_json(json_path, out)


def train(args: argparse.Namespace, run_dir: Path) -> float:
    """train.py on the splits of ``--data`` in ``run_dir``, stopped at the budget counted from its launch; the
    wall-clock seconds it took."""
    d, h, m, s = (int(x) for x in args.budget.split(":"))
    budget_s = ((d * 24 + h) * 60 + m) * 60 + s
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), PYTHONPATH=str(ROOT))
    cache = args.cache or tempfile.mkdtemp(prefix="nmt-quality-cache-")
    start, launched = time.perf_counter(), time.time()
    cmd = [sys.executable, str(ROOT / "train.py"), f"experiment={args.experiment or f'tatoeba_{args.model}'}",
           *corpus_overrides(args.data, cache), f"hydra.run.dir={run_dir}", "run_test=false",
           "trainer.enable_progress_bar=false", "trainer.max_epochs=100", "callbacks.early_stopping=null",
           "data.num_workers=0",
           # the budget runs from the launch: start-up and data preparation count (Lightning's max_time would not)
           f"+callbacks.deadline.at={launched + budget_s}", *args.overrides]  # fmt: skip
    subprocess.run(cmd, env=env, cwd=ROOT, check=True)
    return time.perf_counter() - start


def translate(model, tokenizer, test: Pairs, beam: int) -> list[str]:
    """``model``'s translations of ``test``'s sources, greedy (``beam`` 1) or by beam search."""
    translator = Translator(model, tokenizer, SearchOptions(beam_size=beam), Batching(64, "sentences"))
    return [r.text for r in translator.translate(test.src)]


def searches(model, tokenizer, test: Pairs, seen: frozenset, json_path: Path, label=lambda search: search) -> list:
    """Greedy search and beam 5: each one's test BLEU and chrF, on the whole split and on its parts unseen and seen in
    training (:func:`nmt.scores.score_split`), its translations kept beside ``json_path`` under ``label(search)``."""
    rows = []
    for search, beam in (("greedy", 1), ("beam 5", 5)):
        hyps = translate(model, tokenizer, test, beam)
        kept = hypotheses.write(json_path, label(search), hyps)
        rows.append({"search": search, **score_split(hyps, test.tgt, seen).record(), "hypotheses": kept})
    return rows


def scored(module: checkpoint.Loaded, test: Pairs, seen: frozenset, name: str, json_path: Path) -> tuple[list, str]:
    """:func:`searches` of ``module``, each row naming the model; and BLEU's signature."""
    rows = searches(module.model, module.tokenizer, test, seen, json_path)
    return [{"model": name} | r for r in rows], bleu_signature()


if __name__ == "__main__":
    main()
