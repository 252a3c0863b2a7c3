"""The lab notebook's tables on adapting models to the Hansards lines (``bench/alignment/alignment.py``
``--adapt-epochs``, ``docs/lab/*-alignment-*.md``): without and with a guide, which guide, one model against several
draws of eflomal (``bench/alignment/alignment_draws.py``), and the epochs chosen on the development lines against
cross-validated ones."""

from __future__ import annotations

import statistics

from tables import Results, grid, num, pct, table
from tables.alignment import RULES, dev, eflomal_beside, points, spread, summary_spread, voted_pairs, with_lengths

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
        "AER, read as `align.py` reads a guided adaptation (by length)",
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
        f"Through the command itself (`align.py --adapt-links eflomal`, then run as `translate.py`; its own seven "
        f"draws, 40 epochs): {with_lengths(a)}, {num(a['seconds'])} s for eflomal, adapting and aligning; eflomal in "
        f"the benchmark's own run beside it (seven draws): "
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
        f"read as `align.py` reads a guided pair (then `translate.py`), every run gave {p['translate.py']['reading']} "
        f"links joined by "
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
