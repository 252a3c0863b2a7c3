"""Test scores of the long Tatoeba runs, weight averaging and ensembles, and the learning curves.

    python train.py experiment=converged_luong hydra.run.dir=runs/converged/luong       (and _bahdanau,
    python train.py experiment=converged_luong_sampling hydra.run.dir=runs/converged/luong_sampling)
    python -m bench.quality.converged [--runs runs/converged] [--data DIR]
    python train.py experiment=converged_transformer hydra.run.dir=runs/converged/transformer
    python -m bench.quality.converged --names transformer --no-curve --json bench/results/converged_transformer.json
    python -m bench.quality.converged --plot-only   # the figure again from the JSON (after a quality_*.json changed)

Every score is on the whole test split and on its unseen part (the pairs whose English side is not among the training
targets: nmt.scores). For each run: the best checkpoint (by the EMA weights' validation BLEU) scored with its plain
weights and with its EMA weights; checkpoints/averaged.ckpt (average_best=5: the mean of the 5 best checkpoints' EMA
weights); the mean of the plain weights of the last 5 snapshots (fairseq-style averaging). Then the ensemble of the two
models' best EMA weights. Every row is test BLEU/chrF (sacrebleu, detokenised output against the raw references), greedy
and beam 5, with the dev BLEU (greedy, the validation split) that chooses among them; each row's translations are kept
beside --json (bench/results/hypotheses/) to be scored again. The learning curve scores every snapshot (one per 250
updates; plain weights, greedy) against wall-clock minutes since the run started, and draws
docs/learning_curve.png with JoeyNMT's 15-minute point (its anchor's README). --data is a folder with the splits
(train.tsv, valid.tsv, test.tsv; default data/fra-eng), e.g. a copy of the Tatoeba splits the runs trained on.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch

from bench.common import DATA, check, cpu, options, splits, table, write_json
from bench.quality import recorded_settings
from bench.quality.curve import run_targets
from bench.quality.quality import searches, translate
from bench.quality.recorded_settings import LONG_RUN
from nmt import checkpoint
from nmt.data.readers import read_tsv
from nmt.inference.averaging import average_checkpoints
from nmt.inference.ensemble import Ensemble
from nmt.scores import read_targets, score_split

JOEYNMT_15MIN_BLEU = 3.28  # the JoeyNMT anchor's README.md: greedy, on its 2,985-pair Tatoeba split


def score(model, tokenizer, test, beam: int, seen: frozenset | None = None) -> dict:
    """BLEU and chrF of ``model``'s translations of ``test``; with ``seen`` (the run's training targets), of the
    unseen and the seen part too (:meth:`nmt.scores.ScoreSplit.record`)."""
    return score_split(translate(model, tokenizer, test, beam), test.tgt, seen).record()


def kept_as(name: str, setting: str, search: str) -> str:
    """The label a row's translations are kept under (:func:`bench.quality.hypotheses.path_for`), e.g.
    ``fast.average_of_the_5_best_EMA.beam 5``."""
    return ".".join([*(re.sub(r"\W+", "_", part).strip("_") for part in (name, setting)), search])


def weighting_rows(label: tuple[str, str], model, tokenizer, data: tuple, seen: frozenset, record: Path,
                   extra: dict) -> list[dict]:
    """The greedy and the beam-5 row of one weighting (``label``: its run and weights) of a run: test scores, whole and
    split by ``seen``, the dev BLEU (greedy, ``data``'s validation split) that chooses among weightings, and where its
    translations are kept beside ``record``."""
    (name, setting), (test, valid) = label, data
    extra = extra | {"dev_bleu": score(model, tokenizer, valid, 1)["bleu"]}
    rows = []
    for row in searches(model, tokenizer, test, seen, record, lambda search: kept_as(name, setting, search)):
        rows.append({"run": name, "weights": setting} | row | extra)
        print(table(rows[-1:], list(rows[-1])))
    return rows


def load(path: Path, weights: str = "ema") -> checkpoint.Loaded:
    """A checkpoint's model with its EMA weights (``state_dict``) or its plain ones (``current_model_state``)."""
    return checkpoint.load_checkpoint(path, plain=weights == "plain")


def best_checkpoint(run: Path) -> tuple[Path, float]:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    state = next(v for k, v in ckpt["callbacks"].items() if "RunCheckpoint" in k)
    return Path(state["best_model_path"]), float(state["best_model_score"])


def snapshots(run: Path) -> list[Path]:
    return sorted((run / "snapshots").glob("step-*.ckpt"), key=lambda p: int(re.findall(r"\d+", p.name)[-1]))


def train_minutes(ckpt: dict) -> float | None:
    """Wall-clock minutes of training when ``ckpt`` was saved, to 0.1 (Lightning's Timer: resumes add up, pauses
    don't), or None for a run bounded by updates alone (``trainer.max_time=null``: no Timer)."""
    timer = next((v for k, v in ckpt["callbacks"].items() if k == "Timer"), None)
    return None if timer is None else round(timer["time_elapsed"]["train"] / 60, 1)


def run_info(run: Path, best: Path, val: float) -> dict:
    """What every row of a run says of it: its best update and validation BLEU, its updates, epochs and minutes."""
    last = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    info = {"best_step": int(re.findall(r"\d+", best.name)[-1]), "val_bleu": round(val, 2)}
    return info | {"updates": last["global_step"], "epochs_done": last["epoch"], "wall_min": train_minutes(last)}


def training_targets(runs: list[Path], data: Path) -> frozenset:
    """What the runs may recall: the training targets of the first run with its config (every run trains on the same
    splits, ``--data``), else the English of ``data``'s train.tsv."""
    configs = [run for run in runs if (run / ".hydra").is_dir()]
    return run_targets(configs[0]) if configs else read_targets(data / "train.tsv")


def trained(run: Path) -> dict:
    """The overrides the run in ``run`` was started with and its settings of :data:`LONG_RUN` (its .hydra/ files)."""
    from omegaconf import OmegaConf

    hydra = run / ".hydra"
    overrides = list(OmegaConf.load(hydra / "overrides.yaml"))
    return {"overrides": overrides, "settings": recorded_settings.read(OmegaConf.load(hydra / "config.yaml"), LONG_RUN)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="runs/converged")
    p.add_argument("--names", nargs="+", default=["luong", "bahdanau", "luong_sampling"])
    options(p, "data", "threads", "json", data=DATA / "fra-eng")  # --data checked only where it is read
    p.add_argument("--limit", type=int, default=None, help="score only the first N test pairs (a smoke test)")
    p.add_argument("--figure", default="docs/learning_curve.png")
    p.add_argument("--no-curve", action="store_true", help="skip scoring every snapshot (and the figure)")
    p.add_argument("--plot-only", action="store_true", help="draw the figure from --json (and quality_*.json) alone")
    args = p.parse_args()
    if args.plot_only:
        done = json.loads(Path(args.json).read_text())
        return plot(done["curves"], done["joeynmt_15min_bleu"], Path(args.figure))
    args.data = check(p, "--data", splits, args.data)  # checked only where it is read
    torch.set_num_threads(args.threads)
    test, valid = (read_tsv(args.data / f"{split}.tsv") for split in ("test", "valid"))
    test, valid = (pairs.select(list(range(min(args.limit or len(pairs), len(pairs))))) for pairs in (test, valid))
    runs = {name: Path(args.runs) / name for name in args.names}
    rows, curves, best, settings = [], {}, {}, {}
    seen = training_targets(list(runs.values()), args.data)

    def add(name: str, setting: str, model, tokenizer, extra: dict | None = None) -> None:
        data, record = (test, valid), Path(args.json)
        rows.extend(weighting_rows((name, setting), model, tokenizer, data, seen, record, extra or {}))

    for name, run in runs.items():
        path, val = best_checkpoint(run)
        best[name] = path
        if (run / ".hydra").is_dir():
            settings[name] = trained(run)
        info = run_info(run, path, val)
        for weights in ("plain", "ema"):
            module = load(path, weights)
            add(name, weights, module.model, module.tokenizer, info)
        if (run / "checkpoints" / "averaged.ckpt").is_file():
            module = load(run / "checkpoints" / "averaged.ckpt")
            add(name, "average of the 5 best (EMA)", module.model, module.tokenizer, info)
        last5 = snapshots(run)[-5:]
        if len(last5) == 5:
            module = load(average_checkpoints(last5, run / "last5_plain_average.ckpt", plain=True))
            add(name, "average of the last 5 snapshots (plain)", module.model, module.tokenizer, info)
        curves[name] = []
        for s in [] if args.no_curve else snapshots(run):
            module = load(s, "plain")
            step = int(re.findall(r"\d+", s.name)[-1])
            minutes = train_minutes(torch.load(s, map_location="cpu", weights_only=False))
            point = {"step": step, "minutes": minutes}
            curves[name].append(point | score(module.model, module.tokenizer, test, 1, seen))
            print(name, curves[name][-1])
    members = [load(best[n]) for n in ("luong", "bahdanau") if n in best]
    if len(members) == 2:
        add("luong + bahdanau", "ensemble (EMA)", Ensemble([m.model for m in members]), members[0].tokenizer)
    print(table(rows, ["run", "weights", "search", "bleu", "chrf", "updates", "epochs_done", "wall_min"]))
    write_json(args.json, {"rows": rows, "curves": curves, "joeynmt_15min_bleu": JOEYNMT_15MIN_BLEU,
                           "trained": settings, "cpu": cpu(), "threads": args.threads})  # fmt: skip
    if not args.no_curve:
        plot(curves, JOEYNMT_15MIN_BLEU, Path(args.figure))


def plot(curves: dict, joey: float | None, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, points in curves.items():
        ax.plot([p["minutes"] for p in points], [p["bleu"] for p in points], marker="o", ms=3, label=name)
    for name, color in (("luong", "C0"), ("bahdanau", "C1")):  # bench/quality/quality.py: 15 minutes with both cores
        f = Path("bench/results") / f"quality_{name}.json"
        if f.is_file():
            q = json.loads(f.read_text())
            greedy = next(r["bleu"] for r in q["runs"] if r["search"] == "greedy")
            ax.scatter([q["wall_min"]], [greedy], marker="D", color=color, zorder=5, label=f"{name}, 15 min, 2 cores")
    if joey is not None:
        ax.scatter([15], [joey], marker="*", s=120, color="black", zorder=5, label="JoeyNMT, 15 min, 2 cores")
    ax.set_xlabel("wall-clock minutes of training (lines: runs sharing 2 CPU cores)")
    ax.set_ylabel("test BLEU (greedy, plain weights)")
    ax.set_title("Tatoeba fr→en: test BLEU against training time")
    ax.grid(alpha=0.3)
    ax.legend()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
