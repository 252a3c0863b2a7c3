"""The lead table of ``docs/results/alignment.md`` and its epochs: each path to word links on the 200 Hansards
development lines (``bench/alignment/aligner_paths.py``); the paths before one tokenisation (the lab notebook's
``docs/lab/2026-11-25-alignment-paths-before-one-tokenisation.md``); with the helpers the other alignment tables share
(``alignment_training.py``: trained attention and eflomal; ``alignment_adapting.py``: adapting to the lines). AER
figures are percentages of the JSON's shares."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from tables import Results, grid, num, pct, table

LENGTHS = ("1-10", "11-20", "21-30")
RULES = ("forward", "reverse", "intersection", "union", "grow-diag-final-and")
ALIGN = "python align.py --input dev.fr --align-to dev.en --gold dev.en-fr.gold"  # what every alignment command shares
ADAPT = "--adapt-epochs 40 --adapt-links eflomal --adapt-corpus train.tsv"


def by_length(aer: dict) -> str:
    """The AER of lines of 1–10, 11–20 and 21–30 French words, in percent: ``"7.5 / 12.8 / 14.7"``."""
    return " / ".join(f"{100 * aer['by_length'][k]:.1f}" for k in LENGTHS)


def with_lengths(aer: dict) -> str:
    """``"13.2% (7.5 / 12.8 / 14.7)"``: the whole set's AER, then by length."""
    return f"{pct(aer['aer'])} ({by_length(aer)})"


def spread(values: Iterable[float]) -> str:
    """Mean (min–max) of shares, as percentages: ``"12.4% (12.3–12.5)"``."""
    values = list(values)
    if len(values) == 1:
        return pct(values[0])
    return f"{pct(statistics.mean(values))} ({100 * min(values):.1f}–{100 * max(values):.1f})"


def summary_spread(s: dict) -> str:
    """A ``bench/alignment/alignment_draws.py`` spread (mean, min, max of shares) as ``"12.9% (12.4–13.7)"``."""
    return f"{pct(s['mean'])} ({100 * s['min']:.1f}–{100 * s['max']:.1f})"


def cross_validated(adapted: dict) -> str:
    """An ``aligner_paths.json`` adaptation's cross-validated E (``Gold.cross_validated``): ``"9.8% (9.7–9.9)"``."""
    return summary_spread({k: adapted["cross_validated"][f"aer_{k}"] for k in ("mean", "min", "max")})


def points(s: dict) -> str:
    """A difference of shares in AER points, mean (min to max): ``"−0.8 (−1.1 to −0.2)"``."""
    f = lambda x: "0.0" if round(100 * x, 1) == 0 else f"{100 * x:+.1f}".replace("-", "−")  # noqa: E731
    return f"{f(s['mean'])} ({f(s['min'])} to {f(s['max'])})"


def eflomal_beside(dev: dict) -> str:
    """eflomal's AER in the same run of the benchmark: one direction (forward) / intersection."""
    aer = dev["eflomal"]["aer"]
    return f"{pct(aer['forward']['aer'])} / {pct(aer['intersection']['aer'])}"


def choice(c: dict) -> str:
    """An attention choice: ``"layer 1, head 0, output, reverse"`` (``full`` where it reads the full-context pass)."""
    head = "head mean" if c["head"] is None else f"head {c['head']}"
    full = ", full-context pass" if c.get("context") == "full" else ""
    return f"layer {c['layer']}, {head}, {c['readout']}, {c['links']}{full}"


def dev(r: Results, name: str) -> dict:
    """The Hansards part of a ``bench/alignment/alignment.py`` result."""
    return r(name)["hansards_dev"]


def percent_spread(s: dict) -> str:
    """A ``bench/alignment/eflomal_draws.py`` spread (already in percent)."""
    return f"{s['mean']:.1f}% ({s['min']:.1f}–{s['max']:.1f})"


def voted_pairs(r: Results) -> list[dict]:
    """The Luong pair adapted 40 epochs, guided by seven draws of eflomal voted: one entry a run."""
    return [dev(r, f"alignment_voted/luong_pair_draws7_run{k}.json") for k in (1, 2, 3)]


# --- the lead table -------------------------------------------------------------------------------------------------


def eflomal_paths(d: dict) -> list[tuple]:
    """The lead table's rows of eflomal alone: by hand, through the project one draw and voted, whitespace words."""
    hand, project = d["by_hand"], d["project"]
    runs = lambda rows: " / ".join(spread(x["aer"][k] for x in rows) for k in ("forward", "intersection"))  # noqa: E731
    seconds = lambda rows: num(statistics.median(x["seconds"] for x in rows))  # noqa: E731
    voted = project["voted"]
    return [
        (f"eflomal's own program, the Tatoeba pairs rewritten by hand into the lines' tokenisation "
         f"({len(hand['runs'])} runs)", runs(hand["runs"]), "", f"{seconds(hand['runs'])} a run",
         "`eflomal-align -s SRC -t TGT -f FWD -r REV` on files written by hand"),
        (f"eflomal through the project, one draw ({len(project['draws'])} draws)", runs(project["draws"]), "",
         f"{seconds(project['draws'])} a draw",
         '`pair_links("eflomal", src, tgt, "train.tsv", replace(GUIDE, draws=1))`'),
        (f"eflomal through the project, {voted['draws']} draws voted (the default guide)", one_way(voted["aer"]), "",
         f"{voted['draws']} × {seconds(project['draws'])}", '`pair_links("eflomal", src, tgt, "train.tsv")`'),
        ("the same, one draw, every side read as its whitespace words (the earlier path)",
         one_way(project["whitespace"]["aer"]), "", num(project["whitespace"]["seconds"]),
         "`... --adapt-lines whitespace`"),
    ]  # fmt: skip


def one_way(aer: dict) -> str:
    """eflomal's AER one direction (forward) / intersection."""
    return f"{pct(aer['forward'])} / {pct(aer['intersection'])}"


@table("alignment_paths")
def alignment_paths(r: Results) -> str:
    d = r("aligner_paths.json")
    single, pair, t = d["single"], d["pair"], d["translate"]
    epochs = str(t["epochs"])
    adapt = f"--adapt-epochs {epochs} --adapt-links eflomal --adapt-corpus train.tsv"
    both = "--ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt"
    adapted = lambda m: m["epochs"][epochs]  # noqa: E731
    rows = [
        *eflomal_paths(d),
        (f"one model (the fr→en Luong) adapted {epochs} epochs, guided by the voted intersection",
         f"**{pct(adapted(single)['aer'])}**", cross_validated(single),
         f"{num(adapted(single)['seconds_adapting'])} adapting", f"`{ALIGN} --ckpt FR_EN.ckpt {adapt}`"),
        (f"the pair (fr→en, en→fr) adapted {epochs} epochs the same way, symmetrised",
         f"**{pct(adapted(pair)['aer'])}**", cross_validated(pair),
         f"{num(adapted(pair)['seconds_adapting'])} adapting, one model after the other", f"`{ALIGN} {both} {adapt}`"),
        ("the same command end to end (loading, eflomal's seven draws, the two models adapting at once, aligning)",
         pct(t["aer"]), "", f"{num(t['seconds'])}: {num(t['ratio'], 2)} × eflomal alone ({num(t['eflomal_seconds'])}, "
         "same run)", "as above"),
        ("the attention as training recorded it (TensorBoard, the viewer, `--alignments`): the fr→en model",
         pct(single["recorded"]["aer"]), "", "–", f"`{ALIGN} --ckpt FR_EN.ckpt`"),
        (f"the pair as recorded, symmetrised ({pair['recorded']['symmetrisation']})", pct(pair["recorded"]["aer"]), "",
         "–", f"`{ALIGN} {both}`"),
    ]  # fmt: skip
    head = ["path", "AER (eflomal: one direction / intersection)", "epochs chosen on half the gold, scored on the rest",
            "seconds (2 cores)", "command"]  # fmt: skip
    return grid(head, rows)


@table("alignment_paths_epochs")
def alignment_paths_epochs(r: Results) -> str:
    d = r("aligner_paths.json")
    guide = d["guide"]
    rows = [("eflomal's voted intersection (the guide)", with_lengths(guide), "", "", "")]
    for name, m in (("one model (fr→en)", d["single"]), ("the pair", d["pair"])):  # as recorded: the lead table's
        for e, x in m["epochs"].items():
            how = x["reading"] + (f", {x['symmetrisation']}" if x["symmetrisation"] else "")
            rows.append((f"{name}, adapted {e} epochs", with_lengths(x), how, num(x["seconds_adapting"]), ""))
        cv = m["cross_validated"]
        rows.append((f"{name}, E chosen on half the lines' gold, scored on the other half", cross_validated(m), "", "",
                     f"{len(cv['halvings'])} halvings"))  # fmt: skip
    head = ["Hansards dev", "AER (1–10 / 11–20 / 21–30 words)", "read as (chosen by agreement with the guide)",
            "seconds adapting (one model after the other, 2 threads)", ""]  # fmt: skip
    return grid(head, rows)


@table("alignment_paths_before")
def alignment_paths_before(r: Results) -> str:
    draws = r("eflomal_draws.json")
    vote = {row["draws voted"]: row for row in draws["aer_by_draws_voted"]}
    per_draw = draws["seconds_per_draw"]["median"]
    n_draws = len(draws["seconds_per_draw"]["all"])  # the draws eflomal made; each row votes random subsets of them
    subsets = lambda k: f"{vote[k]['intersection']['n']} subsets of {k} of the {n_draws} draws"  # noqa: E731
    model = r("alignment_voted/summary.json")["across_runs"]["40 epochs"]
    through = dev(r, "alignment_voted/long_guided_translate_draws7.json")["models"][0]["adapted"]["40"]
    pairs = voted_pairs(r)
    pair_aer = [p["pairs"][0]["adapted"]["40"]["translate.py"]["aer"] for p in pairs]
    pair_efl = statistics.mean(p["eflomal"]["seconds"] for p in pairs)
    pair_adapt = statistics.mean(p["pairs"][0]["adapted"]["40"]["intersection"]["seconds_adapting"] for p in pairs)
    recorded = dev(r, "alignment_hansards_long_guided.json")["models"][0]["recorded_choice"]
    pair = dev(r, "alignment_voted/luong_pair_draws1.json")["pairs"][0]["symmetrised"]["grow-diag-final-and"]
    both = "--ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt"
    rows = [
        ("eflomal alone, one draw (intersection of its two directions)", percent_spread(vote[1]["intersection"]),
         subsets(1), f"{num(per_draw)} (eflomal's training included)",
         '`pair_links("eflomal", src, tgt, "train.tsv", draws=1)` ([how](../alignment.md#eflomal-alone))'),
        ("eflomal alone, seven draws voted (intersection)", percent_spread(vote[7]["intersection"]), subsets(7),
         f"7 × {num(per_draw)}", '`pair_links("eflomal", src, tgt, "train.tsv")` (seven draws by default)'),
        ("one model adapted to the lines, guided by eflomal (seven draws voted): the long-run guided 3+3 "
         "Transformer, 40 epochs", summary_spread(model), model["runs"],
         f"{num(through['seconds'])} (eflomal, adapting and aligning; one run through `align.py`: "
         f"{pct(through['aer'])})", f"`{ALIGN} --ckpt M.ckpt {ADAPT}`"),
        ("two models (fr→en, en→fr) adapted and guided the same way, symmetrised: a guided Luong pair, 40 epochs",
         spread(pair_aer), len(pair_aer), f"{num(pair_efl)} eflomal + {num(pair_adapt)} adapting both",
         f"`{ALIGN} {both} {ADAPT}`"),
        ("the attention as training recorded it (TensorBoard, the viewer, `--alignments`): the same Transformer",
         pct(recorded["aer"]), 1, "–", f"`{ALIGN} --ckpt M.ckpt`"),
        ("the same Luong pair as recorded, symmetrised (grow-diag-final-and), not adapted", pct(pair["aer"]), 1, "–",
         f"`{ALIGN} {both}`"),
    ]  # fmt: skip
    head = ["path", "AER, mean (min–max)", f"runs (eflomal: random subsets of the same {n_draws} draws, overlapping)",
            "seconds", "command"]  # fmt: skip
    return grid(head, rows)
