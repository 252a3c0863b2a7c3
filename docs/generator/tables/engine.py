"""The tables of ``docs/ct2.md`` (the CTranslate2 engine beside the PyTorch path and JoeyNMT: ``engine.json``; the
server on each: ``serve_load_engine*.json``) and ``docs/serving.md`` (the server under load: ``serve_load*.json``)."""

from __future__ import annotations

from tables import Results, grid, num, pct, table, times

MODELS = {"pytorch": "PyTorch", "float32": "float32", "int8": "int8", "int8_float32": "int8_float32"}


def _ms(row: dict) -> str:
    """The p50 / p95 / p99 latencies of a load row, in milliseconds."""
    return " / ".join(num(row[k], 0) for k in ("p50_ms", "p95_ms", "p99_ms"))


def _score(x: float) -> str:
    """A score difference with two significant digits ("0.17", "1e-5"; "0" for none)."""
    return f"{x:.2g}".replace("e-0", "e-")


def _split(sentences: int) -> str:
    return f"The Tatoeba test split: {num(sentences, 0)} sentences."


@table("engine_speed")
def engine_speed(r: Results) -> str:
    """Sentences/s, the speed-up over PyTorch at the same search and threads, and peak RSS of every path."""
    d = r("engine.json")
    rows = [
        [
            row["search"],
            row["threads"],
            MODELS.get(row["model"], row["model"]),
            num(row["sentences_per_s"]),
            times(row["speedup"]),
            num(row["peak_rss_gib"], 2),
        ]
        for row in d["rows"]
    ]
    header = ["search", "threads", "model", "sentences/s", "× PyTorch", "peak RSS (GiB)"]
    return grid(header, rows) + "\n\n" + _split(d["sentences"])


@table("engine_agreement")
def engine_agreement(r: Results) -> str:
    """Test BLEU and agreement with PyTorch of each export, by search (the same at every thread count: the first is
    shown)."""
    d = r("engine.json")
    first = d["rows"][0]["threads"]
    n = d["sentences"]
    rows = []
    for row in d["rows"]:
        if row["threads"] != first:
            continue
        pytorch = row["model"] == "pytorch"
        differ = n - round(row["identical_to_pytorch"] * n)
        rows.append(
            [
                row["search"],
                MODELS.get(row["model"], row["model"]),
                num(row["bleu"], 2),
                "–" if pytorch else pct(row["identical_to_pytorch"], 2),
                "–" if pytorch else f"{num(differ, 0)} ({num(row['differing_lines_scored_higher'], 0)})",
                "–" if pytorch else _score(row["max_score_diff_identical"]),
            ]
        )
    header = [
        "search",
        "model",
        "test BLEU",
        "lines as PyTorch",
        "other lines (engine's scored higher)",
        "largest score difference, same lines",
    ]
    return grid(header, rows) + "\n\n" + _split(n)


@table("engine_size")
def engine_size(r: Results) -> str:
    """Size on disk of the checkpoint and of each export."""
    d = r("engine.json")
    what = {
        "pytorch": "the checkpoint (weights, Adam's state, both sentencepiece models)",
        "float32": "export, float32",
        "int8": "export, int8",
        "int8_float32": "export, int8_float32",
    }
    rows = [[what.get(name, name), num(mib)] for name, mib in d["size_mib"].items()]
    return grid(["model", "size on disk (MiB)"], rows)


@table("engine_threading")
def engine_threading(r: Results) -> str:
    """The engine alone in batches of 64: replicas (``inter_threads``) against threads per replica
    (``intra_threads``)."""
    d = r("engine.json")
    rows = [
        [row["search"], row["inter_threads"], row["intra_threads"], num(row["sentences_per_s"])]
        for row in d["threading"]
    ]
    header = ["search", "replicas (`inter_threads`)", "threads a replica (`intra_threads`)", "sentences/s"]
    return grid(header, rows)


@table("joeynmt_decoding")
def joeynmt_decoding(r: Results) -> str:
    """JoeyNMT 2.3 and our PyTorch path decoding the same weights under JoeyNMT's settings, at each thread count."""
    rows = r("engine.json")["joeynmt"]  # written by bench/serving/engine.py --joeynmt-venv
    body = [
        [
            row["search"],
            row["threads"],
            num(row["joeynmt_sentences_per_s"]),
            num(row["ours_sentences_per_s"]),
            times(row["speedup"], 1),
            pct(row["identical_translations"]),
            f"{num(row['joeynmt_bleu'], 2)} / {num(row['ours_bleu'], 2)}",
        ]
        for row in rows
    ]
    header = [
        "search",
        "threads",
        "JoeyNMT 2.3, sentences/s",
        "ours, sentences/s",
        "ours ÷ JoeyNMT",
        "identical translations",
        "test BLEU, JoeyNMT / ours",
    ]
    counts = sorted({row["sentences"] for row in rows})
    note = _split(counts[0]) if len(counts) == 1 else "Sentences: " + " / ".join(num(c, 0) for c in counts) + "."
    return grid(header, body) + "\n\n" + note


def _load_rows(d: dict, busy: bool = False) -> list[list[object]]:
    out = []
    for row in d["rows"]:
        cells = [
            row["batching"],
            row["clients"],
            num(row["sentences_per_s"]),
            pct(row["share_of_translate_py"], 0),
            _ms(row),
            num(row["mean_batch_lines"]),
            num(row["wrong_answers"], 0),
        ]
        if busy:
            cells.append(pct(row.get("busy_share")))
        out.append(cells)
    return out


def _translate_py(d: dict) -> str:
    t = d["translate_py"]
    speed, n = num(t["sentences_per_s"]), num(t["sentences"], 0)
    return f"`translate.py` on the same split: {speed} sentences/s ({n} sentences)."


LOAD_HEADER = [
    *("batching", "clients", "sentences/s", "share of `translate.py`", "p50 / p95 / p99 (ms)", "lines a batch"),
    "answers unlike `translate.py`",
]


@table("serve_load")
def serve_load(r: Results) -> str:
    """The server with dynamic batching on and off at 1, 8 and 32 clients, against ``translate.py``."""
    d = r("serve_load.json")
    by = {(row["batching"], row["clients"]): row for row in d["rows"]}
    gains = [
        [c, times(on["sentences_per_s"] / off["sentences_per_s"], 1), times(off["p99_ms"] / on["p99_ms"], 1)]
        for (b, c), on in by.items()
        if b == "on" and (off := by.get(("off", c)))
    ]
    text = grid(LOAD_HEADER, _load_rows(d)) + "\n\n" + _translate_py(d)
    if gains:
        text += "\n\n" + grid(["clients", "batching on ÷ off, sentences/s", "off ÷ on, p99 latency"], gains)
    return text


@table("serve_load_busy")
def serve_load_busy(r: Results) -> str:
    """A second run of the 32-client rows, with the share of the time the worker thread was translating."""
    d = r("serve_load_32.json")
    return grid([*LOAD_HEADER, "worker busy"], _load_rows(d, busy=True)) + "\n\n" + _translate_py(d)


@table("serve_load_engine")
def serve_load_engine(r: Results) -> str:
    """The server on the PyTorch checkpoint and on its int8 export, batching on, at each client count."""
    pt, ct = r("serve_load_engine_pytorch.json"), r("serve_load_engine.json")
    engine = {row["clients"]: row for row in ct["rows"] if row["batching"] == "on"}
    rows = []
    for a in pt["rows"]:
        if a["batching"] != "on" or (b := engine.get(a["clients"])) is None:
            continue
        rows.append(
            [
                a["clients"],
                num(a["sentences_per_s"]),
                _ms(a),
                pct(a.get("busy_share")),
                num(b["sentences_per_s"]),
                _ms(b),
                pct(b.get("busy_share")),
                times(b["sentences_per_s"] / a["sentences_per_s"], 1),
                times(a["p99_ms"] / b["p99_ms"], 1),
                f"{num(a['wrong_answers'], 0)} / {num(b['wrong_answers'], 0)}",
            ]
        )
    header = [
        "clients",
        "PyTorch: sentences/s",
        "p50 / p95 / p99 (ms)",
        "worker busy",
        "int8 engine: sentences/s",
        "p50 / p95 / p99 (ms)",
        "worker busy",
        "engine ÷ PyTorch, sentences/s",
        "PyTorch ÷ engine, p99",
        "answers unlike `translate.py`, PyTorch / engine",
    ]
    solo = (
        f"`translate.py` on the same split: {num(pt['translate_py']['sentences_per_s'])} sentences/s on PyTorch, "
        f"{num(ct['translate_py']['sentences_per_s'])} on the engine."
    )
    return grid(header, rows) + "\n\n" + solo
