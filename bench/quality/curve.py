"""Quality against training time: dev BLEU at regular points of a training clock, ours and JoeyNMT 2.3.0's.

    python -m bench.quality.curve --run ours --model transformer [--experiment NAME] [--tag NAME] [overrides ...]
                                  [--budget-min 30] [--every-min 1]
    python -m bench.quality.curve --run joeynmt --config rnn_bahdanau --joeynmt-venv DIR --joeynmt-work DIR
                                  [--budget-min 30]
    python -m bench.quality.curve --plot bench/results/curves/*.json [--out docs/results/curves.png] [--json SUMMARY]
                                  [--reference RUN ...]

The training clock runs from the launch of training, as bench/quality/quality.py counts it (start-up and, on a cold
cache, data preparation count), and stops while the run evaluates or writes a snapshot: those seconds are reported
apart. Ours: train.py experiment=tatoeba_<model> with validation off and the callback TrainingClock below, which writes
the weights every --every-min minutes of that clock and stops training at --budget-min; each snapshot is then scored on
a fixed sample of the validation split (--valid-sentences, seeded), greedy, sacrebleu BLEU and chrF (detokenised output
against the raw references, 13a), on the whole sample and on its unseen part (the pairs whose English side is not among
the run's training targets: nmt.scores). JoeyNMT: its anchor configuration (--joeynmt-anchor) validating on the same
sample every --validation-freq updates (about every 1-2 minutes), stopped after its first validation at or past the
budget; its curve is read from its train.log, its validations' durations (from the log's timestamps) taken out of its
clock, and each validation's translations (its <step>.hyps) scored on the unseen part of the sample. --plot draws BLEU
against minutes for the runs given and writes, for each, the minutes to reach BLEU 20, 30, 40 and 50 (linear
interpolation between points; null if never reached), and for each of ours against each JoeyNMT run of the same family
(RNN or Transformer) how much sooner ours reaches the BLEU JoeyNMT has at its budget; with --reference RUN (repeatable),
what each other run of ours changed against the reference of its model at its commit (an A/B chain, measured beside it),
else the first given: its composed settings that differ, its dev BLEU against it at the end of the shorter curve, at 15
and 30 minutes. A schedule=budgeted run is its own curve per budget.
Every result names its CPU (model, avx512_bf16, amx_bf16) and, for a run with trainer=gpu, its GPU (where its
snapshots are scored too); runs of different machines are never compared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import torch

from bench import common
from bench.anchors import joeynmt_curve
from bench.common import DATA, MODELS, ROOT, check, corpus_overrides, cpu, gpu, options, splits, table, write_json
from bench.quality import recorded_settings, records
from nmt.data.readers import Pairs, read_tsv
from nmt.training.callbacks import target_tokens
from nmt.training.schedules import TimeBudget

THRESHOLDS = (20, 30, 40, 50)
FAMILY = {"bahdanau": "rnn", "luong": "rnn", "rnn_bahdanau": "rnn", "transformer": "transformer",
          "transformer_fast": "transformer"}
RESULTS = Path("bench/results/curves")


class TrainingClock(L.Callback):
    """Snapshots of the weights (``dirpath``/clock-<update>.ckpt) every ``every_s`` seconds of a training clock that
    runs from ``launched`` (``time.time()`` at the launch of train.py) and stops while the run validates or writes a
    snapshot; training stops when the clock reaches ``budget_s``, after a last snapshot. Each snapshot is a line of
    ``dirpath``/clock.jsonl: its clock minutes, update, real target tokens so far, the seconds its writing took."""

    def __init__(self, launched: float, every_s: float, budget_s: float, dirpath: str):
        self.launched, self.every_s, self.budget_s, self.dirpath = launched, every_s, budget_s, Path(dirpath)
        self.paused = 0.0  # seconds of validation and of writing snapshots, kept out of the clock
        self.next_s, self.tokens, self.saved_step, self._since = every_s, 0, -1, 0.0

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.is_global_zero:  # train.py refuses a run directory with snapshots: any record is a failed run's
            self.dirpath.mkdir(parents=True, exist_ok=True)
            (self.dirpath / "clock.jsonl").write_text("")

    def clock(self) -> float:
        return time.time() - self.launched - self.paused

    def budget(self) -> TimeBudget:
        """The budget on this clock, for a schedule that anneals to the end of the run (``schedule=budgeted``)."""
        return TimeBudget(self.clock, self.budget_s)

    def on_validation_start(self, *_) -> None:
        self._since = time.time()

    def on_validation_end(self, *_) -> None:
        self.paused += time.time() - self._since

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs, batch, batch_idx) -> None:
        self.tokens += target_tokens(batch)  # counted on the host by the loader: no device read
        now = self.clock()
        if now >= min(self.next_s, self.budget_s):
            self.snapshot(trainer, now)
            self.next_s = (math.floor(now / self.every_s) + 1) * self.every_s
        if now >= self.budget_s:
            trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.global_step != self.saved_step:  # training ended before the budget (max_epochs, max_steps)
            self.snapshot(trainer, self.clock())

    def snapshot(self, trainer: L.Trainer, now: float) -> None:
        start = time.time()
        path = self.dirpath / f"clock-{trainer.global_step}.ckpt"
        trainer.save_checkpoint(path, weights_only=True)
        took = time.time() - start
        self.paused, self.saved_step = self.paused + took, trainer.global_step
        if trainer.is_global_zero:
            record = {"minutes": round(now / 60, 4), "step": trainer.global_step, "tokens": int(self.tokens),
                      "save_s": round(took, 3), "ckpt": path.name}  # fmt: skip
            with (self.dirpath / "clock.jsonl").open("a") as f:
                f.write(json.dumps(record) + "\n")


def trained_on(run_dir: Path) -> str:
    """Where the run in ``run_dir`` trained (its snapshots are scored there): ``cuda`` for gpu or cuda, else ``cpu``."""
    from omegaconf import OmegaConf

    accelerator = OmegaConf.load(run_dir / ".hydra" / "config.yaml").trainer.accelerator
    return "cuda" if accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available()) else "cpu"


def valid_sample(data: Path, n: int, seed: int) -> tuple[Pairs, dict]:
    """A fixed sample of ``n`` pairs of the validation split (seeded, in file order: the split is sorted by length, so
    its first lines would be its shortest), and how to name it: file, size, seed and a digest of its lines."""
    pairs = read_tsv(data / "valid.tsv")
    picked = pairs.select(sorted(random.Random(seed).sample(range(len(pairs)), min(n, len(pairs)))))
    digest = hashlib.sha256("".join(f"{s}\t{t}\n" for s, t in zip(picked.src, picked.tgt)).encode()).hexdigest()
    return picked, {"file": str(data / "valid.tsv"), "sentences": len(picked), "seed": seed, "sha256": digest[:16]}


# --- ours -----------------------------------------------------------------------------------------------------------


def experiment(args: argparse.Namespace) -> str:
    """The experiment trained: ``--experiment``, else the reference one of ``--model``."""
    return args.experiment or f"tatoeba_{args.model}"


def train_ours(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """train.py on ``--threads`` threads with the training clock; the overrides it was given."""
    cache = args.cache or tempfile.mkdtemp(prefix="nmt-curve-cache-")
    launched = time.time()
    snapshots = run_dir / "snapshots"
    overrides = [f"experiment={experiment(args)}", *corpus_overrides(args.data, cache), f"hydra.run.dir={run_dir}",
                 "run_test=false", "trainer.enable_progress_bar=false", "trainer.max_epochs=100",
                 f"data.prepare.num_proc={args.threads}",
                 # validation off: no evaluation in the clock (the snapshots are scored afterwards)
                 "+trainer.limit_val_batches=0", "callbacks.early_stopping=null", "callbacks.heatmaps=null",
                 "callbacks.checkpoint.save_top_k=0", "callbacks.checkpoint.save_last=false",
                 "+callbacks.clock._target_=bench.quality.curve.TrainingClock",
                 f"+callbacks.clock.launched={launched}", f"+callbacks.clock.every_s={args.every_min * 60}",
                 f"+callbacks.clock.budget_s={args.budget_min * 60}", f"+callbacks.clock.dirpath={snapshots}",
                 *args.overrides]  # fmt: skip
    threads = str(args.threads)
    # train.py builds the clock as bench.quality.curve.TrainingClock; what the caller's PYTHONPATH holds (Hydra
    # installed to a folder of its own, on a lent GPU machine) stays after
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, PYTHONPATH=path)
    if subprocess.run([sys.executable, str(ROOT / "train.py"), *overrides], env=env, cwd=ROOT).returncode:
        sys.exit(f"train.py failed (its error is above); run directory {run_dir}")
    return overrides


def trained_settings(run_dir: Path) -> dict:
    """The settings a curve records (:data:`~bench.quality.recorded_settings.CURVE`) that the run in ``run_dir`` was
    composed with (its .hydra/config.yaml)."""
    from omegaconf import OmegaConf

    return recorded_settings.read(OmegaConf.load(run_dir / ".hydra" / "config.yaml"))


def run_targets(run_dir: Path) -> frozenset:
    """The training targets of the run in ``run_dir`` (its .hydra/config.yaml's corpus): what it may recall."""
    from omegaconf import OmegaConf

    from nmt.data.targets import config_targets

    return config_targets(OmegaConf.load(run_dir / ".hydra" / "config.yaml"))


def run_ours(args: argparse.Namespace, sample: Pairs) -> tuple[str, dict]:
    """Ours trained with the clock, then each snapshot scored; the run's name and its result."""
    from bench.quality.converged import score
    from nmt import checkpoint

    name = (args.experiment or args.model) + (f"_{args.tag}" if args.tag else "")
    run_dir = Path(args.run_dir or ROOT / "runs" / f"bench_curve_{name}").resolve()
    overrides = train_ours(args, run_dir)
    torch.set_num_threads(args.threads)
    device, seen = trained_on(run_dir), run_targets(run_dir)
    points = []
    for line in (run_dir / "snapshots" / "clock.jsonl").read_text().splitlines():
        record = json.loads(line)
        start = time.perf_counter()
        module = checkpoint.load_checkpoint(run_dir / "snapshots" / record.pop("ckpt"), device)
        scores = score(module.model, module.tokenizer, sample, 1, seen)
        points.append({"minutes": record.pop("minutes"), **scores, **record})
        points[-1]["eval_s"] = round(time.perf_counter() - start, 2)
        print(table(points[-1:], list(points[-1])), flush=True)
    parameters = sum(p.numel() for p in module.model.parameters())
    trained = trained_settings(run_dir)
    out = {"system": "ours", "gpu": gpu(device), "model": args.model, "experiment": experiment(args), "tag": args.tag,
           "overrides": overrides, "settings": trained, "parameters": parameters,
           "run_dir": str(run_dir), "save_s": round(sum(p["save_s"] for p in points), 2)}  # fmt: skip
    return name, out | {"points": points}


# --- the curves compared --------------------------------------------------------------------------------------------


def minutes_to(points: list[dict], bleu: float) -> float | None:
    """The clock minutes at which a curve first reaches ``bleu``, linearly interpolated between its points (its
    first point's minutes where that one already does); None if it never does."""
    for before, p in zip([None, *points], points):
        if p["bleu"] >= bleu:
            if before is None:
                return p["minutes"]
            share = (bleu - before["bleu"]) / (p["bleu"] - before["bleu"])
            return before["minutes"] + share * (p["minutes"] - before["minutes"])
    return None


def bleu_at(points: list[dict], minutes: float) -> float | None:
    """A curve's BLEU at ``minutes``, linearly interpolated; None outside its points."""
    for before, p in zip(points, points[1:]):
        if before["minutes"] <= minutes <= p["minutes"]:
            share = (minutes - before["minutes"]) / (p["minutes"] - before["minutes"] or 1)
            return before["bleu"] + share * (p["bleu"] - before["bleu"])
    return points[-1]["bleu"] if points and math.isclose(points[-1]["minutes"], minutes, abs_tol=1e-3) else None


def machine(run: dict) -> dict:
    """What a run's figures are valid for: its CPU, and its GPU where it trained on one."""
    return {"cpu": run.get("cpu"), "gpu": run.get("gpu")}


def same_machine(runs: dict[str, dict]) -> None:
    """A ValueError, in one line, where the runs (file -> result) were measured on CPUs or GPUs that differ."""
    machines = {name: machine(run) for name, run in runs.items()}
    if len({json.dumps(m, sort_keys=True) for m in machines.values()}) > 1:
        seen = "; ".join(f"{n}: {m}" for n, m in machines.items())
        raise ValueError(f"not compared: the runs were measured on different machines ({seen}); give runs of one")


def changes(runs: dict[str, dict], references: list[str]) -> list[dict]:
    """Each of our runs against the reference of its model at its commit (an A/B chain, beside it on one machine),
    else the first of ``references`` if of its model (no reference: a curve of its own). A row: the settings it changed
    (key -> [the reference's, its own], beyond those a curve records where its command changed them) and its dev BLEU
    minus the reference's at the end of the shorter curve, at 15 and 30 minutes (None where a curve ends before)."""
    if missing := [name for name in references if name not in runs]:
        raise ValueError(f"--reference {missing[0]}: not among the curves given ({', '.join(runs)})")
    commit = lambda run: (run.get("provenance") or {}).get("commit")  # noqa: E731
    rows = []
    for name, run in runs.items():
        if name in references or run["system"] != "ours":
            continue
        mine = [r for r in references if runs[r]["model"] == run["model"]]
        beside = [r for r in mine if commit(runs[r]) is not None and commit(runs[r]) == commit(run)]
        if not (beside or mine[:1] == references[:1]):
            continue
        base = runs[reference := (beside or mine)[0]]
        before, after = (recorded_settings.flat(r.get("settings") or {}) for r in (base, run))
        changed = {k: [before.get(k), after.get(k)] for k in sorted(set(before) | set(after))
                   if before.get(k) != after.get(k)} | records.unrecorded(run, base)  # fmt: skip
        end = min(run["budget_min"], base["budget_min"])
        pairs = {k: (bleu_at(run["points"], m), bleu_at(base["points"], m))
                 for k, m in (("end", end), ("15", 15), ("30", 30))}  # fmt: skip
        delta = {f"delta_{key}": None if None in ab else round(ab[0] - ab[1], 2) for key, ab in pairs.items()}
        rows.append({"run": name, "reference": reference, "budget_min": run["budget_min"], "changed": changed,
                     "end_min": end, **delta})  # fmt: skip
    return rows


def summary(runs: dict[str, dict], references: list[str] | None = None) -> dict:
    """Minutes to each of :data:`THRESHOLDS` per run, and ours against each JoeyNMT run of the same family: the
    BLEU JoeyNMT has at its budget, the minutes ours needs for it, how many times sooner that is; with
    ``references``, what each other run of ours changed and gave against its reference (:func:`changes`)."""
    same_machine(runs)
    r2 = lambda x: None if x is None else round(x, 2)  # noqa: E731
    reach = [{"run": n, **{f"min_to_{t}": r2(minutes_to(r["points"], t)) for t in THRESHOLDS}} for n, r in runs.items()]
    compared = []
    for jn, joey in ((n, r) for n, r in runs.items() if r["system"] == "joeynmt"):
        budget, target = joey["budget_min"], bleu_at(joey["points"], joey["budget_min"])
        for on, ours in ((n, r) for n, r in runs.items() if r["system"] == "ours"):
            if FAMILY[ours["model"]] != FAMILY[joey["model"]]:
                continue
            needed = None if target is None else minutes_to(ours["points"], target)  # None: JoeyNMT's curve ends early
            compared.append({"ours": on, "joeynmt": jn, "joeynmt_min": budget, "joeynmt_bleu": r2(target),
                             "ours_min": r2(needed), "times_sooner": r2(needed and budget / needed)})  # fmt: skip
    result = {**machine(next(iter(runs.values()))), "reach": reach, "compared": compared}
    if references:
        result |= {"references": references, "changes": changes(runs, references)}
    return result


def plot(runs: dict[str, dict], out: Path) -> None:
    """BLEU against clock minutes, a line per run (matplotlib, PNG), the legend beside the plot; each run its own
    colour and line style (many curves stay told apart)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.8))
    colours, styles = plt.get_cmap("tab10" if len(runs) <= 10 else "tab20").colors, ("-", "--", ":", "-.")
    for i, run in enumerate(runs.values()):
        joeynmt = joeynmt_curve.LABELS.get(run["model"], run["model"])
        ours = f"ours, {run.get('experiment') or run['model']}" + (f" ({run['tag']})" if run.get("tag") else "")
        label = f"JoeyNMT 2.3.0, {joeynmt}" if run["system"] == "joeynmt" else ours
        style = "--" if run["system"] == "joeynmt" else styles[(i // len(colours)) % len(styles)]
        pts = run["points"]
        ax.plot([p["minutes"] for p in pts], [p["bleu"] for p in pts], style, color=colours[i % len(colours)],
                marker="o", ms=3, label=label)  # fmt: skip
    first = next(iter(runs.values()))
    ax.set_xlabel("training minutes from launch (evaluation and snapshots not counted)")
    ax.set_ylabel(f"dev BLEU, greedy ({first['valid_sample']['sentences']} validation pairs)")
    where = f"{first['gpu']} (CPU threads: {first['threads']})" if first.get("gpu") else \
        f"{first['cpu']['model']}, threads: {first['threads']}"
    ax.set_title(f"Tatoeba fr→en on {where}", fontsize=9)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120, bbox_inches="tight")
    print(f"wrote {out}")


def compare(files: list[str], out: Path, json_path: str | None, references: list[str] | None = None) -> None:
    """The figure and the summary of the curves in ``files`` (a summary among them, as a glob gives it, left out)."""
    read = {Path(f).stem: json.loads(Path(f).read_text()) for f in files}
    runs = {name: run for name, run in read.items() if "points" in run}
    files = [f for f in files if Path(f).stem in runs]
    if not runs:
        sys.exit("error: no curve among the files given (bench/results/curves/<run>.json)")
    try:
        result = summary(runs, references)
    except ValueError as e:
        sys.exit(f"error: {e}")
    print(table(result["reach"], list(result["reach"][0])))
    if result["compared"]:
        print(table(result["compared"], list(result["compared"][0])))
    plot(runs, out)
    write_json(json_path or RESULTS / "summary.json", result | {"files": files, "figure": str(out)})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", choices=["ours", "joeynmt"], help="train one run and record its curve")
    what.add_argument("--plot", nargs="+", metavar="JSON", help="draw and compare the curves of these results")
    p.add_argument("--model", default="transformer", choices=MODELS, help="ours: experiment=tatoeba_<model>")
    p.add_argument("--experiment", help="ours: another experiment of --model's family (e.g. tatoeba_fast)")
    p.add_argument("--tag", default="", help="ours: names a variant given by overrides")
    p.add_argument("overrides", nargs="*", help="ours: more train.py overrides")
    configs = sorted(joeynmt_curve.VALIDATION_FREQ)
    p.add_argument("--config", default="rnn_bahdanau", choices=configs, help="JoeyNMT: its anchor configuration")
    p.add_argument("--budget-min", type=float, default=30.0, help="minutes of training clock (default: %(default)s)")
    p.add_argument("--every-min", type=float, default=1.0, help="ours: minutes between snapshots")
    p.add_argument("--valid-sentences", type=int, default=1000, help="the validation sample (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="the sample's seed (default: %(default)s)")
    options(p, "data", "cache", "threads", data=DATA / "fra-eng", cache=None)  # --data checked where it is read
    p.add_argument("--run-dir", default=None, help="ours: the run directory (default: runs/bench_curve_<name>)")
    p.add_argument("--joeynmt-anchor", default=DATA / "anchors" / "joeynmt", metavar="DIR",
                   help="the JoeyNMT 2.3 anchor's folder: its configs and scripts (default: %(default)s)")  # fmt: skip
    p.add_argument("--joeynmt-venv", type=Path, metavar="DIR", help="a virtual environment with JoeyNMT 2.3.0")
    p.add_argument("--joeynmt-work", type=Path, metavar="DIR", help="JoeyNMT's work folder (prep_data.py's)")
    p.add_argument("--validation-freq", type=int, help="JoeyNMT: updates between validations (default: ~1.5 min)")
    p.add_argument("--out", type=Path, default=Path("docs/results/curves.png"), help="--plot: the figure")
    p.add_argument("--reference", metavar="RUN", action="append",
                   help="--plot: a run of ours the others of its model are compared with (a stem; repeatable: the "
                        "one of a run's commit, else the first)")  # fmt: skip
    options(p, "json", json=None)
    args = p.parse_args()
    if args.plot:
        return compare(args.plot, args.out, args.json, args.reference)
    args.data = check(p, "--data", splits, args.data)
    if args.run == "joeynmt":
        if not (args.joeynmt_venv and args.joeynmt_work):
            p.error("--run joeynmt needs --joeynmt-venv and --joeynmt-work")
        args.joeynmt_anchor = check(p, "--joeynmt-anchor", common.joeynmt_anchor, args.joeynmt_anchor)
    sample, described = valid_sample(args.data, args.valid_sentences, args.seed)
    name, result = run_ours(args, sample) if args.run == "ours" else joeynmt_curve.train(args, sample)
    settings = {"budget_min": args.budget_min, "threads": args.threads, "cpu": cpu(), "valid_sample": described}
    result = settings | result | {"eval_s": round(sum(p["eval_s"] for p in result["points"]), 1)}
    print(table(result["points"], ["minutes", "bleu", "chrf", "step", "eval_s"]))
    write_json(args.json or RESULTS / f"{name}.json", result)


if __name__ == "__main__":
    main()
