"""Tables of the lab notebook's model entries (``docs/lab/*-models-*.md``): the 15-minute runs of every model and
precision, every weighting of the long runs, the subword-sampling run's curve and decoding speed by batching."""

from __future__ import annotations

from tables import Results, grid, num, table
from tables.models import MODELS, WEIGHTS, bleu_pair, converged_rows, millions


@table("models_tatoeba_15min_variants")
def models_tatoeba_15min_variants(results: Results) -> str:
    """Tatoeba after a 15-minute wall-clock budget: every model, float32 and bfloat16 the same day, and JoeyNMT's."""
    runs = [
        ("Bahdanau", "quality_bahdanau.json"),
        ("Bahdanau", "quality_bahdanau_bf16.json"),
        ("Luong", "quality_luong.json"),
        ("Luong", "quality_luong_bf16.json"),
        ("Transformer 3+3", "quality_transformer_small.json"),
        ("Transformer 3+3", "quality_transformer_small_bf16.json"),
        ("Transformer 6+6 (an earlier day)", "quality_transformer.json"),
    ]
    out = []
    signature = None
    for label, name in runs:
        q = results(name)
        signature = q["bleu_signature"]
        bf16 = "trainer.precision=bf16-mixed" in q["overrides"]
        greedy, beam = bleu_pair(q["runs"], chrf=True)
        out.append(
            [
                label,
                "bfloat16 mixed" if bf16 else "float32",
                millions(q["parameters"]),
                f"{num(q['updates'], 0)} ({q['epoch']})",
                num(q["peak_rss_gib"], 2),
                greedy,
                beam,
            ]
        )
    joey = results("joeynmt_quality.json")
    greedy, beam = bleu_pair(joey["rows"], chrf=True, digits=2)
    joey_row = ["JoeyNMT 2.3 Transformer 6+6, 1 thread", "float32", "–", num(joey["updates"], 0), "–", greedy, beam]
    out.append(joey_row)
    joey_rnn = results("converged.json")["joeynmt_15min_bleu"]
    joey_rnn_label = "JoeyNMT 2.3 RNN (its anchor's README, its own test split)"
    out.append([joey_rnn_label, "float32", "–", "–", "–", num(joey_rnn, 2), "–"])
    header = [
        "model",
        "precision",
        "parameters",
        "updates (epoch)",
        "peak RSS, GiB",
        "test BLEU / chrF, greedy",
        "test BLEU / chrF, beam 5",
    ]
    return grid(header, out) + f"\n\nsacrebleu signature: `{signature}`."


@table("models_converged_weights")
def models_converged_weights(results: Results) -> str:
    """The long Tatoeba runs: plain, EMA and averaged weights, and the ensemble, greedy and beam 5."""
    rows = converged_rows(results, fast=True)
    order = ["fast", "transformer", "luong", "bahdanau", "luong_sampling", "luong + bahdanau"]
    labels = {
        "fast": "Transformer 3+3, the fast recipe (`experiment=converged_fast`)",
        "transformer": "Transformer 3+3",
        "luong": "Luong",
        "bahdanau": "Bahdanau",
        "luong_sampling": "Luong + subword sampling, BPE-dropout 0.1",
        "luong + bahdanau": "Ensemble Luong + Bahdanau",
    }
    out = []
    for run in order:
        mine = [r for r in rows if r["run"] == run]
        weights = list(dict.fromkeys(r["weights"] for r in mine))
        if run == "luong_sampling":
            weights = [w for w in weights if w in ("plain", "ema")]
        first = mine[0]
        label = labels[run]
        if "updates" in first:
            minutes = num(first["wall_min"]) if first.get("wall_min") is not None else "–"
            label += f" ({num(first['updates'], 0)} updates, {first['epochs_done']} epochs, {minutes} min)"
        for i, w in enumerate(weights):
            greedy, beam = bleu_pair([r for r in mine if r["weights"] == w], chrf=True)
            out.append([label if i == 0 else "", WEIGHTS[w], greedy, beam])
    header = ["run (updates, epochs, training minutes)", "weights", "greedy: BLEU / chrF", "beam 5: BLEU / chrF"]
    return grid(header, out)


@table("models_sampling")
def models_sampling(results: Results) -> str:
    """The learning curves at the subword-sampling run's snapshots: minutes and greedy BLEU at equal updates."""
    curves = results("converged.json")["curves"]
    by_step = {run: {p["step"]: p for p in points} for run, points in curves.items()}
    runs = ("luong", "luong_sampling", "bahdanau")
    names = ("Luong", "Luong + sampling", "Bahdanau")
    out = []
    for step in sorted(by_step["luong_sampling"]):
        row = [num(step, 0)]
        for run in runs:
            p = by_step[run].get(step)
            row += [num(p["minutes"]), num(p["bleu"])] if p else ["–", "–"]
        out.append(row)
    last = {run: max(curves[run], key=lambda p: p["step"]) for run in runs}
    header = ["updates"]
    for name in names:
        header += [f"{name}: minutes", f"{name}: BLEU"]
    note = "Last snapshot of each run: " + "; ".join(
        f"{n} {num(last[r]['step'], 0)} updates at {num(last[r]['minutes'])} min" for r, n in zip(runs, names)
    )
    return grid(header, out) + "\n\n" + note + "."


@table("models_decoding")
def models_decoding(results: Results) -> str:
    """Decoding speed of each model's 15-minute checkpoint by batching (bench/speed/decode_speed.py), greedy and
    beam 5."""
    rows = []
    for model in MODELS:
        data = results(f"decode_speed_{model}.json")
        for run in data["runs"]:
            rows.append(
                (
                    model.capitalize(),
                    run["search"],
                    run["batching"],
                    num(run["sentences"], 0),
                    num(run["sent_per_s"]),
                    f"{run['bleu']:.2f}",
                )
            )
    header = ("model", "search", "batching", "sentences", "sentences/s", "test BLEU")
    return grid(header, rows)
