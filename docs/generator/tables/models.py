"""Tables of docs/results/models.md (model quality: the built-in corpus, Tatoeba after 15 minutes and after the long
runs, training speed beside JoeyNMT 2.3) and the README's ``headline``."""

from __future__ import annotations

from nmt.config_keys import model_families
from tables import Results, grid, num, pct, split_note, table, times

MODELS = model_families()  # conf/model/*.yaml
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


HEADLINE = (  # the shipped experiments the README leads with: (experiment, how long, its runs' records, one a seed)
    ("tatoeba_fast", "15 min from launch", ("quality_tatoeba_fast.json", "quality_tatoeba_fast_seed2.json")),
    ("tatoeba_fast", "30 min from launch", ("quality_tatoeba_fast_30min.json",
                                            "quality_tatoeba_fast_30min_seed2.json")),
    ("converged_fast", "to the end", ("converged_fast.json",)),
    ("tatoeba_luong", "15 min from launch", ("quality_tatoeba_luong.json",)),
    ("tatoeba_bahdanau", "15 min from launch", ("quality_tatoeba_bahdanau.json",)),
)


def test_rows(results: Results, name: str) -> tuple[dict, dict, str]:
    """A record's greedy and beam-5 test rows (a long run's: its plain weights' best checkpoint) and its updates."""
    data = results(name)
    if "rows" in data:  # bench/quality/converged.py's
        rows = long_run(data["rows"], "fast")
        updates = f"{rows[0]['updates']:,} ({rows[0]['epochs_done']} epochs)"
        return scores(rows, "greedy"), scores(rows, "beam 5"), updates
    return scores(data["runs"], "greedy"), scores(data["runs"], "beam 5"), f"{data['updates']:,}"


def cpu_short(model: str) -> str:
    """A CPU as a table's column names it: "Intel Xeon", "AMD EPYC" (the source line below names it in full)."""
    return " ".join(w for w in model.replace("(R)", "").replace("(TM)", "").split() if w != "Processor")


def cpu_of(results: Results, name: str) -> str:
    """The CPU a record was measured on, as a column names it."""
    machine = (results.load(name).get("provenance") or {}).get("machine") or {}
    return cpu_short(machine.get("cpu") or "–")


@table("headline")
def headline(results: Results) -> str:
    """The shipped Tatoeba experiments: test BLEU after their budget (each seed), on the whole split and on the pairs
    whose English is unseen in training; the built-in corpus's quick start below."""
    out = []
    for experiment, trained, names in HEADLINE:
        cells = list(zip(*(test_rows(results, n) for n in names)))  # [(greedy...), (beam...), (updates...)]
        joined = lambda values: " / ".join(values)  # noqa: E731
        greedy, beam, updates = cells
        seeds = " (seeds 1 / 2)" if len(names) > 1 else ""
        cpus = joined(dict.fromkeys(cpu_of(results, n) for n in names))
        out.append([f"`experiment={experiment}`", trained + seeds, cpus, joined(updates),
                    joined(num(r["bleu"]) for r in greedy), f"**{joined(num(r['bleu']) for r in beam)}**",
                    joined(num(r.get("unseen_bleu")) for r in beam), joined(num(r["chrf"]) for r in beam)])  # fmt: skip
    header = ["experiment", "trained", "CPU", "updates", "test BLEU, greedy", "test BLEU, beam 5",
              "beam 5, unseen references", "test chrF, beam 5"]  # fmt: skip
    toy = toy_runs(results)
    bleu, minutes = {m: num(toy[m]["test_bleu"]) for m in MODELS}, num(toy["bahdanau"]["wall_min"])
    builtin = (f"The built-in corpus: `python train.py` (the Bahdanau model, 5 epochs, {minutes} min) reaches test "
               f"BLEU {bleu['bahdanau']}; `model=luong` {bleu['luong']}, `model=transformer` {bleu['transformer']}.")
    split = [test_rows(results, name)[1] for _, _, names in HEADLINE for name in names]
    return grid(header, out) + "\n\n" + split_note([split]) + "\n\n" + builtin


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


SHIPPED_15MIN = (  # (experiment, its 15-minute record): the reference experiments and the fast recipe
    ("tatoeba_bahdanau", "quality_tatoeba_bahdanau.json"),
    ("tatoeba_luong", "quality_tatoeba_luong.json"),
    ("tatoeba_transformer (6+6 layers)", "quality_tatoeba_transformer.json"),
    ("tatoeba_fast (3+3 layers)", "quality_tatoeba_fast.json"),
)


@table("models_tatoeba_15min")
def models_tatoeba_15min(results: Results) -> str:
    """Tatoeba after a 15-minute budget from launch: each shipped experiment, and JoeyNMT's anchors."""
    out = []
    for experiment, name in SHIPPED_15MIN:
        q = results(name)
        greedy, beam = bleu_pair(q["runs"], chrf=True)
        out.append([f"`{experiment}`", cpu_of(results, name), millions(q["parameters"]),
                    f"{num(q['updates'], 0)} ({q['epoch']})", greedy, beam,
                    num(scores(q["runs"], "beam 5").get("unseen_bleu"))])  # fmt: skip
    joey = results("joeynmt_quality.json")
    greedy, beam = bleu_pair(joey["rows"], chrf=True, digits=2)
    out.append(["JoeyNMT 2.3, its Transformer anchor (6+6), 1 thread", cpu_of(results, "joeynmt_quality.json"), "–",
                num(joey["updates"], 0), greedy, beam, "–"])  # fmt: skip
    joey_rnn = results("converged.json")["joeynmt_15min_bleu"]
    out.append(["JoeyNMT 2.3, its RNN anchor (its README, its own test split)", "its own", "–", "–", num(joey_rnn, 2),
                "–", "–"])  # fmt: skip
    header = ["experiment", "CPU", "parameters", "updates (epoch)", "test BLEU / chrF, greedy",
              "test BLEU / chrF, beam 5", "beam 5, unseen references"]  # fmt: skip
    note = split_note([results(name)["runs"] for _, name in SHIPPED_15MIN])
    return grid(header, out) + f"\n\n{note} sacrebleu signature: `{results(SHIPPED_15MIN[0][1])['bleu_signature']}`."


LONG_RUNS = {  # bench/quality/converged.py's runs, as the tables name them
    "fast": "`converged_fast`: the fast recipe to the end",
    "transformer": "`converged_transformer`: Transformer 3+3",
    "luong": "`converged_luong`",
    "bahdanau": "`converged_bahdanau`",
    "luong_sampling": "`converged_luong_sampling`: subword sampling, BPE-dropout 0.1",
    "luong + bahdanau": "ensemble of `converged_luong` and `converged_bahdanau`",
}


@table("models_converged")
def models_converged(results: Results) -> str:
    """The long Tatoeba runs, each with the plain weights of its best checkpoint (the ensemble: its EMA weights)."""
    rows = converged_rows(results, fast=True)
    out = []
    for run, label in LONG_RUNS.items():
        mine = [r for r in rows if r["run"] == run]
        chosen = [r for r in mine if r["weights"] == ("plain" if run != "luong + bahdanau" else "ensemble (EMA)")]
        first = mine[0]
        trained = "–" if "updates" not in first else \
            f"{num(first['updates'], 0)} updates, {first['epochs_done']} epochs, {num(first.get('wall_min'))} min"
        greedy, beam = bleu_pair(chosen, chrf=True)
        out.append([label, trained, greedy, beam, num(scores(chosen, "beam 5").get("unseen_bleu"))])
    header = ["experiment", "trained", "test BLEU / chrF, greedy", "test BLEU / chrF, beam 5",
              "beam 5, unseen references"]  # fmt: skip
    return grid(header, out) + "\n\n" + split_note([rows])
