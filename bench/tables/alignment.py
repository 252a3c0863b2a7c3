"""The tables of ``docs/alignment.md`` (its lead table) and ``docs/results/alignment.md``: word alignment by eflomal and
by the models' attention, on the built-in corpus's test split and on the 200 Hansards development lines
(``bench/alignment.py``, ``bench/alignment_draws.py``, ``bench/eflomal_draws.py``, ``bench/alignment_orthography.py``),
and what guided training costs in BLEU (``bench/guided_bleu.py``, ``bench/converged.py``). AER figures are percentages
of the JSON's shares."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from . import Results, grid, num, pct, table

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
    """A ``bench/alignment_draws.py`` spread (mean, min, max of shares) as ``"12.9% (12.4–13.7)"``."""
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
    """The Hansards part of a ``bench/alignment.py`` result."""
    return r(name)["hansards_dev"]


def percent_spread(s: dict) -> str:
    """A ``bench/eflomal_draws.py`` spread (already in percent)."""
    return f"{s['mean']:.1f}% ({s['min']:.1f}–{s['max']:.1f})"


def voted_pairs(r: Results) -> list[dict]:
    """The Luong pair adapted 40 epochs, guided by seven draws of eflomal voted: one entry a run."""
    return [dev(r, f"alignment_voted/luong_pair_draws7_run{k}.json") for k in (1, 2, 3)]


# --- the lead table -------------------------------------------------------------------------------------------------


@table("alignment_paths")
def alignment_paths(r: Results) -> str:
    d = r("aligner_paths.json")
    hand, project, t = d["by_hand"], d["project"], d["translate"]
    one_way = lambda aer: f"{pct(aer['forward'])} / {pct(aer['intersection'])}"  # noqa: E731
    runs = lambda rows, k: spread(x["aer"][k] for x in rows)  # noqa: E731
    seconds = lambda rows: num(statistics.median(x["seconds"] for x in rows))  # noqa: E731
    epochs = str(t["epochs"])
    adapt = f"--adapt-epochs {epochs} --adapt-links eflomal --adapt-corpus train.tsv"
    single, pair = d["single"], d["pair"]
    rows = [
        (
            f"eflomal's own program, the Tatoeba pairs rewritten by hand into the lines' tokenisation "
            f"({len(hand['runs'])} runs)",
            f"{runs(hand['runs'], 'forward')} / {runs(hand['runs'], 'intersection')}",
            "",
            f"{seconds(hand['runs'])} a run",
            "`eflomal-align -s SRC -t TGT -f FWD -r REV` on files written by hand",
        ),
        (
            f"eflomal through the project, one draw ({len(project['draws'])} draws)",
            f"{runs(project['draws'], 'forward')} / {runs(project['draws'], 'intersection')}",
            "",
            f"{seconds(project['draws'])} a draw",
            '`pair_links("eflomal", src, tgt, "train.tsv", replace(GUIDE, draws=1))`',
        ),
        (
            f"eflomal through the project, {project['voted']['draws']} draws voted (the default guide)",
            one_way(project["voted"]["aer"]),
            "",
            f"{project['voted']['draws']} × {seconds(project['draws'])}",
            '`pair_links("eflomal", src, tgt, "train.tsv")`',
        ),
        (
            "the same, one draw, every side read as its whitespace words (the earlier path)",
            one_way(project["whitespace"]["aer"]),
            "",
            num(project["whitespace"]["seconds"]),
            "`... --adapt-lines whitespace`",
        ),
        (
            f"one model (the fr→en Luong) adapted {epochs} epochs, guided by the voted intersection",
            f"**{pct(single['epochs'][epochs]['aer'])}**",
            cross_validated(single),
            f"{num(single['epochs'][epochs]['seconds_adapting'])} adapting",
            f"`{ALIGN} --ckpt FR_EN.ckpt {adapt}`",
        ),
        (
            f"the pair (fr→en, en→fr) adapted {epochs} epochs the same way, symmetrised",
            f"**{pct(pair['epochs'][epochs]['aer'])}**",
            cross_validated(pair),
            f"{num(pair['epochs'][epochs]['seconds_adapting'])} adapting, one model after the other",
            f"`{ALIGN} --ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt {adapt}`",
        ),
        (
            "the same command end to end (loading, eflomal's seven draws, the two models adapting at once, aligning)",
            pct(t["aer"]),
            "",
            f"{num(t['seconds'])}: {num(t['ratio'], 2)} × eflomal alone ({num(t['eflomal_seconds'])}, same run)",
            "as above",
        ),
        (
            "the attention as training recorded it (TensorBoard, the viewer, `--alignments`): the fr→en model",
            pct(single["recorded"]["aer"]),
            "",
            "–",
            f"`{ALIGN} --ckpt FR_EN.ckpt`",
        ),
        (
            f"the pair as recorded, symmetrised ({pair['recorded']['symmetrisation']})",
            pct(pair["recorded"]["aer"]),
            "",
            "–",
            f"`{ALIGN} --ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt`",
        ),
    ]
    head = [
        "path",
        "AER (eflomal: one direction / intersection)",
        "epochs chosen on half the gold, scored on the rest",
        "seconds (2 cores)",
        "command",
    ]
    return grid(head, rows)


@table("alignment_paths_epochs")
def alignment_paths_epochs(r: Results) -> str:
    d = r("aligner_paths.json")
    guide = d["guide"]
    rows = [("eflomal's voted intersection (the guide)", with_lengths(guide), "", "", "")]
    for name, m in (("one model (fr→en)", d["single"]), ("the pair", d["pair"])):
        rows.append((f"{name}, as recorded", pct(m["recorded"]["aer"]), "", "", ""))
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
    rows = [
        (
            "eflomal alone, one draw (intersection of its two directions)",
            percent_spread(vote[1]["intersection"]),
            subsets(1),
            f"{num(per_draw)} (eflomal's training included)",
            '`pair_links("eflomal", src, tgt, "train.tsv", draws=1)` ([how](../alignment.md#eflomal-alone))',
        ),
        (
            "eflomal alone, seven draws voted (intersection)",
            percent_spread(vote[7]["intersection"]),
            subsets(7),
            f"7 × {num(per_draw)}",
            '`pair_links("eflomal", src, tgt, "train.tsv")` (seven draws by default)',
        ),
        (
            "one model adapted to the lines, guided by eflomal (seven draws voted): the long-run guided 3+3 "
            "Transformer, 40 epochs",
            summary_spread(model),
            model["runs"],
            f"{num(through['seconds'])} (eflomal, adapting and aligning; one run through `translate.py`: "
            f"{pct(through['aer'])})",
            f"`{ALIGN} --ckpt M.ckpt {ADAPT}`",
        ),
        (
            "two models (fr→en, en→fr) adapted and guided the same way, symmetrised: a guided Luong pair, 40 epochs",
            spread(pair_aer),
            len(pair_aer),
            f"{num(pair_efl)} eflomal + {num(pair_adapt)} adapting both",
            f"`{ALIGN} --ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt {ADAPT}`",
        ),
        (
            "the attention as training recorded it (TensorBoard, the viewer, `--alignments`): the same Transformer",
            pct(recorded["aer"]),
            1,
            "–",
            f"`{ALIGN} --ckpt M.ckpt`",
        ),
        (
            "the same Luong pair as recorded, symmetrised (grow-diag-final-and), not adapted",
            pct(pair["aer"]),
            1,
            "–",
            f"`{ALIGN} --ckpt FR_EN.ckpt --reverse-ckpt EN_FR.ckpt`",
        ),
    ]
    head = [
        "path",
        "AER, mean (min–max)",
        f"runs (eflomal: random subsets of the same {n_draws} draws, overlapping)",
        "seconds",
        "command",
    ]
    return grid(head, rows)


# --- the built-in corpus --------------------------------------------------------------------------------------------


@table("alignment_builtin")
def alignment_builtin(r: Results) -> str:
    plain = {x["model"]: x for x in r("alignment.json")["runs"]}
    guided = {x["model"]: x for x in r("alignment_guided.json")["runs"]}
    rows = [
        (f"{m.capitalize()} attention", pct(plain[m]["aer_of_exported_links"]),
         f"**{pct(guided[m]['aer_of_exported_links'])}**")
        for m in plain
    ]  # fmt: skip
    efl = r("alignment_eflomal.json")["built_in"]["eflomal"]["aer"]
    rows += [(f"eflomal, {k}", pct(efl[k]["aer"]), "") for k in RULES]
    return grid(["aligner", "test AER, unguided", "guided on the gold links (`loss.align_weight=0.1`)"], rows)


# --- guided training's BLEU cost ------------------------------------------------------------------------------------


@table("guided_bleu")
def guided_bleu(r: Results) -> str:
    d = r("guided_bleu.json")
    bleu = lambda s: f"{num(s['mean'], 2)} ({num(s['min'], 2)}–{num(s['max'], 2)})"  # noqa: E731
    rows = [
        (
            s["model"].capitalize(),
            "eflomal" if s["guided"] else "none",
            bleu(s["greedy"]),
            bleu(s["beam 5"]),
            f"{s['guided_minus_plain_beam5']:+.2f}".replace("-", "−") if s["guided"] else "",
        )
        for s in d["summary"]
    ]
    head = ["model", "guidance", "test BLEU greedy, mean (min–max)", "beam 5", "guided minus unguided, beam 5"]
    runs = d["runs"]
    seeds = ", ".join(str(s) for s in d["seeds"])
    reached = sorted({x["updates"] for x in runs} - {d["updates"]})
    short = f" (some stopped at {', '.join(num(u, 0) for u in reached)})" if reached else ""
    note = (
        f"Seeds {seeds}; {num(d['updates'], 0)} updates a run{short}; guide `{' '.join(d.get('guide', []))}`; "
        f"{len(runs)} runs, {d.get('threads_per_run', 1)} thread each."
    )
    return grid(head, rows) + "\n\n" + note


@table("guided_bleu_long_run")
def guided_bleu_long_run(r: Results) -> str:
    runs = {"none": r("converged_transformer.json")["rows"], "eflomal": r("converged_transformer_guided.json")["rows"]}
    rows = []
    for weights in ("plain", "ema"):
        for guidance, found in runs.items():
            by = {x["search"]: x for x in found if x["weights"] == weights}
            g, b = by["greedy"], by["beam 5"]
            rows.append((guidance, weights, num(g["updates"], 0), num(g["bleu"], 2), num(b["bleu"], 2)))
    return grid(["guidance", "weights", "updates", "test BLEU greedy", "beam 5"], rows)


# --- eflomal on the Hansards lines ----------------------------------------------------------------------------------


@table("alignment_eflomal_symmetrisation")
def alignment_eflomal_symmetrisation(r: Results) -> str:
    d = r("alignment_eflomal.json")
    real, built = d["hansards_dev"]["eflomal"]["aer"], d["built_in"]["eflomal"]["aer"]
    best_real = min(RULES, key=lambda k: real[k]["aer"])
    best_built = min(RULES, key=lambda k: built[k]["aer"])
    bold = lambda x, best: f"**{x}**" if best else x  # noqa: E731
    rows = [
        (
            k,
            bold(pct(real[k]["aer"]), k == best_real),
            *(f"{100 * real[k]['by_length'][n]:.1f}%" for n in LENGTHS),
            bold(pct(built[k]["aer"]), k == best_built),
        )
        for k in RULES
    ]
    head = ["links", "Hansards dev", "1–10 French words", "11–20", "21–30", "built-in test split"]
    return grid(head, rows)


@table("eflomal_draws")
def eflomal_draws(r: Results) -> str:
    d = r("eflomal_draws.json")
    rows = [(x["draws voted"], *(percent_spread(x[k]) for k in RULES)) for x in d["aer_by_draws_voted"]]
    note = (
        f"Each draw: eflomal on {num(d['training_pairs'], 0)} Tatoeba training pairs and the {d['lines']} lines, "
        f"{num(d['seconds_per_draw']['median'])} s (median of {len(d['seconds_per_draw']['all'])} draws); each K "
        "voted over random subsets of K draws (mean, min–max)."
    )
    return grid(["draws voted", *RULES], rows) + "\n\n" + note


# --- the attention on the Hansards lines, as recorded ---------------------------------------------------------------


@table("alignment_recorded")
def alignment_recorded(r: Results) -> str:
    main = dev(r, "alignment_hansards.json")
    share = dev(r, "alignment_hansards_share.json")
    pair = dev(r, "alignment_hansards_pair.json")
    models = [
        ("no guidance", main["models"][0], main),
        ("guided by eflomal (`loss.align_weight=0.05`, layer −2, head 0)", main["models"][1], main),
        ("guided, joined pairs (`data.join.max_pairs=4`)", main["models"][2], main),
        ("guided, a quarter of joined rows kept (`data.join.share=0.25`)", share["models"][0], share),
        ("the same, full-context pass (`loss.align_full_context=true`)", pair["models"][0], pair),
    ]
    rows = []
    for label, m, run in models:
        val = m.get("validation")
        rows.append(
            (
                label,
                pct(val["aer"]) if val else "–",
                choice(m["chosen"]),
                with_lengths(m["recorded_choice"]),
                pct(m["best_of_each_links"]["forward"]),
                eflomal_beside(run),
            )
        )
    p = pair["pairs"][0]["symmetrised"]["grow-diag-final-and"]
    rows.append(
        (
            "fr→en (a quarter of joined rows) and en→fr trained the same way, grow-diag-final-and",
            "",
            "each its own",
            with_lengths(p),
            "",
            eflomal_beside(pair),
        )
    )
    head = [
        "3+3 Transformer, 15-minute setting",
        "validation AER against eflomal",
        "recorded choice",
        "Hansards AER (1–10 / 11–20 / 21–30 words)",
        "best with forward links only",
        "eflomal, same run (forward / intersection)",
    ]
    return grid(head, rows)


@table("alignment_pair")
def alignment_pair(r: Results) -> str:
    d = dev(r, "alignment_hansards_pair.json")
    p = d["pairs"][0]
    rows = [("fr→en alone", with_lengths(p["alone"]["fr_en"])), ("en→fr alone", with_lengths(p["alone"]["en_fr"]))]
    rows += [
        (f"both, {k}", with_lengths(p["symmetrised"][k])) for k in ("intersection", "union", "grow-diag-final-and")
    ]
    efl = d["eflomal"]["aer"]
    rows.append(("eflomal, same run: forward", with_lengths(efl["forward"])))
    rows.append(("eflomal, same run: intersection", with_lengths(efl["intersection"])))
    return grid(["Hansards dev, 200 lines", "AER (1–10 / 11–20 / 21–30 words)"], rows)


@table("alignment_guided_training")
def alignment_guided_training(r: Results) -> str:
    plain, guided = dev(r, "alignment_hansards_rnn_plain.json"), dev(r, "alignment_hansards_rnn_guided.json")
    main, long, long60 = (dev(r, f"alignment_hansards{x}.json") for x in ("", "_long_guided", "_long_guided_60"))
    adapted_runs = [m["adapted"] for run in (plain, guided, long, long60) for m in run["models"]]
    weights = {a.get("adaptation", {}).get("align_weight") for a in adapted_runs}
    weight = f" (weight {weights.pop():g})" if len(weights) == 1 and None not in weights else ""
    rows = []
    for k, name in enumerate(("Bahdanau", "Luong")):
        for label, run in (("none", plain), ("eflomal", guided)):
            m = run["models"][k]
            rows.append(
                (
                    name,
                    label,
                    pct(m["validation"]["aer"]),
                    with_lengths(m["recorded_choice"]),
                    f"{with_lengths(m['adapted']['40'])}, 40 epochs",
                    eflomal_beside(run),
                )
            )
    for label, m in (("none", main["models"][0]), ("eflomal", main["models"][1])):
        rows.append(("Transformer 3+3", label, "–", with_lengths(m["recorded_choice"]), "–", eflomal_beside(main)))
    for run, epochs in ((long, "40"), (long60, "60")):
        m = run["models"][0]
        rows.append(
            (
                f"Transformer 3+3, long run ({num(m['validation']['step'], 0)} updates)",
                "eflomal",
                pct(m["validation"]["aer"]),
                with_lengths(m["recorded_choice"]),
                f"{with_lengths(m['adapted'][epochs])}, {epochs} epochs",
                eflomal_beside(run),
            )
        )
    head = [
        "model",
        "guided training",
        "validation AER against eflomal",
        "Hansards AER as recorded (1–10 / 11–20 / 21–30)",
        f"adapted, guided by eflomal's intersection{weight}",
        "eflomal, same run (forward / intersection)",
    ]
    return grid(head, rows)


# --- adapting to the lines ------------------------------------------------------------------------------------------


@table("alignment_adapted")
def alignment_adapted(r: Results) -> str:
    one = dev(r, "alignment_hansards_adapt.json")
    m = one["models"][0]
    both = dev(r, "alignment_hansards_pair_adapt.json")
    p = both["pairs"][0]
    rows = [("fr→en, not adapted", with_lengths(m["recorded_choice"]), "")]
    rows += [(f"fr→en, adapted {e} epochs", with_lengths(m["adapted"][e]), num(m["adapted"][e]["seconds"])) for e in
             ("10", "20", "30")]  # fmt: skip
    rows.append(("both, not adapted, grow-diag-final-and", with_lengths(p["symmetrised"]["grow-diag-final-and"]), ""))
    rows.append(("en→fr alone, adapted 20 epochs (its links turned round)", with_lengths(p["adapted"]["20"]["reverse"]),
                 ""))  # fmt: skip
    for k in ("grow-diag-final-and", "intersection"):
        rows.append((f"both adapted 20 epochs, {k}", with_lengths(p["adapted"]["20"][k]), ""))
    rows.append(("eflomal, first run: forward / intersection", eflomal_beside(one), num(one["eflomal"]["seconds"])))
    rows.append(("eflomal, second run: forward / intersection", eflomal_beside(both), num(both["eflomal"]["seconds"])))
    head = ["Hansards dev; fr→en guided, a quarter of joined rows; no guide while adapting", "AER (by length)",
            "seconds (adapting and aligning, one thread beside a training run)"]  # fmt: skip
    return grid(head, rows)


GUIDES = (  # a weaker Transformer pair (trainer.max_steps=800): how the guide was chosen
    ("alignment_hansards_pair_adapt_base800.json", "none"),
    ("alignment_hansards_pair_guided.json", "eflomal, grow-diag-final-and"),
    ("alignment_hansards_pair_guided_w5.json", "eflomal, grow-diag-final-and"),
    ("alignment_hansards_pair_guided_intersection.json", "eflomal, intersection"),
    ("alignment_hansards_pair_guided_intersection_40.json", "eflomal, intersection"),
    ("alignment_hansards_pair_guided_translate.json", "`--adapt-links eflomal` (its own run)"),
    ("alignment_hansards_pair_guided_translate_40.json", "`--adapt-links eflomal` (its own run)"),
)


@table("alignment_guide_choice")
def alignment_guide_choice(r: Results) -> str:
    first = dev(r, GUIDES[0][0])["pairs"][0]["symmetrised"]["grow-diag-final-and"]
    rows = [("not adapted", "", "", f"grow-diag-final-and {with_lengths(first)}", "", "")]
    for name, guide in GUIDES:
        d = dev(r, name)
        p = d["pairs"][0]
        (epochs, found), weight = next(iter(p["adapted"].items())), p["adaptation"]["align_weight"]
        best = min(RULES, key=lambda k: found[k]["aer"])
        rows.append(
            (
                guide,
                "–" if weight is None else num(weight, 0),
                epochs,
                f"{best} {with_lengths(found[best])}",
                num(found[best]["seconds_adapting"]),
                eflomal_beside(d),
            )
        )
    head = [
        "a weaker Transformer pair: the guide while adapting",
        "weight",
        "epochs",
        "best rule, AER (by length), models read as recorded",
        "seconds adapting both",
        "eflomal, same run (forward / intersection)",
    ]
    return grid(head, rows)


CLOSEST = (  # read as the guide agrees: (file, models, epochs)
    ("alignment_hansards_pair_guided_closest.json", "a weaker Transformer pair", "20"),
    ("alignment_hansards_pair_guided_closest.json", "a weaker Transformer pair", "40"),
    ("alignment_hansards_pair_guided_closest_translate.json", "the same, `--adapt-links eflomal` (its own run)", "40"),
    ("alignment_hansards_luong_pair_guided.json", "a guided Luong pair", "40"),
)


@table("alignment_closest")
def alignment_closest(r: Results) -> str:
    rows = []
    for name, label, epochs in CLOSEST:
        d = dev(r, name)
        p = d["pairs"][0]["adapted"][epochs]
        t = p["translate.py"]
        own = d["pairs"][0]["adaptation"]["guide"] == "eflomal run by translate.py"  # eflomal ran inside the timing
        adapting = f"{num(p['intersection']['seconds_adapting'])} ({'eflomal and ' if own else ''}adapting both)"
        rows.append(
            (
                f"{label}, {epochs} epochs",
                f"**{with_lengths(t)}**",
                f"{t['reading']} links, {t['symmetrisation']}",
                f"{pct(p['grow-diag-final-and']['aer'])} / {pct(p['union']['aer'])}",
                adapting,
                pct(p["guide"]["aer"]),
                eflomal_beside(d),
            )
        )
    rnn = dev(r, "alignment_hansards_rnn_guided.json")
    for k, name in ((1, "Luong"), (0, "Bahdanau")):
        a = rnn["models"][k]["adapted"]["40"]
        guide = pct(rnn["eflomal"]["aer"]["intersection"]["aer"])
        rows.append((f"{name} fr→en alone, 40 epochs", with_lengths(a), "its own", "",
                     f"{num(a['seconds'])} (adapting and aligning)", guide, eflomal_beside(rnn)))  # fmt: skip
    head = [
        "guided by eflomal's intersection, weight 5",
        "AER, `translate.py`'s reading (by length)",
        "reading chosen by agreement with the guide",
        "the same links, grow-diag-final-and / union",
        "seconds",
        "the guide",
        "eflomal, same run (forward / intersection)",
    ]
    return grid(head, rows)


# --- one model against several draws of eflomal ---------------------------------------------------------------------


def draws_summary(r: Results, name: str) -> str:
    d = r(name)
    across, minus = d["across_runs"], d["model_minus_eflomal"]
    rows = []
    for key, s in across.items():
        label = {
            "eflomal forward": "eflomal forward",
            "eflomal intersection": "eflomal intersection (the guide)",
            "E chosen on half the gold": "E chosen on half the gold, scored on the other half",
            "E closest to the guide": "E whose links agree best with the guide (no gold)",
        }.get(key, f"the model adapted {key}")
        bold = key == "40 epochs"
        cell = f"**{summary_spread(s)}**" if bold else summary_spread(s)
        if key.startswith("eflomal"):
            rows.append((label, cell, "", ""))
        else:
            rows.append((label, cell, points(minus[f"{key} - eflomal forward"]),
                         points(minus[f"{key} - eflomal intersection"])))  # fmt: skip
    runs = next(iter(across.values()))["runs"]
    head = [f"Hansards dev, {runs} runs", "AER, mean (min–max)", "minus eflomal forward, same run",
            "minus eflomal intersection, same run"]  # fmt: skip
    return grid(head, rows)


@table("alignment_five_draws")
def alignment_five_draws(r: Results) -> str:
    return draws_summary(r, "alignment_by_epoch/summary.json")


@table("alignment_voted_guide")
def alignment_voted_guide(r: Results) -> str:
    body = draws_summary(r, "alignment_voted/summary.json")
    d = dev(r, "alignment_voted/long_guided_translate_draws7.json")
    a = d["models"][0]["adapted"]["40"]
    note = (
        f"Through `translate.py` itself (its own seven draws, 40 epochs): {with_lengths(a)}, {num(a['seconds'])} s for "
        f"eflomal, adapting and aligning; eflomal in the benchmark's own run beside it (seven draws): "
        f"{eflomal_beside(d)} (forward / intersection)."
    )
    return body + "\n\n" + note


@table("alignment_voted_pair")
def alignment_voted_pair(r: Results) -> str:
    rows, aers = [], {"pair": [], "guide": [], "forward": []}
    for k, d in enumerate(voted_pairs(r), 1):
        p = d["pairs"][0]["adapted"]["40"]
        aers["pair"].append(p["translate.py"]["aer"])
        aers["guide"].append(p["guide"]["aer"])
        aers["forward"].append(d["eflomal"]["aer"]["forward"]["aer"])
        secs = f"{num(d['eflomal']['seconds'])}; {num(p['intersection']['seconds_adapting'])}"
        rows.append((f"7 draws voted, run {k}", with_lengths(p["translate.py"]), pct(p["guide"]["aer"]),
                     pct(d["eflomal"]["aer"]["forward"]["aer"]), secs))  # fmt: skip
    mean = lambda x: pct(statistics.mean(x))  # noqa: E731
    rows.append(("mean of the three", f"**{mean(aers['pair'])}**", mean(aers["guide"]), mean(aers["forward"]), ""))
    d = dev(r, "alignment_voted/luong_pair_draws1.json")
    p = d["pairs"][0]["adapted"]["40"]
    secs = f"{num(d['eflomal']['seconds'])}; {num(p['intersection']['seconds_adapting'])}"
    rows.append(("one draw", with_lengths(p["translate.py"]), pct(p["guide"]["aer"]),
                 pct(d["eflomal"]["aer"]["forward"]["aer"]), secs))  # fmt: skip
    alone = d["pairs"][0]["alone"]
    note = (
        f"Before adapting: fr→en {pct(alone['fr_en']['aer'])}, en→fr {pct(alone['en_fr']['aer'])}; "
        f"`translate.py` read every run as {p['translate.py']['reading']} links joined by "
        f"{p['translate.py']['symmetrisation']}."
    )
    head = ["the Luong pair adapted 40 epochs", "the pair (1–10 / 11–20 / 21–30 words)",
            "its guide: eflomal's intersection", "eflomal forward", "seconds (eflomal; adapting both)"]  # fmt: skip
    return grid(head, rows) + "\n\n" + note


# --- choices settled on the development lines -----------------------------------------------------------------------


@table("alignment_tuned_vs_cross_validated")
def alignment_tuned_vs_cross_validated(r: Results) -> str:
    rows = []
    for name, guide in (
        ("alignment_by_epoch/summary.json", "one draw of eflomal"),
        ("alignment_voted/summary.json", "seven draws voted"),
    ):
        d = r(name)
        epochs = [k for k in d["runs"][0] if k.endswith(" epochs")]
        hindsight = [min(run[k] for k in epochs) for run in d["runs"]]
        a = d["across_runs"]
        rows.append(
            (
                f"{guide} ({len(d['runs'])} runs)",
                summary_spread(a["40 epochs"]),
                spread(hindsight),
                f"**{summary_spread(a['E chosen on half the gold'])}**",
                summary_spread(a["E closest to the guide"]),
                summary_spread(a["eflomal intersection"]),
            )
        )
    head = [
        "the long-run guided Transformer, guide",
        "E = 40, settled on all 200 lines (tuned)",
        "best E of each run, in hindsight",
        "E chosen on half the lines' gold, scored on the other half (cross-validated)",
        "E whose links agree best with the guide (no gold)",
        "eflomal intersection, same runs",
    ]
    return grid(head, rows)


# --- what did not pay -----------------------------------------------------------------------------------------------


@table("alignment_full_context")
def alignment_full_context(r: Results) -> str:
    causal = dev(r, "alignment_hansards_adapt.json")["models"][0]  # the same model, validated at the same step
    full = dev(r, "alignment_hansards_pair.json")["models"][0]
    rows = [
        (label, num(m["validation"]["step"], 0), pct(m["validation"]["aer"]), with_lengths(m["recorded_choice"]))
        for label, m in (("causal pass (the default)", causal), ("full-context pass", full))
    ]
    return grid(["guided, a quarter of joined rows", "step", "validation AER against eflomal",
                 "Hansards AER (by length)"], rows)  # fmt: skip


@table("alignment_norm_weighted")
def alignment_norm_weighted(r: Results) -> str:
    main, share = dev(r, "alignment_hansards.json"), dev(r, "alignment_hansards_share.json")
    models = [*zip(("no guidance", "guided", "guided, joined pairs"), main["models"]), ("guided, a quarter of "
              "joined rows", share["models"][0])]  # fmt: skip
    rows = [(label, pct(m["best"]), pct(m["norm_weighted"]["best"])) for label, m in models]
    return grid(["3+3 Transformer", "best choice, attention weights", "best choice, norm-weighted"], rows)


@table("alignment_orthography")
def alignment_orthography(r: Results) -> str:
    d = r("alignment_orthography.json")
    labels = {}
    for m in d["models"]:
        labels.setdefault(m["ckpt"], {})[m["text"]] = m["best"]
    names = ("no guidance", "guided", "guided, joined pairs")
    rows = [(n, pct(v["as given"]), pct(v["Tatoeba's orthography"])) for n, v in zip(names, labels.values())]
    return grid(["3+3 Transformer", "best AER, lines as given", "lines in Tatoeba's orthography"], rows)
