"""The settings our committed runs recorded, against what their experiments compose to today.

    python -m bench.quality.records              # the records whose experiment has moved on (exit 1 if any is unmarked)
    python -m bench.quality.records --supersede  # marks each: "superseded": {"marked_at": HEAD, "overrides": [...]}

A curve (bench/quality/curve.py), a budgeted run (bench/quality/quality.py) or a long run (bench/quality/converged.py)
records the settings it was trained with. When an experiment changes (a better recipe), its earlier runs stop being its
figures: --supersede marks each such record with the commit it was marked at and the overrides that give today's
experiment the settings it was measured with, checked by composing them. The docs then show it as an earlier recipe, and
tests/lab/test_curve.py checks every record, marked or not, against what its experiment (with those overrides) composes
to: an experiment that drifts from its measured runs without marking them fails there.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, git, program
from bench.quality.recorded_settings import CURVE, LONG_RUN, composed, flat

RESULTS = ROOT / "bench" / "results"
# a folder of curves per kind of machine: never compared across
CURVES = ("curves", "curves/gpu", "curves/no_bf16", "curves/amx")


@dataclass
class Record:
    """One run's record: its name, the file it is in, the dict that file holds (written back whole), the run's own
    dict inside it, and the keys of the settings it recorded."""

    name: str
    path: Path
    document: dict
    run: dict
    keys: tuple[str, ...]


def records() -> Iterator[Record]:
    """Every committed run of ours that recorded its settings: curves (CPU and GPU), budgeted runs, long runs."""
    curves = sorted(path for folder in CURVES for path in (RESULTS / folder).glob("*.json"))
    for path in [*curves, *sorted(RESULTS.glob("quality_*.json"))]:
        document = json.loads(path.read_text())
        if "settings" in document and document.get("system", "ours") == "ours":
            yield Record(path.stem, path, document, document, CURVE)
    for path in sorted(RESULTS.glob("converged*.json")):
        document = json.loads(path.read_text())
        for name, run in document.get("trained", {}).items():
            yield Record(f"{path.stem}:{name}", path, document, run, LONG_RUN)


# What a reference row's run may have been given beyond ``experiment=X``: a data path, a seed, a time budget, and what
# the harness that measured it gives every run (curve.py's and quality.py's: no validation or test pass in the budget,
# the training clock, a cache folder). Anything else is a variant: the lab notebook's.
SHIPPED = re.compile(r"""
    experiment=\w+ | seed=\d+ | paths\.tatoeba_splits=.+ | data\.cache_dir=.+ | hydra\.run\.dir=.+
  | trainer\.max_time=.+ | run_test=false | trainer\.enable_progress_bar=false | trainer\.max_epochs=100
  | data\.prepare\.num_proc=\d+ | data\.num_workers=0 | \+trainer\.limit_val_batches=0
  | callbacks\.(early_stopping|heatmaps)=null | callbacks\.checkpoint\.(save_top_k=0|save_last=false)
  | \+callbacks\.(clock|deadline)\.\w+=.+""", re.X)


def runs_in(document: dict, folder: Path) -> Iterator[dict]:
    """Every run of ours a result file holds (a curve, a budgeted run, a long run), and those of the curves a summary
    was drawn from (its "files", under ``folder``)."""
    trained = "settings" in document or {"overrides", "budget"} <= set(document)
    if document.get("system", "ours") == "ours" and trained:
        yield document  # a curve, or a budgeted run (an early one recorded no settings)
    yield from document.get("trained", {}).values()
    for name in document.get("files", []):
        path = folder / Path(name).relative_to("bench/results") if name.startswith("bench/results/") else folder / name
        if path.is_file():
            yield from runs_in(json.loads(path.read_text()), folder)


def not_shipped(document: dict, folder: Path = RESULTS) -> str | None:
    """Why a result file cannot give a reference row (a run not of a shipped experiment as it ships: marked
    superseded, or given an override :data:`SHIPPED` does not admit), or None."""
    for run in runs_in(document, folder):
        name = run.get("experiment") or run.get("model") or "a run"
        if mark := run.get("superseded"):
            return f"{name} as it was before {mark['marked_at']} (superseded: {' '.join(mark['overrides'])})"
        if extra := [o for o in run.get("overrides", []) if not SHIPPED.fullmatch(o)]:
            return f"{name} with {' '.join(extra)} (more than a data path, a seed and a time budget)"
        if experiment := run.get("experiment"):
            if not (ROOT / "conf" / "experiment" / f"{experiment}.yaml").is_file():
                return f"experiment={experiment}, which conf/experiment/ no longer ships"
    return None


def own_overrides(run: dict) -> list[str]:
    """The overrides a run was started with that decide its recorded settings (its experiment first), with those
    that reproduce it today if it is superseded: what :func:`composed` composes."""
    prefixes = tuple(f"{key}." for key in CURVE) + tuple(f"{key}=" for key in CURVE)
    top = [o for o in run["overrides"] if "." not in o.split("=", 1)[0] and not o.startswith("+")]  # trainer=gpu...
    own = [o for o in run["overrides"] if o.startswith(prefixes) or o in top]
    if "experiment" in run and not any(o.startswith("experiment=") for o in own):  # bench/quality/quality.py's record
        own.insert(0, f"experiment={run['experiment']}")
    return own + run.get("superseded", {}).get("overrides", [])


def given(run: dict) -> dict[str, str]:
    """The overrides a run's recorded command gave, key -> value as typed (``+`` dropped)."""
    words = shlex.split((run.get("provenance") or {}).get("command", ""))
    return dict(w.lstrip("+").split("=", 1) for w in words if "=" in w and not w.startswith("-"))


def unrecorded(run: dict, base: dict) -> dict[str, list]:
    """What ``run``'s command changed against ``base``'s beyond the settings a curve records (``compile.enabled``,
    say): key -> [``base``'s value, composed from its own overrides; ``run``'s, as typed]."""
    mine, theirs = given(run), given(base)
    keys = tuple(k for k, v in mine.items() if v != theirs.get(k) and not k.startswith(CURVE))
    before = flat(composed(own_overrides(base), keys)) if keys else {}
    return {k: [before.get(k), mine[k]] for k in keys}


def value(v) -> str:
    """A setting's value as a Hydra override writes it."""
    return json.dumps(v) if not isinstance(v, str) else v


def reproducing(record: Record) -> list[str]:
    """The overrides that give today's experiment the settings ``record`` was measured with; a ValueError if no
    override of a setting can (a key its experiment no longer has, a config group that changed)."""
    run = {**record.run, "superseded": {}}
    today = flat(composed(own_overrides(run), record.keys))
    then = flat(run["settings"])
    missing = sorted(set(then) ^ set(today))
    if missing:
        raise ValueError(f"{record.name}: {missing[0]} is in one of the recorded and today's settings only (a key "
                         "added or removed, a config group changed): no override of a value gives it back; rerun the "
                         "run with today's experiment, or remove its record")  # fmt: skip
    overrides = [f"{key}={value(then[key])}" for key in sorted(then) if then[key] != today[key]]
    if composed(own_overrides(run) + overrides, record.keys) != run["settings"]:
        raise ValueError(f"{record.name}: {' '.join(overrides)} does not give the recorded settings back")
    return overrides


def main() -> None:
    p = argparse.ArgumentParser(prog=program(), description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--supersede", action="store_true", help="mark each drifted record with the overrides that "
                   "reproduce it (and the commit it was marked at: HEAD)")  # fmt: skip
    args = p.parse_args()
    from nmt.data import atomic

    drifted = 0
    for record in records():
        if composed(own_overrides(record.run), record.keys) == record.run["settings"]:
            continue  # its experiment (with the overrides of its mark, if marked) composes to what it measured
        try:
            overrides = reproducing(record)
        except ValueError as e:
            sys.exit(f"error: {e}")
        where = f"{record.path.relative_to(ROOT)}{record.name[len(record.path.stem):]}"  # a long run: file.json:name
        print(f"{where}: drifted from its experiment; reproduced by: {' '.join(overrides)}")
        if not args.supersede:
            drifted += 1
            continue
        # the first mark stays: the commit from which the record is not its experiment's
        marked_at = record.run.get("superseded", {}).get("marked_at") or git("rev-parse", "--short", "HEAD")
        record.run["superseded"] = {"marked_at": marked_at, "overrides": overrides}
        atomic.write_text(record.path, json.dumps(record.document, indent=1, ensure_ascii=False) + "\n")
    if drifted:
        sys.exit(f"error: {drifted} record(s) drifted from their experiment; mark them: "
                 "python -m bench.quality.records --supersede")  # fmt: skip


if __name__ == "__main__":
    main()
