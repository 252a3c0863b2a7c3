"""Preparation and training memory at WMT scale: corpora of 1M, 5M, 10M (and 40M) pairs.

    python -m bench.speed.data_scale [--data DIR] [--sizes 1000000 5000000 10000000 40000000] [--work /tmp/data_scale]

Builds each corpus in ``--work`` (outside the repository) by repeating the train.tsv of ``--data`` (a folder with
the splits train.tsv, valid.tsv and test.tsv, e.g. a copy of the Tatoeba splits; default data/fra-eng) with a
distinct suffix on each copy (valid/test: that folder's own), then, each in a fresh process:

* prepares it (experiment=tatoeba_luong's data settings, the batch plan included): wall time,
  pairs/s, the peak memory of the process tree (sum of PSS, sampled every 0.2 s, and the largest
  single RSS), size on disk;
* starts a run on the warm cache: seconds from process start to the first training step, and the
  data part of it (cache key, mapping the arrays and the saved batch plan, the first batch);
* trains 50 steps (Luong, 2,400 padded tokens a batch, one loader worker) and reads the RSS then.

With ``--baseline DIR`` (a checkout of earlier code) the smallest corpus is also prepared by that code.

It also plans a 40M-pair epoch (BatchPlan.compute) from tiled Tatoeba lengths, whatever the sizes, and
times the first batch of an epoch and the draw of the next 10,000.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import ROOT, table, write_json  # names older common.py files have: --baseline runs this file with one

PAGE = os.sysconf("SC_PAGE_SIZE")


def build_corpus(src: Path, n: int, out: Path) -> Path:
    """``n`` pairs: copies of ``src``, each pair's sides ending in `` #k`` for copy k."""
    if out.is_file() and out.with_suffix(".ok").is_file():
        return out
    lines = [line.split("\t") for line in src.read_text(encoding="utf-8").splitlines() if "\t" in line]
    tmp = out.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as f:
        written, k = 0, 0
        while written < n:
            take = lines[: n - written]
            f.write("".join(f"{fr} #{k}\t{en.rstrip()} #{k}\n" for fr, en, *_ in take))
            written, k = written + len(take), k + 1
    tmp.replace(out)
    out.with_suffix(".ok").touch()
    return out


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc."""
    parents: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parents.get(pid, [])
    return out


def _memory(pids: list[int]) -> tuple[int, int]:
    """(sum of PSS, largest RSS) in bytes over ``pids``."""
    pss, rss = 0, 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
                elif line.startswith("Rss:"):
                    rss = max(rss, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return pss, rss


def run_child(args: list[str], data: Path, tree: Path = ROOT) -> tuple[dict, float, int, int]:
    """Run this script (from the checkout ``tree``, its ``nmt`` first on the path) in a child mode on the splits in
    ``data``: its JSON result, wall seconds, peak tree PSS and peak single RSS."""
    script = tree / "bench" / "speed" / "data_scale.py"
    if tree != ROOT:  # an older checkout: the same measurement of its own code (its bench/common.py and nmt/)
        script.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(__file__, script)
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "bench.speed.data_scale", *args, "--data", str(data.resolve())]
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=tree, env=env)
    peak = [0, 0]

    def sample() -> None:
        while proc.poll() is None:
            pss, rss = _memory(_tree(proc.pid))
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    sampler.join()
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"child {args} failed with {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1]), wall, peak[0], peak[1]


def _cfg(corpus: str, data: Path, cache: str, extra: list[str]):
    from bench.common import compose

    d = data.resolve()
    return compose(
        [
            "experiment=tatoeba_luong",
            f"data.source.path={corpus}",
            f"data.source.valid={d / 'valid.tsv'}",
            f"data.source.test={d / 'test.tsv'}",
            f"data.cache_dir={cache}",
            *extra,
        ]
    )


def child_prepare(corpus: str, data: Path, cache: str) -> dict:
    """Preparation as training starts it: the corpus, then its batch plan (no Lightning object)."""
    from bench.common import prepared_corpus
    from nmt.data.batching import BatchPlan

    cfg = _cfg(corpus, data, cache, [])
    prepared = prepared_corpus(cfg)
    BatchPlan.cached(prepared.splits["train"], cfg.data.max_tokens, float("inf"))
    stats = prepared.stats
    return {"prepared": str(prepared.directory), "stats": stats | {"seconds": stats.get("seconds", {})}}


def child_train(corpus: str, data: Path, cache: str, steps: int, started: float) -> dict:
    import lightning as L
    import torch
    from hydra.utils import instantiate

    from nmt.training.module import TranslationModule

    torch.set_num_threads(2)
    t = time.time()
    cfg = _cfg(corpus, data, cache, ["data.num_workers=1"])
    dm = instantiate(cfg.data)
    dm.prepare_data()  # a cache hit: the key (content hashes from the size-and-mtime index) and a directory check
    dm.setup("fit")
    loader = dm.train_dataloader()  # reads the batch plan that preparation saved
    next(iter(loader.sampler))  # the first epoch's first batch
    data_s = time.time() - t
    module = TranslationModule.from_config(cfg, dm.tokenizer)
    marks: dict[str, float] = {}

    class Marks(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            marks.setdefault("first_step", time.time())

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step >= steps:
                status = Path("/proc/self/status").read_text().splitlines()
                marks["rss"] = next(int(x.split()[1]) * 1024 for x in status if x.startswith("VmRSS:"))

    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[Marks()],
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=dm)
    return {
        "data_start_s": round(data_s, 2),
        "start_to_first_step_s": round(marks["first_step"] - started, 2),
        "train_rss_gib": round(marks["rss"] / 2**30, 3),
    }


def child_sampler(data: Path, pairs: int) -> dict:
    """Plan a ``pairs``-pair epoch from tiled Tatoeba lengths; seconds and memory."""
    import numpy as np

    from bench.common import prepared_corpus
    from nmt.data.batching import BatchPlan, TokenBucketSampler

    c = prepared_corpus(_cfg(str(data.resolve() / "train.tsv"), data, "data", [])).splits["train"]
    reps = -(-pairs // len(c))
    src, tgt = np.tile(c.src_lens, reps)[:pairs], np.tile(c.tgt_lens, reps)[:pairs]
    t = time.perf_counter()
    plan = BatchPlan.compute(src, tgt, 2400, float("inf"))
    plan_s = time.perf_counter() - t
    s = TokenBucketSampler(src, tgt, 2400, seed=1, plan=plan)
    t = time.perf_counter()
    s.set_epoch(1)
    batches = iter(s)
    first = next(batches)
    epoch_s = time.perf_counter() - t
    t = time.perf_counter()
    n = sum(1 for _ in zip(range(10_000), batches))
    per_batch_us = (time.perf_counter() - t) / n * 1e6
    return {
        "pairs": pairs,
        "batches": len(s),
        "plan_s": round(plan_s, 2),
        "epoch_first_batch_s": round(epoch_s, 4),
        "batch_draw_us": round(per_batch_us, 1),
        "plan_bytes_per_pair": round(sum(a.nbytes for a in (plan.order, plan.bounds, plan.ties)) / pairs, 2),
        "first_batch": len(first),
    }


def one_size(n: int, data: Path, work: Path, args: argparse.Namespace) -> dict:
    """A corpus of ``n`` pairs built from the training split: its preparation (seconds, peak memory, disk) and a few
    training steps on it, each in a child process; with ``--baseline``, the smallest size prepared by that code too."""
    corpus = build_corpus(data / "train.tsv", n, work / f"train_{n}.tsv")
    cache = work / f"cache_{n}"
    shutil.rmtree(cache, ignore_errors=True)
    prepared, wall, pss, rss = run_child(["--child", "prepare", str(corpus), str(cache)], data)
    disk = sum(f.stat().st_size for f in Path(prepared["prepared"]).rglob("*") if f.is_file())
    train, _, _, _ = run_child(["--child", "train", str(corpus), str(cache), str(args.steps), str(time.time())], data)
    row = {
        "pairs": n,
        "tsv_mb": round(corpus.stat().st_size / 2**20),
        "prepare_s": round(wall, 1),
        "pairs_per_s": round(n / wall),
        "prepare_peak_pss_gib": round(pss / 2**30, 3),
        "prepare_peak_rss_gib": round(rss / 2**30, 3),
        "prepared_mb": round(disk / 2**20),
        "kept": prepared["stats"]["train"]["kept"],
        **{f"{phase}_s": t for phase, t in prepared["stats"]["seconds"].items()},
        **train,
    }
    if args.baseline and n == min(args.sizes):
        base_cache = work / f"baseline_cache_{n}"
        _, wall, pss, rss = run_child(["--child", "prepare", str(corpus), str(base_cache)], data, Path(args.baseline))
        shutil.rmtree(base_cache, ignore_errors=True)
        row |= {"baseline_prepare_s": round(wall, 1), "baseline_pairs_per_s": round(n / wall)}
        row |= {"baseline_peak_pss_gib": round(pss / 2**30, 3), "baseline_peak_rss_gib": round(rss / 2**30, 3)}
    if not args.keep:
        corpus.unlink()
        corpus.with_suffix(".ok").unlink()
        shutil.rmtree(cache, ignore_errors=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data",
        type=Path,
        default=ROOT / "data" / "fra-eng",
        metavar="DIR",
        help="a folder of the splits train.tsv, valid.tsv and test.tsv (French<TAB>English), e.g. a copy of the "
        "Tatoeba splits (default: %(default)s)",
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    p.add_argument("--work", default="/tmp/data_scale")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--sampler-pairs", type=int, default=40_000_000)
    p.add_argument("--keep", action="store_true", help="keep the corpora and caches (they are removed after use)")
    p.add_argument("--baseline", help="a checkout of earlier code: prepare the smallest size with it too")
    p.add_argument("--json", default="bench/results/data_scale.json")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        mode, *rest = args.child  # --data: the parent's, checked and absolute
        if mode == "prepare":
            result = child_prepare(rest[0], args.data, rest[1])
        elif mode == "train":
            result = child_train(rest[0], args.data, rest[1], int(rest[2]), float(rest[3]))
        else:
            result = child_sampler(args.data, int(rest[0]))
        print(json.dumps(result))
        return
    from bench.common import check, splits

    data = check(p, "--data", splits, args.data)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sampler, _, _, sampler_rss = run_child(["--child", "sampler", str(args.sampler_pairs)], data)
    sampler["peak_rss_gib"] = round(sampler_rss / 2**30, 3)
    print("sampler:", sampler)
    rows = []
    for n in args.sizes:
        rows.append(one_size(n, data, work, args))
        print(table(rows[-1:], list(rows[-1])))
    print(table(rows, list(rows[0])))
    command = "python -m bench.speed.data_scale " + " ".join(sys.argv[1:])
    write_json(args.json, {"command": command, "cores": len(os.sched_getaffinity(0)), "sampler": sampler, "rows": rows})


if __name__ == "__main__":
    main()
