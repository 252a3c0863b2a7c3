"""eflomal's links voted over several draws (``data.aligner.draws``, ``align.py --adapt-draws``) against one draw,
on the Hansards development part (--hansards DIR, default data/hansards-dev) with the Tatoeba training split before
it (--tatoeba DIR, default data/fra-eng: its train.tsv), as bench/alignment/alignment.py runs it.

eflomal's Gibbs sampler is seeded at random, so each run ("draw") gives slightly different links. This runs eflomal
``--draws`` times, then for each K of ``--votes`` puts K draws picked at random to the vote (each direction keeps
the links of more than half of them: ``nmt.alignment.eflomal.voted``), ``--subsets`` times, and gives the AER of each
direction and symmetrisation: mean, min and max over the subsets (K = 1: single draws), with the seconds a draw took.

    python -m bench.alignment.eflomal_draws [--hansards DIR] [--tatoeba DIR] [--draws 15] [--votes 1 3 5 7 9] \
        [--subsets 10]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from bench.common import options, table, tsv_words, write_json
from nmt.alignment.eflomal import align_after, voted
from nmt.alignment.gold import hansards
from nmt.alignment.symmetrisation import COMBINATIONS, combined


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "hansards", "tatoeba")
    p.add_argument("--draws", type=int, default=15, help="runs of eflomal")
    p.add_argument("--votes", type=int, nargs="+", default=[1, 3, 5, 7, 9], help="draws put to the vote (K)")
    p.add_argument("--subsets", type=int, default=10, help="random subsets of K draws for each K")
    options(p, "json")
    args = p.parse_args()
    if max(args.votes) > args.draws:
        p.error(f"--votes: at most --draws ({args.draws})")
    lines = hansards(args.hansards)
    train = tsv_words(args.tatoeba / "train.tsv")
    pairs = [(s.split(), t.split()) for s, t in zip(lines.src, lines.tgt)]
    draws, seconds = [], []
    for d in range(args.draws):
        start = time.perf_counter()
        draws.append(align_after(train, pairs))  # (forward, reverse), each line's links
        seconds.append(time.perf_counter() - start)
        print(f"draw {d + 1}/{args.draws}: {seconds[-1]:.1f} s", flush=True)
    rng, rows = random.Random(0), []
    for k in args.votes:
        aer: dict[str, list[float]] = {rule: [] for rule in COMBINATIONS}
        for _ in range(args.subsets if k < args.draws else 1):
            picked = rng.sample(draws, k)
            forward, reverse = (voted([d[side] for d in picked]) for side in (0, 1))
            for rule in COMBINATIONS:
                aer[rule].append(lines.aer([combined(rule, f, r) for f, r in zip(forward, reverse)])["aer"])
        rows.append({"draws voted": k, **{rule: spread(v) for rule, v in aer.items()}})
    print(table([{**r, **{c: r[c]["mean"] for c in COMBINATIONS}} for r in rows], ["draws voted", *COMBINATIONS]))
    write_json(
        args.json,
        {
            "command": " ".join(["python -m bench.alignment.eflomal_draws", *sys.argv[1:]]),
            "lines": len(lines.src),
            "training_pairs": len(train),
            "seconds_per_draw": {"median": round(statistics.median(seconds), 1), "all": [round(s, 1) for s in seconds]},
            "aer_by_draws_voted": rows,
        },
    )


def spread(values: list[float]) -> dict:
    """Mean, min and max, in percent."""
    pct = [100 * v for v in values]
    return {"mean": round(statistics.mean(pct), 2), "min": round(min(pct), 2), "max": round(max(pct), 2), "n": len(pct)}


if __name__ == "__main__":
    main()
