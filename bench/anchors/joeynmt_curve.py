"""JoeyNMT 2.3.0's curve for bench/quality/curve.py: its anchor configuration validating on a given sample every so many
updates, stopped after its first validation at or past the budget on its training clock, and that curve read from
its train.log (validations' durations from the log's timestamps, taken out of the clock) and validations.txt.

The virtual environment (--joeynmt-venv) is one with JoeyNMT 2.3.0, such as bench/anchors/joeynmt_env.py's make_env
makes.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from nmt.data.readers import Pairs
from nmt.scores import read_targets, score_split

# JoeyNMT's updates per validation: ~1.5 min on 2 cores
VALIDATION_FREQ = {"rnn_bahdanau": 100, "transformer": 30, "transformer_fast": 120}
# The configurations a curve can train: the anchor's own files, and "transformer_fast", its transformer.yaml set as
# close to our fast recipe (conf/experiment/tatoeba_fast.yaml) as JoeyNMT 2.3's options allow: 3+3 pre-norm layers,
# d_model 256, 4 heads, ff 1,024, no dropout, AdamW 1.5e-3 with 400 warm-up updates, 2,400-token batches, label
# smoothing 0.1, target embeddings tied to the output layer. What it cannot match (docs/results/models.md says so
# beside its row): the fast recipe's one joint 4,000-piece vocabulary whose embeddings the encoder, the decoder and
# the output layer share (the anchor's data are two 8,000-piece vocabularies, one a language); its rate annealed to
# zero when the budget is spent (JoeyNMT has no budget: inverse square root after the warm-up); bf16 autocast on a CPU
# that has it (JoeyNMT's fp16 is CUDA-only: float32); length-bucketed batches (JoeyNMT's token batches are drawn from
# shuffled pairs).
LABELS = {"rnn_bahdanau": "its RNN anchor", "transformer": "its own Transformer settings",
          "transformer_fast": "at the fast recipe's sizes"}  # a configuration as a figure's legend names it
SAME_SIZE = {"transformer_fast": ("transformer", {
    "training": {"learning_rate": 1.5e-3, "learning_rate_warmup": 400, "batch_size": 2400},
    "model": {"encoder": {"num_layers": 3, "dropout": 0.0}, "decoder": {"num_layers": 3, "dropout": 0.0}},
})}  # fmt: skip


STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - \w+ - [\w.]+ - (.*)$")
TRAINING = re.compile(r"^(Epoch\s+\d+, Step:\s+(\d+),|EPOCH \d+|Epoch\s+\d+, total training loss|Interrupt at)")


def joeynmt_points(log: str, launched: float, validations: str = "") -> list[dict]:
    """The validations of a JoeyNMT 2.3 train.log (greedy BLEU and chrF on its dev set, at the update of the last
    "Step:" line before them: validation_freq a multiple of logging_freq) on a training clock from ``launched``
    (``time.time()`` at its launch) that stops during validation. A validation runs from its "Predicting" line to the
    last line before training goes on (evaluation, best checkpoint saved); "eval_s" is how long it took. The scores
    are those of ``validations`` (its validations.txt: 5 decimals, chrF from 0 to 1) where it has the update, else the
    log's (2 decimals)."""
    points, step, current = [], 0, None
    for line in log.splitlines():
        if not (m := STAMP.match(line)):
            continue  # a line continued (the model's printout, a traceback)
        at, text = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(), m.group(2)
        if (training := TRAINING.match(text)) or text.startswith("Predicting"):
            current = None
        if training and training.group(2):
            step = int(training.group(2))
        elif text.startswith("Predicting"):
            current = {"start": at, "end": at, "step": step}
            points.append(current)
        elif current is not None:
            current["end"] = at
            if scored := re.match(r"Evaluation result \(greedy\): bleu:\s*([\d.]+), chrf:\s*([\d.]+)", text):
                current |= {"bleu": float(scored.group(1)), "chrf": float(scored.group(2))}
    # validations.txt: a line a validation, "Steps: 60<TAB>loss: 5.40520<TAB>...<TAB>bleu: 0.12415<TAB>chrf: 0.02300..."
    fields = [dict(re.findall(r"(\w+): ([\d.]+)", line)) for line in validations.splitlines()]
    precise = {int(f["Steps"]): (float(f["bleu"]), float(f["chrf"])) for f in fields if "chrf" in f and "Steps" in f}
    out, paused = [], 0.0
    for p in points:
        if "bleu" in p:  # not a validation cut short
            bleu, chrf = precise.get(p["step"], (p["bleu"], p["chrf"]))
            minutes = (p["start"] - launched - paused) / 60
            out.append({"minutes": round(minutes, 4), "bleu": round(bleu, 2), "chrf": round(100 * chrf, 2),
                        "step": p["step"], "eval_s": round(p["end"] - p["start"], 2)})  # fmt: skip
        paused += p["end"] - p["start"]
    return out


def with_unseen(points: list[dict], model_dir: Path, sample: Pairs, seen: frozenset) -> list[dict]:
    """The points, each with its validation's translations (JoeyNMT's ``<step>.hyps`` in ``model_dir``) scored on the
    whole sample and on its unseen part (:func:`nmt.scores.score_split`: its BLEU/chrF kept, as JoeyNMT logged them)."""
    out = []
    for p in points:
        hyps = model_dir / f"{p['step']}.hyps"
        if hyps.is_file():
            split = score_split(hyps.read_text(encoding="utf-8").splitlines(), sample.tgt, seen).record()
            p = p | {k: v for k, v in split.items() if k not in ("bleu", "chrf")} | {"hyps_bleu": split["bleu"]}
        out.append(p)
    return out


def logged(model_dir: Path, launched: float) -> list[dict]:
    """The validations a JoeyNMT run in ``model_dir`` has logged so far (:func:`joeynmt_points`)."""
    read = lambda name: (model_dir / name).read_text(encoding="utf-8") if (model_dir / name).is_file() else ""  # noqa: E731
    return joeynmt_points(read("train.log"), launched, read("validations.txt"))


def merged(base: dict, edits: dict) -> dict:
    """``base`` with ``edits`` written over it, nested mappings key by key."""
    out = dict(base)
    for key, value in edits.items():
        out[key] = merged(base.get(key, {}), value) if isinstance(value, dict) else value
    return out


def joeynmt_config(args: argparse.Namespace, work: Path, name: str, freq: int) -> Path:
    """The config of ``args.config`` for this run (in ``work``): the anchor's file (edited as :data:`SAME_SIZE` says
    for a configuration of ours), its own folder, the sample as dev set, validation every ``freq`` updates, logging at
    a divisor of it, no example sentences (nor their attention plots) at validations."""
    import yaml

    base, edits = SAME_SIZE.get(args.config, (args.config, {}))
    text = (args.joeynmt_anchor / f"{base}.yaml").read_text().replace("ANCHOR_WORK", str(work))
    cfg = merged(yaml.safe_load(text), edits)
    cfg["model_dir"], cfg["data"]["dev"] = str(work / "models" / name), str(work / "data" / name)
    cfg["training"] |= {"validation_freq": freq, "logging_freq": math.gcd(freq, 10), "print_valid_sents": []}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def train(args: argparse.Namespace, sample: Pairs) -> tuple[str, dict]:
    """JoeyNMT's anchor (``args.config``) trained on ``args.threads`` threads, validating on ``sample``, until its
    first validation at or past ``args.budget_min`` on its clock; the run's name and its result."""
    venv, work = args.joeynmt_venv.resolve(), args.joeynmt_work.resolve()
    python = str(venv / "bin" / "python")
    if not (work / "data" / "spm" / "en.model").is_file():  # the anchor's plaintext splits and sentencepiece models
        prep = [python, str(args.joeynmt_anchor / "prep_data.py"), "--shared", str(args.data), "--out", str(work)]
        subprocess.run(prep, check=True)
    name = f"curve_{args.config}"
    for lang, lines in (("fr", sample.src), ("en", sample.tgt)):
        (work / "data" / f"{name}.{lang}").write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    freq = args.validation_freq or VALIDATION_FREQ[args.config]
    config = joeynmt_config(args, work, name, freq)
    shutil.rmtree(work / "models" / name, ignore_errors=True)
    log = work / "models" / name / "train.log"
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    cmd = [python, str(args.joeynmt_anchor / "train_budget.py"), str(config)]
    (work / "logs").mkdir(exist_ok=True)
    with open(work / "logs" / f"{name}.out", "w") as out:
        launched = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            time.sleep(2)
            points = logged(log.parent, launched)
            late = time.time() - launched > 3 * args.budget_min * 60 + 600  # a run whose validations never end
            if (points and points[-1]["minutes"] >= args.budget_min) or late:
                proc.send_signal(signal.SIGINT)  # JoeyNMT stops at the interrupt and saves its weights
                proc.wait()
    if not (points := logged(log.parent, launched)):
        sys.exit(f"JoeyNMT made no validation (exit {proc.returncode}); see {work / 'logs' / f'{name}.out'}")
    points = with_unseen(points, log.parent, sample, read_targets(args.data / "train.tsv"))
    out = {"system": "joeynmt", "model": args.config, "joeynmt": "2.3.0", "config": str(config),
           "validation_freq": freq, "run_dir": str(work / "models" / name),
           "process_min": round((time.time() - launched) / 60, 2)}  # fmt: skip
    return f"joeynmt_{args.config}", out | {"points": points}
