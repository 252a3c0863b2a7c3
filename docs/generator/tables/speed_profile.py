"""The tables of ``docs/results/speed.md`` and of the lab notebook's entries (``docs/lab/``) on where a training
step's time goes: cheaper dropout and attention masks (``bench/speed/train_speed.py`` before and after), the operator
profiles (``bench/speed/profile_step.py``) and long outputs (``bench/speed/long_output.py``)."""

from __future__ import annotations

from statistics import median

from tables import Results, grid, num, table, times
from tables.speed import NAMES, PRECISION, run_of, share


def shares_table(columns: dict[str, dict[str, float]]) -> str:
    """Operator groups as rows (largest first), one column per profile."""
    groups: dict[str, float] = {}
    for shares in columns.values():
        for group, value in shares.items():
            groups[group] = max(groups.get(group, 0.0), value)
    order = sorted(groups, key=lambda g: (g == "other", -groups[g]))
    rows = [[group, *(share(shares.get(group)) for shares in columns.values())] for group in order]
    return grid(["share of the profiled CPU time", *columns], rows)


# Dropout masks


def before_after(r: Results, folder: str, before: int, after: int) -> str:
    rows = []
    for precision in ("32-true", "bf16-mixed"):
        speeds = {}
        for label, count in (("before", before), ("after", after)):
            speeds[label] = [
                run_of(r(f"{folder}/{label}_{i}.json"), "transformer", precision)["tgt_tokens_per_s"]
                for i in range(1, count + 1)
            ]
        rows.append(
            [
                PRECISION[precision],
                ", ".join(num(x, 0) for x in speeds["before"]),
                ", ".join(num(x, 0) for x in speeds["after"]),
                f"**{times(median(speeds['after']) / median(speeds['before']))}**",
            ]
        )
    return grid(
        [
            "Transformer 6+6, real target tokens/s",
            f"before ({before} runs)",
            f"after ({after} runs)",
            "after / before (medians)",
        ],
        rows,
    )


@table("speed_dropout")
def speed_dropout(r: Results) -> str:
    return before_after(r, "dropout", 2, 3)


@table("speed_attention_masks")
def speed_attention_masks(r: Results) -> str:
    return before_after(r, "attention_masks", 2, 2)


# Where the time goes


@table("speed_profile_rnn")
def speed_profile_rnn(r: Results) -> str:
    shares = r("profile_step.json")["shares"]
    return shares_table(
        {
            "Bahdanau training": shares["bahdanau/training"],
            "Luong training": shares["luong/training"],
            "Bahdanau greedy decoding": shares["bahdanau/greedy decoding"],
            "Luong greedy decoding": shares["luong/greedy decoding"],
        }
    )


@table("speed_profile_transformer")
def speed_profile_transformer(r: Results) -> str:
    data = r("profile_step_bf16.json")
    shares = data["shares"]
    body = shares_table(
        {
            "training, float32": shares["transformer/training"],
            "training, bf16-mixed": shares["transformer/training (bf16-mixed, compile off)"],
            "greedy decoding": shares["transformer/greedy decoding"],
        }
    )
    steps = data["step_ms"]
    return (
        body + f"\n\nA step under the profiler: float32 {num(steps['transformer/training'], 0)} ms, "
        f"bf16-mixed {num(steps['transformer/training (bf16-mixed, compile off)'], 0)} ms."
    )


@table("speed_profile_transformer_earlier")
def speed_profile_transformer_earlier(r: Results) -> str:
    shares = r("profile_step_transformer.json")["shares"]
    return shares_table(
        {"training, float32": shares["transformer/training"], "greedy decoding": shares["transformer/greedy decoding"]}
    )


# Long outputs


def long_output_note(data: dict) -> str:
    after = data["after"]
    return f"\n\nA {after['src_len']}-piece source, {after['runs'][0]['steps']} steps, {after['threads']} threads."


@table("speed_long_output")
def speed_long_output(r: Results) -> str:
    """A search that runs to its length budget, as the code decodes it today."""
    data = r("long_output.json")
    window = data["after"]["window"]
    rows = [[NAMES[run["model"]].split()[0], run["search"], f"**{run['seconds']:.1f}**",
             f"{run['step_ms_by_window'][0]:.2f} → {run['step_ms_by_window'][-1]:.2f}"]
            for run in data["after"]["runs"]]  # fmt: skip
    header = ["model", "search", "seconds", f"ms a step, first → last {window} steps"]
    return grid(header, rows) + long_output_note(data)


@table("speed_long_output_before_after")
def speed_long_output_before_after(r: Results) -> str:
    """The same, beside the code before beam search kept a trail (``--label before``)."""
    data = r("long_output.json")
    before = {(run["model"], run["search"]): run for run in data["before"]["runs"]}
    rows = []
    for run in data["after"]["runs"]:
        old = before[(run["model"], run["search"])]
        steps_now, steps_old = run["step_ms_by_window"], old["step_ms_by_window"]
        rows.append(
            [
                NAMES[run["model"]].split()[0],
                run["search"],
                f"{old['seconds']:.1f}",
                f"**{run['seconds']:.1f}**",
                f"{steps_old[0]:.2f} → {steps_old[-1]:.2f}",
                f"{steps_now[0]:.2f} → {steps_now[-1]:.2f}",
            ]
        )
    window = data["after"]["window"]
    header = ["model", "search", "seconds before", "seconds now", f"ms a step before, first → last {window} steps",
              f"ms a step now, first → last {window} steps"]  # fmt: skip
    return grid(header, rows) + long_output_note(data)
