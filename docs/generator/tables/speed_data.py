"""The tables on data of ``docs/results/speed.md`` and of the lab notebook's entries on it (``docs/lab/``): corpora
of WMT size (``bench/speed/data_scale.py``), the encode pass (``bench/speed/encode_speed.py``), the batch plan and the
data pipeline on Tatoeba (``bench/speed/data_stats.py``, ``bench/speed/id_check.py``)."""

from __future__ import annotations

from tables import Results, grid, num, table, times
from tables.speed import NAMES, gib

# Corpora of WMT size


def pairs_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n:,}"


def size(mb: float) -> str:
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb:.0f} MB"


SCALE_HEADER = ["pairs", "TSV", "prepare", "pairs/s", "peak memory (tree PSS / largest RSS)", "on disk",
                "warm start: data / to first step", "training RSS after 50 steps"]  # fmt: skip


def scale_row(row: dict) -> list[str]:
    return [
        pairs_label(row["pairs"]),
        size(row["tsv_mb"]),
        f"{row['prepare_s']:.1f} s",
        f"{row['pairs_per_s'] / 1000:.1f}k",
        f"{row['prepare_peak_pss_gib']:.2f} / {row['prepare_peak_rss_gib']:.2f} GiB",
        size(row["prepared_mb"]),
        f"{row['data_start_s']:.2f} s / {row['start_to_first_step_s']:.1f} s",
        gib(row["train_rss_gib"]),
    ]


def baseline_row(row: dict) -> list[str]:
    """The same corpus prepared by the code before preparation streamed (``--baseline``)."""
    return [
        f"{pairs_label(row['pairs'])}, code before streaming",
        size(row["tsv_mb"]),
        f"{row['baseline_prepare_s']:.1f} s",
        f"{row['baseline_pairs_per_s'] / 1000:.1f}k",
        f"{row['baseline_peak_pss_gib']:.2f} / {row['baseline_peak_rss_gib']:.2f} GiB",
        "",
        "",
        "",
    ]


@table("speed_data_scale")
def speed_data_scale(r: Results) -> str:
    """Each corpus size as the code prepares it today."""
    return grid(SCALE_HEADER, [scale_row(row) for row in r("data_scale.json")["rows"]])


@table("speed_data_scale_streaming")
def speed_data_scale_streaming(r: Results) -> str:
    """The same, with the code before streaming beside the sizes it prepared."""
    rows = []
    for row in r("data_scale.json")["rows"]:
        rows.append(scale_row(row))
        if "baseline_prepare_s" in row:
            rows.append(baseline_row(row))
    return grid(SCALE_HEADER, rows)


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


# The batch plan with one very long pair (bench/speed/plan_memory.py)


@table("speed_plan_memory")
def speed_plan_memory(r: Results) -> str:
    """The plan's peak memory and time, a million short pairs without and with one very long one."""
    d = r("plan_memory.json")
    rows = [[row["corpus"], f"{row['batches']:,}", f"{row['peak_mib']:.1f} MiB", f"{row['bytes_per_pair']:.1f}",
             f"{row['seconds']:.2f} s"] for row in d["rows"]]  # fmt: skip
    rows.append([f"a table of every length triple up to {d['longest']:,} (the plan before)", "",
                 f"{d['dense_table_tib']:,.2f} TiB", "", ""])  # fmt: skip
    return grid(["corpus", "batches", "peak memory", "bytes a pair", "time"], rows)
