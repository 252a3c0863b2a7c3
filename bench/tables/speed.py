"""The tables of ``docs/results/speed.md``: training speed, bfloat16, the compiled step, dropout masks, where the
time goes, corpora of WMT size and long outputs."""

from __future__ import annotations

import re
from statistics import median

from tables import Results, grid, num, pct, table, times

NAMES = {"bahdanau": "Bahdanau", "luong": "Luong", "transformer": "Transformer 6+6"}
PRECISION = {"32-true": "float32", "bf16-mixed": "bf16-mixed"}


def gib(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f} GiB"


def share(x: float | None) -> str:
    """A profile share, already in percent (61.1 -> "61.1%")."""
    return "–" if x is None else f"{x:.1f}%"


def run_of(data: dict, model: str, precision: str = "32-true", compiled: bool = False, max_tokens: int = 2400) -> dict:
    """The row of a ``bench/train_speed.py`` JSON for one model and setting."""
    for run in data["runs"]:
        if (
            run["model"] == model
            and run.get("precision", "32-true") == precision
            and run.get("compiled", False) == compiled
            and run["max_tokens"] == max_tokens
        ):
            return run
    raise KeyError(f"no run of {model} at {precision}, compiled={compiled}, {max_tokens} tokens")


def quality(r: Results, name: str) -> dict:
    """Updates, BLEU, chrF and peak RSS of a ``bench/quality.py`` JSON."""
    data = r(name)
    scores = {run["search"]: run for run in data["runs"]}
    return {
        "updates": data["updates"],
        "bleu": f"{scores['greedy']['bleu']:.2f} / {scores['beam 5']['bleu']:.2f}",
        "beam_bleu": scores["beam 5"]["bleu"],
        "chrf": f"{scores['beam 5']['chrf']:.2f}",
        "rss": gib(data["peak_rss_gib"]),
    }


QUALITY_THREADS = 2  # bench/quality.py's --threads default


def quality_threads(r: Results, name: str) -> str:
    """The CPU threads of a ``bench/quality.py`` run: as its provenance records them, else its command's
    ``--threads``, else the script's default, said as such."""
    prov = r.load(name).get("provenance", {})
    threads = prov.get("machine", {}).get("threads")
    if isinstance(threads, int):
        return str(threads)
    given = re.search(r"--threads[ =](\d+)", prov.get("command", ""))
    return given.group(1) if given else f"{QUALITY_THREADS} (the script's default)"


def best_gemm(data: dict) -> str:
    gemm = data["gemm_gflops_per_s"]
    if isinstance(gemm, dict):
        return ", ".join(f"{kind} {num(v)}" for kind, v in gemm.items())
    return num(gemm)


def shares_table(columns: dict[str, dict[str, float]]) -> str:
    """Operator groups as rows (largest first), one column per profile."""
    groups: dict[str, float] = {}
    for shares in columns.values():
        for group, value in shares.items():
            groups[group] = max(groups.get(group, 0.0), value)
    order = sorted(groups, key=lambda g: (g == "other", -groups[g]))
    rows = [[group, *(share(shares.get(group)) for shares in columns.values())] for group in order]
    return grid(["share of the profiled CPU time", *columns], rows)


# Training speed


@table("speed_model_alone")
def speed_model_alone(r: Results) -> str:
    data = r("model_speed.json")
    sentences, length = data["batch"]
    rows = [[NAMES[run["model"]], num(run["tgt_tokens_per_s"], 0), num(run["step_ms"])] for run in data["runs"]]
    return (
        grid(["model alone (forward, backward, Adam)", "target tokens/s", "ms a step"], rows)
        + f"\n\n{sentences} sentences of {length} source and {length} target tokens a batch, no padding; "
        f"Luong / Bahdanau: {times(data['luong_over_bahdanau'])}."
    )


# bfloat16


@table("speed_bf16_step")
def speed_bf16_step(r: Results) -> str:
    data = r("train_speed_bf16.json")
    rows = []
    for model in ("bahdanau", "luong", "transformer"):
        f32, bf16 = run_of(data, model), run_of(data, model, "bf16-mixed")
        rows.append(
            [
                NAMES[model],
                num(f32["tgt_tokens_per_s"], 0),
                num(bf16["tgt_tokens_per_s"], 0),
                f"**{times(bf16['tgt_tokens_per_s'] / f32['tgt_tokens_per_s'])}**",
                f"{pct(f32['fraction_of_gemm'], 0)} → {pct(bf16['fraction_of_gemm'], 0)}",
                f"{gib(f32['peak_rss_gib'])} → {gib(bf16['peak_rss_gib'])}",
            ]
        )
    return (
        grid(
            [
                "model",
                "float32, real target tokens/s",
                "bf16-mixed",
                "bf16 / float32",
                "model FLOP rate, share of its precision's GEMM",
                "peak RSS",
            ],
            rows,
        )
        + f"\n\nBest GEMM readings of this run, GFLOP/s: {best_gemm(data)}; "
        f"{num(run_of(data, 'bahdanau')['tgt_tokens_per_batch'], 0)} real target tokens a batch."
    )


BF16_QUALITY = [
    ("Transformer 3+3", "float32", "quality_transformer_small.json"),
    ("Transformer 3+3", "bf16-mixed", "quality_transformer_small_bf16.json"),
    ("Luong", "float32", "quality_luong.json"),
    ("Luong", "bf16-mixed", "quality_luong_bf16.json"),
    ("Bahdanau", "float32", "quality_bahdanau.json"),
    ("Bahdanau", "bf16-mixed", "quality_bahdanau_bf16.json"),
    ("Bahdanau", "bf16-mixed, oneDNN cache 64 (the default now)", "quality_bahdanau_bf16_onednn_cache_64.json"),
]


@table("speed_bf16_quality")
def speed_bf16_quality(r: Results) -> str:
    rows, base = [], {}
    threads = {name: quality_threads(r, name) for _, _, name in BF16_QUALITY}
    same = len(set(threads.values())) == 1
    for model, precision, name in BF16_QUALITY:
        q = quality(r, name)
        if precision == "float32":
            base[model] = q
            more, gain = "–", "–"
        else:
            more = pct(q["updates"] / base[model]["updates"] - 1, 0)
            gain = f"{q['beam_bleu'] - base[model]['beam_bleu']:+.2f}"
        label = model if same else f"{model}, threads: {threads[name]}"
        rows.append([label, precision, num(q["updates"], 0), more, q["bleu"], gain, q["chrf"], q["rss"]])
    return grid(
        [
            f"15 minutes, threads: {next(iter(threads.values()))}" if same else "15 minutes",
            "precision",
            "updates",
            "more updates than float32",
            "test BLEU greedy / beam 5",
            "BLEU beam 5 against float32",
            "chrF beam 5",
            "peak RSS",
        ],
        rows,
    )


@table("speed_bf16_cache")
def speed_bf16_cache(r: Results) -> str:
    settings = [
        ("capacity 0 (no cache)", "bf16_onednn_cache_0"),
        ("capacity 64 (`onednn_cache` default)", "bf16_onednn_cache_64"),
        ("capacity 256", "bf16_onednn_cache_256"),
        ("capacity 1,024", "bf16_onednn_cache_1024"),
        ("oneDNN's default (1,024)", "bf16_default"),
    ]
    rows = []
    for label, stem in settings:
        runs = [r(f"bf16_rss/{stem}_run{i}.json")["runs"][0] for i in (1, 2)]
        rows.append(
            [
                f"bf16-mixed, {label}",
                ", ".join(f"{run['peak_rss_gib']:.2f}" for run in runs),
                ", ".join(num(run["tgt_tokens_per_s"], 0) for run in runs),
            ]
        )
    fp32 = r("bf16_rss/fp32_run1.json")["runs"][0]
    rows.append(["float32", f"{fp32['peak_rss_gib']:.2f}", num(fp32["tgt_tokens_per_s"], 0)])
    return grid(["Transformer 6+6, 30 steps", "peak RSS, GiB (two runs)", "real target tokens/s (two runs)"], rows)


# The compiled step


@table("speed_compile")
def speed_compile(r: Results) -> str:
    rows = []
    for name, model, precision in (
        ("train_speed_compile_all.json", "bahdanau", "32-true"),
        ("train_speed_compile_all.json", "luong", "32-true"),
        ("train_speed_compile_all.json", "transformer", "32-true"),
        ("train_speed_transformer_bf16_compile.json", "transformer", "bf16-mixed"),
    ):
        data = r(name)
        eager = run_of(data, model, precision)
        comp = run_of(data, model, precision, compiled=True)
        ratio = comp["tgt_tokens_per_s"] / eager["tgt_tokens_per_s"]
        payback = comp["compile_seconds"] / (1 - 1 / ratio) / 60
        rows.append(
            [
                NAMES[model],
                PRECISION[precision],
                num(eager["tgt_tokens_per_s"], 0),
                num(comp["tgt_tokens_per_s"], 0),
                f"**{times(ratio)}**",
                f"{comp['graphs']}, {num(comp['compile_seconds'], 0)} s",
                f"{pct(eager['fraction_of_gemm'], 0)} → {pct(comp['fraction_of_gemm'], 0)}",
                f"{num(payback, 0)} min",
                f"{times(eager['vs_joeynmt'])} / {times(comp['vs_joeynmt'])} of "
                f"{num(eager['joeynmt_tgt_tokens_per_s'], 0)}",
            ]
        )
    return grid(
        [
            "model",
            "precision",
            "eager, real target tokens/s",
            "compiled",
            "compiled / eager",
            "graphs, compile time (cold)",
            "model FLOP rate, share of the GEMM, eager → compiled",
            "run length at which compiling has paid for itself",
            "eager / compiled against JoeyNMT 2.3's anchor figure (another day)",
        ],
        rows,
    )


FUSED = ("elementwise add/mul/sub", "tanh", "sigmoid", "log-softmax / softmax", "relu", "layer norm")


@table("speed_compile_profile")
def speed_compile_profile(r: Results) -> str:
    rows = []
    for name, models in (
        ("profile_step_compiled.json", ("bahdanau", "luong")),
        ("profile_step_transformer_compiled.json", ("transformer",)),
    ):
        data = r(name)
        for model in models:
            eager_key, comp_key = f"{model}/training", f"{model}/training (32-true, compile on)"
            eager, comp = data["shares"][eager_key], data["shares"][comp_key]
            rows.append(
                [
                    NAMES[model],
                    f"{num(data['step_ms'][eager_key], 0)} → {num(data['step_ms'][comp_key], 0)}",
                    f"{share(eager['matrix products'])} → {share(comp['matrix products'])}",
                    share(comp["compiled kernels (Inductor)"]),
                    share(sum(eager.get(g, 0.0) for g in FUSED)),
                ]
            )
    return grid(
        [
            "float32 training step, under the profiler",
            "ms a step, eager → compiled",
            "matrix products, eager → compiled",
            "Inductor's fused kernels (compiled)",
            "element-wise, activations, soft-max, layer norm (eager)",
        ],
        rows,
    )


@table("speed_compile_ceiling")
def speed_compile_ceiling(r: Results) -> str:
    run = run_of(r("train_speed_compile_all.json"), "transformer")
    gemm = r("train_speed_compile_all.json")["gemm_gflops_per_s"]["float32"]
    prof = r("profile_step_transformer_compiled.json")
    step_s = run["tgt_tokens_per_batch"] / run["tgt_tokens_per_s"]
    gflop = run["model_gflops_per_s"] * step_s
    matmul_s = (
        prof["shares"]["transformer/training"]["matrix products"] / 100 * prof["step_ms"]["transformer/training"] / 1000
    )
    speed, profile = "`train_speed_compile_all.json`", "`profile_step_transformer_compiled.json`"
    rows = [
        [f"model arithmetic a step (counted on real tokens; {speed})", f"{num(gflop, 0)} GFLOP"],
        [f"the eager step, unprofiled ({speed})", f"{step_s:.2f} s"],
        [f"the eager step's matrix products, under the profiler (another run: {profile})", f"{matmul_s:.2f} s"],
        [
            f"their rate (the arithmetic of {speed} over the matrix-product time of {profile}), against the GEMM "
            f"rate measured by {speed}",
            f"{num(gflop / matmul_s, 0)} GFLOP/s of {num(gemm, 0)}",
        ],
        [
            f"the step if everything else took no time: speed-up at most (the step of {speed} over the "
            f"matrix-product time of {profile})",
            f"**{times(step_s / matmul_s)}**",
        ],
    ]
    return grid(["Transformer 6+6, float32, eager", ""], rows)


@table("speed_compiled_masks")
def speed_compiled_masks(r: Results) -> str:
    data = r("compiled_masks.json")
    rows = [
        [f"`{run['what']}`", f"{run['eager_ms']:.2f}", f"{run['compiled_ms']:.2f}", times(run["compiled_vs_eager"], 1)]
        for run in data["runs"]
    ]
    rows_, cols = data["shape"]
    return grid([f"{rows_:,} × {cols:,} float32", "eager, ms", "compiled, ms", "compiled / eager"], rows)


@table("speed_compile_quality")
def speed_compile_quality(r: Results) -> str:
    rows = []
    for model in ("luong", "bahdanau", "transformer"):
        for step in ("eager", "compiled"):
            q = quality(r, f"quality_{model}_1thread_{step}.json")
            rows.append([NAMES[model], step, num(q["updates"], 0), q["bleu"], q["chrf"], q["rss"]])
    return grid(
        ["15 minutes, one thread each, side by side", "step", "updates", "test BLEU greedy / beam 5", "chrF beam 5",
         "peak RSS"],
        rows,
    )  # fmt: skip


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


# Corpora of WMT size


def pairs_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n:,}"


def size(mb: float) -> str:
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb:.0f} MB"


@table("speed_data_scale")
def speed_data_scale(r: Results) -> str:
    data = r("data_scale.json")
    rows = []
    for row in data["rows"]:
        rows.append(
            [
                pairs_label(row["pairs"]),
                size(row["tsv_mb"]),
                f"{row['prepare_s']:.1f} s",
                f"{row['pairs_per_s'] / 1000:.1f}k",
                f"{row['prepare_peak_pss_gib']:.2f} / {row['prepare_peak_rss_gib']:.2f} GiB",
                size(row["prepared_mb"]),
                f"{row['data_start_s']:.2f} s / {row['start_to_first_step_s']:.1f} s",
                gib(row["train_rss_gib"]),
            ]
        )
        if "baseline_prepare_s" in row:
            rows.append(
                [
                    f"{pairs_label(row['pairs'])}, code before streaming",
                    size(row["tsv_mb"]),
                    f"{row['baseline_prepare_s']:.1f} s",
                    f"{row['baseline_pairs_per_s'] / 1000:.1f}k",
                    f"{row['baseline_peak_pss_gib']:.2f} / {row['baseline_peak_rss_gib']:.2f} GiB",
                    "",
                    "",
                    "",
                ]
            )
    return grid(
        [
            "pairs",
            "TSV",
            "prepare",
            "pairs/s",
            "peak memory (tree PSS / largest RSS)",
            "on disk",
            "warm start: data / to first step",
            "training RSS after 50 steps",
        ],
        rows,
    )


@table("speed_data_scale_phases")
def speed_data_scale_phases(r: Results) -> str:
    rows = [
        [
            pairs_label(row["pairs"]),
            f"{row['sample_s']:.1f} s",
            f"{row['sentencepiece_s']:.1f} s",
            f"{row['encode_s']:.1f} s",
            f"{1e6 * row['encode_s'] / row['pairs']:.1f} µs",
        ]
        for row in r("data_scale.json")["rows"]
    ]
    return grid(["pairs", "sample", "sentencepiece", "encode", "encode, a pair"], rows)


@table("speed_batch_plan")
def speed_batch_plan(r: Results) -> str:
    s = r("data_scale.json")["sampler"]
    rows = [
        ["pairs planned", pairs_label(s["pairs"])],
        ["batches", num(s["batches"], 0)],
        ["planning time", f"{s['plan_s']:.1f} s"],
        ["plan size", f"{s['plan_bytes_per_pair']:.0f} bytes a pair"],
        ["peak RSS of the planning process", gib(s["peak_rss_gib"])],
        ["an epoch's first batch", f"{1000 * s['epoch_first_batch_s']:.0f} ms"],
        ["each further batch", f"{s['batch_draw_us'] / 1000:.1f} ms"],
    ]
    return grid(["the batch plan", ""], rows)


@table("speed_encode")
def speed_encode(r: Results) -> str:
    rows = [
        [
            row["side"],
            num(row["sentences"], 0),
            num(row["words"], 0),
            num(row["distinct_words"], 0),
            f"{row['by_sentence_s']:.2f} s",
            f"{row['by_word_s']:.2f} s",
            f"**{times(row['speed_up'], 1)}**",
            "yes" if row["same_ids"] else "**no**",
        ]
        for row in r("encode_speed.json")["rows"]
    ]
    return grid(
        ["side", "sentences", "words", "distinct words", "by sentence", "by distinct word", "speed-up", "same ids"],
        rows,
    )


@table("speed_data_stats")
def speed_data_stats(r: Results) -> str:
    data = r("data_stats.json")
    rows = [[key, num(value, 0) if isinstance(value, int) else f"{value:g}"] for key, value in data.items()]
    return grid(["Tatoeba training split", ""], rows)


@table("speed_id_check")
def speed_id_check(r: Results) -> str:
    data = r("id_check.json")
    rows = [
        ["collating a batch, checked / unchecked",
         f"{num(data['collate_us']['checked'], 0)} / {num(data['collate_us']['unchecked'], 0)} µs"],
        ["the check, a batch", f"{data['check_us']:.1f} µs"],
        *([f"share of a {NAMES[s['model']]} training step ({num(s['step_ms'], 0)} ms)", s["check_share"]]
          for s in data["share_of_a_training_step"]),
    ]  # fmt: skip
    return grid([f"{data['batches']} reference batches, median of {data['rounds']} rounds", ""], rows)


# Long outputs


@table("speed_long_output")
def speed_long_output(r: Results) -> str:
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
    return grid(
        [
            "model",
            "search",
            "seconds before",
            "seconds now",
            f"ms a step before, first → last {window} steps",
            f"ms a step now, first → last {window} steps",
        ],
        rows,
    ) + (
        f"\n\nA {data['after']['src_len']}-piece source, {data['after']['runs'][0]['steps']} steps, "
        f"{data['after']['threads']} threads."
    )
