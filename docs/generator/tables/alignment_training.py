"""The alignment tables on trained attention and on eflomal before any adapting: the built-in corpus and what guided
training costs in BLEU (``bench/alignment/guided_bleu.py``) on ``docs/results/alignment.md``; in the lab notebook
(``docs/lab/*-alignment-*.md``) the long run (``bench/quality/converged.py``), eflomal on the Hansards lines
(``bench/alignment/eflomal_draws.py``), the attention as training recorded it (``bench/alignment/alignment.py``), and
the readouts and orthography that did not pay (``bench/alignment/alignment_orthography.py``)."""

from __future__ import annotations

from tables import Results, grid, num, pct, table
from tables.alignment import LENGTHS, RULES, choice, dev, eflomal_beside, percent_spread, with_lengths

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
