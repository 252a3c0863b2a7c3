"""Tables of docs/results/models.md (model quality: the built-in corpus, Tatoeba after 15 minutes and after the long
runs, training speed beside JoeyNMT 2.3) and the README's ``headline``."""

from __future__ import annotations

from tables import Results, grid, num, pct, table, times

MODELS = ("bahdanau", "luong", "transformer")
NAMES = {"bahdanau": "Bahdanau", "luong": "Luong", "transformer": "Transformer"}


def millions(n: int) -> str:
    return f"{n / 1e6:.2f} M" if n >= 1.5e7 else f"{n / 1e6:.1f} M"


def scores(runs: list[dict], search: str) -> dict:
    return next(r for r in runs if r["search"] == search)


def bleu_pair(runs: list[dict], chrf: bool = False, digits: int = 1) -> tuple[str, str]:
    """Greedy and beam 5 cells: BLEU, or "BLEU / chrF"."""
    cells = []
    for search in ("greedy", "beam 5"):
        r = scores(runs, search)
        bleu = num(r["bleu"], digits)
        cells.append(f"{bleu} / {num(r['chrf'], digits)}" if chrf else bleu)
    return cells[0], cells[1]


def toy_runs(results: Results, tag: str = "") -> dict[str, dict]:
    """The built-in corpus runs by model: toy_quality[_<tag>].json (RNNs) and its _transformer companion."""
    suffix = f"_{tag}" if tag else ""
    runs = {r["model"]: r for r in results(f"toy_quality{suffix}.json")["runs"]}
    runs.update({r["model"]: r for r in results(f"toy_quality{suffix}_transformer.json")["runs"]})
    return runs


WEIGHTS = {  # bench/quality/converged.py's weightings, as the tables name them
    "plain": "plain, best checkpoint",
    "ema": "EMA, same checkpoint",
    "average of the 5 best (EMA)": "average of the 5 best checkpoints (EMA)",
    "average of the last 5 snapshots (plain)": "average of the last 5 snapshots (plain)",
    "ensemble (EMA)": "EMA weights of each",
}


def converged_rows(results: Results, fast: bool = False) -> list[dict]:  # the reference runs' (and the fast recipe's)
    names = ["converged.json", "converged_transformer.json", *(["converged_fast.json"] if fast else [])]
    return [row for name in names for row in results(name)["rows"]]


def long_run(rows: list[dict], run: str, weights: str = "plain") -> list[dict]:
    return [r for r in rows if r["run"] == run and r["weights"] == weights]


def attention_choice(run: dict) -> str:
    """Which attention a built-in corpus run's AER reads (the choice of lowest validation AER)."""
    a = run.get("alignment")
    if run["model"] != "transformer":
        return "its one head"
    head = "heads' mean" if a["head"] is None else f"head {a['head']}"
    return f"layer {a['layer']}, {head}"


@table("headline")
def headline(results: Results) -> str:
    """The three models in one table: size, built-in corpus, Tatoeba after 15 minutes and after the long run, speed."""
    toy, guided = toy_runs(results), toy_runs(results, "guided")
    quality = {
        "bahdanau": results("quality_bahdanau.json"),
        "luong": results("quality_luong.json"),
        "transformer": results("quality_transformer_small.json"),
    }
    rows = converged_rows(results)
    speed = {
        r["model"]: r
        for r in results("train_speed_compile_all.json")["runs"]
        if not r["compiled"] and r["precision"] == "32-true"
    }
    out = []
    for m in MODELS:
        q = quality[m]
        params = millions(q["parameters"]) + (" (3+3 layers)" if m == "transformer" else "")
        greedy, beam = bleu_pair(q["runs"])
        lg, lb = bleu_pair(long_run(rows, m))
        tps = num(speed[m]["tgt_tokens_per_s"], 0) + (" (6+6 layers)" if m == "transformer" else "")
        out.append(
            [
                f"**{NAMES[m]}**",
                params,
                num(toy[m]["test_bleu"]),
                f"{num(toy[m]['test_aer'], 3)} / {num(guided[m]['test_aer'], 3)}",
                f"{greedy} / {beam}",
                f"{lg} / {lb}",
                tps,
            ]
        )
    header = ["model", "parameters (Tatoeba)", "built-in corpus: test BLEU",
              "built-in corpus: test AER, plain / guided", "Tatoeba: test BLEU after 15 min, greedy / beam 5",
              "Tatoeba: test BLEU after the long run, greedy / beam 5",
              "training: target tokens/s (float32, 2 threads)"]  # fmt: skip
    return grid(header, out)


@table("models_toy")
def models_toy(results: Results) -> str:
    """The built-in corpus with the defaults: time, updates, test scores, AER; the same with guided alignment."""
    plain, guided = toy_runs(results), toy_runs(results, "guided")
    exported = {r["model"]: r for r in results("alignment.json")["runs"]}
    exported_guided = {r["model"]: r for r in results("alignment_guided.json")["runs"]}
    out = []
    for m in MODELS:
        p, g = plain[m], guided[m]
        out.append(
            [
                NAMES[m],
                num(p["wall_min"]),
                num(p["updates"], 0),
                num(p["test_bleu"]),
                num(p["test_chrf"]),
                f"{num(p['test_aer'], 3)} ({attention_choice(p)})",
                num(exported[m]["aer_of_exported_links"], 4),
                f"{num(g['test_bleu'])} / {num(g['test_chrf'])}",
                f"**{num(g['test_aer'], 3)}** ({attention_choice(g)})",
                num(exported_guided[m]["aer_of_exported_links"], 4),
            ]
        )
    header = [
        "model",
        "wall-clock, min",
        "updates",
        "test BLEU",
        "test chrF",
        "test AER (attention read)",
        "AER of `--align-to` links",
        "guided: test BLEU / chrF",
        "guided: test AER (attention read)",
        "guided: AER of `--align-to` links",
    ]
    return grid(header, out)


@table("models_toy_alignment")
def models_toy_alignment(results: Results) -> str:
    """Every layer and readout of the built-in corpus checkpoints, head mean and best head; plain and guided."""
    plain = {c["model"]: c for c in results("alignment.json")["choices"]}
    guided = {c["model"]: c for c in results("alignment_guided.json")["choices"]}

    def cells(choice: dict, readout: str, layer: int) -> list[str]:
        entry = choice["layers"][readout][layer]
        n_layers = len(choice["layers"][readout])
        chosen = choice["chosen"]
        is_chosen = chosen["readout"] == readout and chosen["layer"] % n_layers == layer
        mean, best = num(entry["head_mean"], 3), num(entry["best_head"], 3)
        if is_chosen and chosen["head"] is None:
            mean = f"**{mean}**"
        if is_chosen and chosen["head"] is not None:
            best = f"**{best}**"
        return [mean, "(one head)" if choice["model"] != "transformer" else best]

    out = []
    for m in MODELS:
        for readout in ("output", "input"):
            for layer in range(len(plain[m]["layers"][readout])):
                label = NAMES[m] if readout == "output" and layer == 0 else ""
                out.append([label, readout, layer, *cells(plain[m], readout, layer), *cells(guided[m], readout, layer)])
    header = [
        "model",
        "readout",
        "layer",
        "AER, mean of the layer's heads",
        "AER, best single head",
        "guided: heads' mean",
        "guided: best single head",
    ]
    return grid(header, out)


@table("models_rnn_speed")
def models_rnn_speed(results: Results) -> str:
    """The RNN models' training speed at the reference batch and at JoeyNMT's, against JoeyNMT's published figure."""
    speed = results("train_speed.json")
    key = next(k for r in speed["runs"] for k in r if k.startswith("vs_joeynmt_"))
    published = int(key.rsplit("_", 1)[1])
    out = []
    for r in sorted(speed["runs"], key=lambda r: (-r["max_tokens"], r["model"])):
        lo, hi = r["tgt_tokens_per_s_range"]
        out.append(
            [
                NAMES[r["model"]],
                f"{num(r['max_tokens'], 0)} (~{num(r['tgt_tokens_per_batch'], 0)})",
                f"**{num(r['tgt_tokens_per_s'], 0)}** ({num(lo, 0)}–{num(hi, 0)})",
                times(r[key], 2),
                num(r["padding_efficiency"], 3),
                f"{num(r['model_gflops_per_s'])} ({pct(r['fraction_of_gemm'], 0)})",
                num(r["peak_rss_gib"], 2),
            ]
        )
    header = [
        "model",
        "batch: padded tokens (real target tokens)",
        "target tokens/s, median (range)",
        f"× JoeyNMT's published {published:,}",
        "padding efficiency",
        "model GFLOP/s (share of the best GEMM reading)",
        "peak RSS, GiB",
    ]
    gemm = speed["gemm_readings"]
    stats = results("data_stats.json")
    notes = [
        f"float32 GEMM readings of the same run: {', '.join(num(g) for g in gemm)} GFLOP/s "
        f"({speed['threads']} threads).",
        f"Random batches of the same count (no length bucketing, `bench/speed/data_stats.py`): padding efficiency "
        f"{num(stats['padding efficiency, random batches (same count)'], 2)}; bucketed: "
        f"{num(stats['padding efficiency, bucketed (2400 tokens)'], 3)}.",
    ]
    return grid(header, out) + "\n\n" + "\n".join(f"- {n}" for n in notes)


@table("models_transformer_speed")
def models_transformer_speed(results: Results) -> str:
    """Our Transformer and JoeyNMT's at the anchor's sizes, in turn in one run; two runs on different days."""
    out = []
    published = None
    params = {}
    for name in ("joeynmt_transformer.json", "joeynmt_transformer_bf16.json"):
        data = results(name)
        (rnd,) = data["rounds"]
        joey = rnd["joeynmt"]
        params["JoeyNMT"] = joey["params"]
        lo, hi = joey["tok_per_s_steady_min_max"]
        out.append(
            [
                f"`{name}`",
                "JoeyNMT 2.3",
                "float32",
                "4,096 padded tokens, not bucketed",
                f"{num(joey['tok_per_s_steady_median'], 0)} ({num(lo, 0)}–{num(hi, 0)})",
                times(1.0),
                "–",
                "–",
            ]
        )
        for r in rnd["ours"]:
            published = r["joeynmt_tgt_tokens_per_s"]
            params["ours"] = r["parameters"]
            lo, hi = r["tgt_tokens_per_s_range"]
            ratio = r["tgt_tokens_per_s"] / joey["tok_per_s_steady_median"]
            out.append(
                [
                    "",
                    "ours (eager)",
                    "bfloat16 mixed" if r.get("precision") == "bf16-mixed" else "float32",
                    f"{num(r['max_tokens'], 0)} padded (~{num(r['tgt_tokens_per_batch'], 0)} real target tokens)",
                    f"**{num(r['tgt_tokens_per_s'], 0)}** ({num(lo, 0)}–{num(hi, 0)})",
                    f"**{times(ratio, 2)}**",
                    f"{pct(r['fraction_of_gemm'], 0)} of {num(r['gemm_gflops_per_s'])}",
                    times(r["vs_joeynmt"], 2),
                ]
            )
    header = [
        "run",
        "system",
        "precision",
        "batch",
        "target tokens/s, median (range)",
        "× JoeyNMT in the same run",
        "model FLOP rate: share of the run's GEMM GFLOP/s (that precision)",
        f"× the anchor README's {published:,}",
    ]
    note = f"Parameters: JoeyNMT {millions(params['JoeyNMT'])}, ours {millions(params['ours'])}."
    return grid(header, out) + "\n\n" + note


@table("models_tatoeba_15min")
def models_tatoeba_15min(results: Results) -> str:
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


@table("models_converged")
def models_converged(results: Results) -> str:
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
    for model in ("bahdanau", "luong", "transformer"):
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
