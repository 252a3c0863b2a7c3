"""The tables of ``docs/results/speed.md`` on the training step: the three models' speed, the fast recipe's, bfloat16
and the compiled step (``bench/speed/train_speed.py``, ``bench/quality/curve.py``); with those of the lab notebook's
entries on them (``docs/lab/*-speed-*.md``: ``bench/speed/model_speed.py``, ``bench/quality/quality.py``), and the
helpers the other speed tables share (``speed_profile.py``: where the time goes; ``speed_data.py``: corpora and the
data pipeline)."""

from __future__ import annotations

import re

from nmt.config_keys import model_families
from tables import Results, grid, num, pct, table, times

NAMES = {"bahdanau": "Bahdanau", "luong": "Luong", "transformer": "Transformer 6+6"}
PRECISION = {"32-true": "float32", "bf16-mixed": "bf16-mixed"}


def gib(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f} GiB"


def share(x: float | None) -> str:
    """A profile share, already in percent (61.1 -> "61.1%")."""
    return "–" if x is None else f"{x:.1f}%"


def run_of(data: dict, model: str, precision: str = "32-true", compiled: bool = False, max_tokens: int = 2400) -> dict:
    """The row of a ``bench/speed/train_speed.py`` JSON for one model and setting."""
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
    """Updates, BLEU, chrF and peak RSS of a ``bench/quality/quality.py`` JSON."""
    data = r(name)
    scores = {run["search"]: run for run in data["runs"]}
    return {
        "updates": data["updates"],
        "bleu": f"{scores['greedy']['bleu']:.2f} / {scores['beam 5']['bleu']:.2f}",
        "beam_bleu": scores["beam 5"]["bleu"],
        "chrf": f"{scores['beam 5']['chrf']:.2f}",
        "rss": gib(data["peak_rss_gib"]),
    }


QUALITY_THREADS = 2  # bench/quality/quality.py's --threads default


def quality_threads(r: Results, name: str) -> str:
    """The CPU threads of a ``bench/quality/quality.py`` run: as its provenance records them, else its command's
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


@table("speed_models")
def speed_models(r: Results) -> str:
    """The three reference experiments' eager float32 step at the reference batch, from the latest run that timed all
    three (``bench/speed/train_speed.py`` trains each as ``experiment=tatoeba_<model>``)."""
    data = r("train_speed_compile_all.json")
    rows = []
    for model in model_families():
        run = run_of(data, model)
        rows.append(
            [
                NAMES[model],
                f"{run['parameters'] / 1e6:.1f} M",
                f"**{num(run['tgt_tokens_per_s'], 0)}**",
                num(1000 * run["tgt_tokens_per_batch"] / run["tgt_tokens_per_s"], 0),
                pct(run["fraction_of_gemm"], 0),
                gib(run["peak_rss_gib"]),
                f"{times(run['vs_joeynmt'])} of {num(run['joeynmt_tgt_tokens_per_s'], 0)}",
            ]
        )
    header = ["model, float32, eager", "parameters", "real target tokens/s", "ms a step",
              "model FLOP rate, share of the GEMM", "peak RSS",
              "against JoeyNMT 2.3's anchor figure (another day)"]  # fmt: skip
    return grid(header, rows)


FAST_RECIPE = "curves/tatoeba_fast_15min_79.json"


@table("speed_fast_recipe")
def speed_fast_recipe(r: Results) -> str:
    """The fast recipe's own training speed, from the 15-minute curve of the recipe as it ships: its updates and real
    target tokens between the first snapshot (start-up and data preparation behind it) and the last."""
    data = r(FAST_RECIPE)
    first, last = data["points"][0], data["points"][-1]
    seconds = 60 * (last["minutes"] - first["minutes"])
    steps, tokens = last["step"] - first["step"], last["tokens"] - first["tokens"]
    span = f"minutes {first['minutes']:.1f} to {last['minutes']:.0f}"
    rows = [
        [f"updates in {data['budget_min']:.0f} minutes from launch (start-up and data preparation included)",
         f"**{num(last['step'], 0)}**"],
        [f"real target tokens a second, {span}", f"**{num(tokens / seconds, 0)}**"],
        [f"ms an update, {span}", num(1000 * seconds / steps, 0)],
        ["real target tokens an update", num(last["tokens"] / last["step"], 0)],
        [f"dev BLEU at {data['budget_min']:.0f} minutes ({data['valid_sample']['sentences']:,} validation pairs)",
         num(last["bleu"])],
    ]  # fmt: skip
    cpu = data["cpu"]
    bf16 = "with AVX512-BF16" if cpu.get("avx512_bf16") or cpu.get("amx_bf16") else "without bfloat16 instructions"
    return grid([f"`experiment={data['experiment']}` ({data['parameters'] / 1e6:.2f} M parameters)", ""], rows) + (
        f"\n\n`trainer.precision={data['settings']['trainer.precision']}`; {cpu['model']} {bf16}, "
        f"{data['threads']} threads; the clock leaves out the snapshots' evaluation."
    )


# bfloat16


@table("speed_bf16_step")
def speed_bf16_step(r: Results) -> str:
    data = r("train_speed_bf16.json")
    rows = []
    for model in model_families():
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
