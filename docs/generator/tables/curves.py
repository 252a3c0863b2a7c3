"""Tables of docs/results/models.md's "Time to quality" and the fast recipe's test scores: dev BLEU against training
minutes (``bench/quality/curve.py``), the minutes each run needs to reach each BLEU level, ours against JoeyNMT 2.3.0 of
the same family; the reference page's from the curves of shipped experiments (``curves/shipped.json``), the lab
notebook's from every curve (``curves/summary.json``)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tables import SPLIT, Results, grid, num, split_cells, split_note, table, times
from tables.models import WEIGHTS

SUMMARY = "curves/summary.json"  # every curve of the project's CPU: the lab notebook's
# the shipped experiments' curves and JoeyNMT's, one summary a kind of machine: the reference page's
SHIPPED = ("curves/shipped.json", "curves/amx/shipped.json")
JOEYNMT = {  # bench/anchors/joeynmt_curve.py's configurations, as the tables name them
    "rnn_bahdanau": "its RNN anchor",
    "transformer": "its own Transformer settings (6+6 layers, 4,096-token batches, 1,000 warm-up updates)",
    "transformer_fast": "at the fast recipe's sizes (3+3 layers, 2,400-token batches, 400 warm-up updates)",
}


def label(name: str, run: dict) -> str:
    """A run as the table names it: the system, the experiment or model, and what its tag changed."""
    if run["system"] == "joeynmt":
        return f"JoeyNMT 2.3.0, {JOEYNMT.get(run['model'], run['model'])}"
    what = run.get("experiment") or f"tatoeba_{run['model']}"
    earlier = f" before {run['superseded']['marked_at']}" if "superseded" in run else ""  # a recipe that moved on
    return f"ours, `{what}`{earlier}" + (f" ({run['tag']})" if run.get("tag") else "")


def at(points: list[dict], minutes: float) -> float | None:
    """A curve's BLEU at ``minutes``, linearly interpolated between its points (a point a few seconds past ``minutes``,
    as the last snapshot of a budget is, counts as at it); None outside the curve."""
    for before, p in zip(points, points[1:]):
        if before["minutes"] <= minutes <= p["minutes"]:
            share = (minutes - before["minutes"]) / (p["minutes"] - before["minutes"])
            return before["bleu"] + share * (p["bleu"] - before["bleu"])
    near = [p["bleu"] for p in points if abs(p["minutes"] - minutes) < 0.1]
    return near[-1] if near else None


LEVELS = (20, 30, 40, 50)  # the BLEU levels bench/quality/curve.py gives the minutes to
REACHED = tuple(f"minutes to BLEU {t}" for t in LEVELS)


def cpu_words(cpu: dict) -> str:
    """A CPU as the tables name it: its model and the flags that decide its precision."""
    flags = ", ".join(f for f in ("avx512_bf16", "amx_bf16") if cpu.get(f)) or "no bf16 instructions"
    return f"{cpu['model']} ({flags})"


def reached(reach: dict) -> list[str]:
    """A run's minutes to each of :data:`LEVELS` (a row of the summary's ``reach``), as cells."""
    return [num(reach[f"min_to_{t}"]) for t in LEVELS]


def reach_rows(results: Results, summary: dict, folder: str, cells: Callable[[dict], list[str]]) -> list[list[str]]:
    """A row per run of a curve summary: its label, ``cells(run)``, its minutes to each level and its updates."""
    rows = []
    for reach in summary["reach"]:
        run = results(f"{folder}/{reach['run']}.json")
        last = run["points"][-1] if run["points"] else {}
        updates = f"{last['step']:,}" if last.get("step") is not None else "–"
        rows.append([label(reach["run"], run), *cells(run), *reached(reach), updates])
    return rows


def unseen_at_end(run: dict) -> str:
    """A curve's last dev BLEU on the unseen part of its sample (pairs whose English is not a training target)."""
    return num(run["points"][-1].get("unseen_bleu")) if run["points"] else "–"


def reach_table(results: Results, *summary_names: str) -> str:
    """Per run of curve summaries (one a kind of machine, each in its CPU's rows): dev BLEU at 15 and 30 minutes and on
    the unseen pairs at its end, the minutes to BLEU 20, 30, 40 and 50, its training updates."""
    cells = lambda run: [num(at(run["points"], 15)), num(at(run["points"], 30)), unseen_at_end(run)]  # noqa: E731
    rows, cpus = [], []
    for name in summary_names:
        summary = results(name)
        cpus.append(cpu_words(summary["cpu"]))
        found = reach_rows(results, summary, name.rsplit("/", 1)[0], cells)
        rows += [[cpus[-1], *row] for row in found] if len(summary_names) > 1 else found
    header = ("run", "dev BLEU at 15 min", "at 30 min", "at the end, unseen pairs", *REACHED, "updates")
    header = ("CPU", *header) if len(summary_names) > 1 else header
    where = "Each on its CPU" if len(summary_names) > 1 else cpus[0]
    return grid(header, rows) + f"\n\n{where}; – : not reached within the run, or not measured."


@table("time_to_quality")
def time_to_quality(results: Results) -> str:
    """The shipped experiments' curves and JoeyNMT's (:data:`SHIPPED`)."""
    return reach_table(results, *SHIPPED)


@table("time_to_quality_all")
def time_to_quality_all(results: Results) -> str:
    """Every curve of the project's CPU, A/Bs and earlier recipes included (:data:`SUMMARY`): the lab notebook's."""
    return reach_table(results, SUMMARY)


@table("time_to_quality_joeynmt")
def time_to_quality_joeynmt(results: Results) -> str:
    """The shipped experiments against JoeyNMT of the same family: how much sooner ours reach the BLEU JoeyNMT has at
    its budget, against each of its configurations."""
    return sooner(results, *SHIPPED)


@table("time_to_quality_joeynmt_all")
def time_to_quality_joeynmt_all(results: Results) -> str:
    """Every curve of ours against JoeyNMT of the same family (:data:`SUMMARY`): the lab notebook's."""
    return sooner(results, SUMMARY)


def sooner(results: Results, *summary_names: str) -> str:
    """Ours against JoeyNMT of the same family, on each kind of machine: how much sooner ours reach the BLEU JoeyNMT
    has at its budget."""
    rows = []
    for name in summary_names:
        summary, folder = results(name), name.rsplit("/", 1)[0]
        rows += [[*[cpu_words(summary["cpu"])] * (len(summary_names) > 1),
                  label(c["ours"], results(f"{folder}/{c['ours']}.json")),
                  label(c["joeynmt"], results(f"{folder}/{c['joeynmt']}.json")), num(c["joeynmt_bleu"]),
                  num(c["joeynmt_min"], 0), num(c["ours_min"]), times(c["times_sooner"], 1)]
                 for c in summary["compared"]]  # fmt: skip
    if not rows:
        return "No JoeyNMT 2.3.0 curve beside a curve of ours of its family (RNN or Transformer) on one CPU yet."
    header = ("ours", "JoeyNMT", "JoeyNMT's dev BLEU at its budget", "its minutes", "ours: minutes to it", "sooner")
    return grid(("CPU", *header) if len(summary_names) > 1 else header, rows) + \
        "\n\nEach comparison on one machine: curves of different CPUs are never compared."


def _value(v: object) -> str:
    if isinstance(v, str) and "." in v and v.startswith(("nmt.", "torch.")):
        return v.rsplit(".", 1)[1]  # a _target_: its last name says what it is
    return "none" if v is None else str(v)


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f}"


def changes_table(results: Results, folder: str) -> str:
    """Each run of ours in the curves of ``folder`` against its reference run (the one measured beside it, else the
    first given): the settings it changed and its dev BLEU against the reference's at the end of the shorter curve,
    at 15 and at 30 minutes."""
    summary = results(f"{folder}/summary.json")
    if "references" not in summary:
        return "No reference run given to `bench/quality/curve.py --plot` (`--reference RUN`)."
    named = lambda run: label(run, results(f"{folder}/{run}.json"))  # noqa: E731
    rows = []
    for c in summary["changes"]:
        changed = "; ".join(f"`{k}` {_value(a)} → {_value(b)}" for k, (a, b) in c["changed"].items()) or "nothing"
        rows.append([named(c["run"]), named(c["reference"]), num(c["budget_min"], 0), changed,
                     f"{_signed(c['delta_end'])} ({num(c['end_min'], 0)} min)", _signed(c["delta_15"]),
                     _signed(c["delta_30"])])  # fmt: skip
    header = ("run", "against", "budget (min)", "settings changed against it", "dev BLEU ± at the end",
              "at 15 min", "at 30 min")  # fmt: skip
    first = named(summary["references"][0])
    return grid(header, rows) + (
        f"\n\nEach run against the reference measured beside it (the same commit, one machine), else against {first};"
        " – : a curve that does not reach that minute."
    )


@table("time_to_quality_changes")
def time_to_quality_changes(results: Results) -> str:
    """The A/B chains of the curves of the project's CPU (``bench/results/curves/``)."""
    return changes_table(results, "curves")


@table("time_to_quality_changes_no_bf16")
def time_to_quality_changes_no_bf16(results: Results) -> str:
    """The A/B chain measured on a CPU without bf16 instructions (``bench/results/curves/no_bf16/``)."""
    return changes_table(results, "curves/no_bf16")


@table("time_to_quality_no_bf16")
def time_to_quality_no_bf16(results: Results) -> str:
    """The curves of a CPU without bf16 instructions: dev BLEU at 15 minutes, minutes to each level, updates."""
    summary = results("curves/no_bf16/summary.json")
    rows = reach_rows(results, summary, "curves/no_bf16", lambda run: [num(at(run["points"], 15))])
    header = ("run", "dev BLEU at 15 min", *REACHED, "updates")
    return grid(header, rows) + f"\n\n{cpu_words(summary['cpu'])}; – : not reached within the run."


KERNEL_RUNS = {  # bench/results/curves/kernels/<file>: what each run's attention ran as
    "diag_fast_bf16": "flash first (the order of `kernels.attention` before the measured choice)",
    "diag_fast_math": "`kernels.attention=[math]`",
    "diag_fast_probe": "measured at start (it kept flash out)",
    "diag_ref": "unfused (attention dropout 0.1: its own masks), for reference: `small_bf16`",
}


def _tokens_per_second(points: list[dict]) -> float | None:
    """Target tokens a second of training clock between a curve's first and last points (start-up left out)."""
    if len(points) < 2 or points[-1]["minutes"] <= points[0]["minutes"]:
        return None
    return (points[-1]["tokens"] - points[0]["tokens"]) / ((points[-1]["minutes"] - points[0]["minutes"]) * 60)


@table("cpu_attention_kernels")
def cpu_attention_kernels(results: Results) -> str:
    """`experiment=tatoeba_fast` in bf16 on the CPU for a few minutes, its attention on each kernel: tokens/s."""
    rows = []
    for name, how in KERNEL_RUNS.items():
        run = results(f"curves/kernels/{name}.json")
        rate = _tokens_per_second(run["points"])
        rows.append([how, f"`{run.get('experiment')}`", "–" if rate is None else f"{rate:,.0f}"])
    rate = {name: _tokens_per_second(results(f"curves/kernels/{name}.json")["points"]) for name in KERNEL_RUNS}
    flash, math_, chosen = rate["diag_fast_bf16"], rate["diag_fast_math"], rate["diag_fast_probe"]
    note = ""
    if flash and math_ and chosen:
        note = (f"\n\nWithout flash the fast recipe trained {math_ / flash:.2f}x and {chosen / flash:.2f}x as fast as "
                f"with it; those two runs both ran on the plain products, so their {abs(chosen / math_ - 1):.0%} apart "
                "is the spread of one short run each.")
    return grid(("attention", "experiment", "target tokens/s (bf16-mixed, minutes 2 to 4)"), rows) + note


RECIPE = "tatoeba_fast"


def recipe_runs(results: Results, earlier: bool = False) -> list[dict]:
    """``bench/quality/quality.py``'s runs of the fast recipe with its own settings (no override of a recorded setting),
    by CPU, budget then seed: each with its ``seed`` (``seed=N`` among its overrides, else 1). With ``earlier``, those
    of its earlier settings instead (runs marked superseded by ``bench/quality/records.py``)."""
    runs = []
    for name in results.glob("quality_*.json"):
        if (run := results.load(name)).get("experiment") != RECIPE or "settings" not in run:
            continue
        if any(not o.startswith("seed=") for o in run["overrides"]) or earlier != ("superseded" in run):
            continue  # a variant, not the recipe as shipped (or as it was)
        results(name)  # a source of the table
        seed = next((int(o.split("=", 1)[1]) for o in run["overrides"] if o.startswith("seed=")), 1)
        runs.append({**run, "seed": seed})
    return sorted(runs, key=lambda r: (json.dumps(r["cpu"], sort_keys=True), budget_min(r["budget"]), r["seed"]))


def budget_min(budget: str) -> float:
    """``DD:HH:MM:SS`` in minutes."""
    d, h, m, s = (int(x) for x in budget.split(":"))
    return (d * 24 + h) * 60 + m + s / 60


def recipe_test(results: Results, earlier: bool) -> str:
    """The fast recipe's (or its earlier settings') runs of bench/quality/quality.py: a row per budget and seed."""
    runs = recipe_runs(results, earlier)
    if not runs:  # report.py names it as a missing result file
        raise FileNotFoundError(2, "no run of the recipe", f"quality_{RECIPE}{'_earlier' * earlier}.json")
    cpus = {json.dumps(r["cpu"], sort_keys=True) for r in runs}
    several = len(cpus) > 1  # a column for the CPU: figures of different CPUs are not compared
    rows = []
    for run in runs:
        by = {r["search"]: r for r in run["runs"]}
        mark = run.get("superseded", {})
        differs = [f"`{' '.join(mark['overrides'])}` (as of {run['provenance']['commit'][:7]})"] if earlier else []
        rows.append([
            *differs, *[cpu_words(run["cpu"])] * several, f"{budget_min(run['budget']):g} min", str(run["seed"]),
            f"{run['updates']:,}", num(by["greedy"]["bleu"]), f"**{num(by['beam 5']['bleu'])}**",
            *split_cells(by["beam 5"]), num(by["beam 5"]["chrf"]),
        ])  # fmt: skip
    header = (*["settings that differ from today's recipe"] * earlier, *["CPU"] * several, "budget from launch", "seed",
              "updates", "test BLEU, greedy", "test BLEU, beam 5", *SPLIT, "test chrF, beam 5")  # fmt: skip
    where = "Each on its CPU" if several else cpu_words(json.loads(cpus.pop()))
    return grid(header, rows) + f"\n\n{where}, {runs[0]['threads']} threads. " + split_note([r["runs"] for r in runs])


@table("fast_recipe_test")
def fast_recipe_test(results: Results) -> str:
    """The fast recipe as bench/quality/quality.py measures it: from launch, cold cache, test split; each seed."""
    return recipe_test(results, earlier=False)


@table("fast_recipe_test_earlier")
def fast_recipe_test_earlier(results: Results) -> str:
    """The same runs of the fast recipe's earlier settings, each with the overrides that give them back today."""
    return recipe_test(results, earlier=True)


CONVERGED = "converged_fast.json"  # bench/quality/converged.py --names fast: experiment=converged_fast


@table("fast_recipe_converged")
def fast_recipe_converged(results: Results) -> str:
    """The fast recipe trained to the end: each weighting's dev BLEU and test scores; the weights of highest dev BLEU
    (the choice made on the validation split) in bold."""
    done = results(CONVERGED)
    rows = [r for r in done["rows"] if r["run"] == "fast"]
    by = {(r["weights"], r["search"]): r for r in rows}
    weightings = list(dict.fromkeys(r["weights"] for r in rows))
    chosen = max(weightings, key=lambda w: by[w, "greedy"]["dev_bleu"])
    out = []
    for w in weightings:
        beam = num(by[w, "beam 5"]["bleu"])
        out.append([WEIGHTS[w], num(by[w, "greedy"]["dev_bleu"]), num(by[w, "greedy"]["bleu"]),
                    f"**{beam}**" if w == chosen else beam, *split_cells(by[w, "beam 5"]),
                    num(by[w, "beam 5"]["chrf"])])  # fmt: skip
    header = ("weights", "dev BLEU, greedy", "test BLEU, greedy", "test BLEU, beam 5", *SPLIT, "test chrF, beam 5")
    run = rows[0]
    return grid(header, out) + (f"\n\n{run['updates']:,} updates, {run['epochs_done']} epochs, {num(run['wall_min'])} "
                                f"training minutes; {cpu_words(done['cpu'])}, {done['threads']} threads. In bold: "
                                "the weights of the highest dev BLEU. " + split_note([rows]))  # fmt: skip


GPU_SUMMARY = "curves/gpu/summary.json"


@table("time_to_quality_gpu")
def time_to_quality_gpu(results: Results) -> str:
    """The curves trained with ``trainer=gpu``: minutes to each BLEU level on one GPU and the dev BLEU at the end."""
    summary = results(GPU_SUMMARY)
    rows = reach_rows(results, summary, "curves/gpu", lambda run: [num(run["budget_min"], 0),
                                                                    num(run["points"][-1]["bleu"])])  # fmt: skip
    header = ("run", "budget (min)", "dev BLEU at the end", *REACHED,
              "updates")  # fmt: skip
    return grid(header, rows) + f"\n\n{summary['gpu']}, its host's {summary['cpu']['model']}; – : not reached."
