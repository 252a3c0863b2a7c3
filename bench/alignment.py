"""AER of the exported word links on the built-in corpus, against its gold links, for the runs of bench/toy_quality.py.

    python bench/alignment.py [--runs runs/bench_toy_bahdanau runs/bench_toy_luong]

For each run: `translate.py --align-to` (forced decoding of the reference, as val/aer and test/aer
read the attention of the reference) writes Pharaoh links for the test split with the best
checkpoint; their AER against the corpus's sure/possible links is set beside the test/aer that
train.py logged for the same checkpoint and split. Pairs whose pieces do not form the gold words
are left out of both.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from common import ROOT, prepared_corpus, table, write_json
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.alignment import AERCounts, parse_links


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", nargs="+", default=[f"runs/bench_toy_{m}" for m in ("bahdanau", "luong")])
    p.add_argument("--json", default="bench/results/alignment.json")
    args = p.parse_args()
    rows = []
    for run in map(Path, args.runs):
        ckpt = next((run / "checkpoints").glob("best-*.ckpt"))
        cfg = torch.load(ckpt, weights_only=True)["hyper_parameters"]["model"]["name"]
        test = json_split(run)
        with tempfile.TemporaryDirectory() as tmp:
            src, ref = Path(tmp) / "test.fr", Path(tmp) / "test.en"
            src.write_text("".join(s + "\n" for s in test["src"]), encoding="utf-8")
            ref.write_text("".join(t + "\n" for t in test["tgt"]), encoding="utf-8")
            cmd = [
                sys.executable,
                str(ROOT / "translate.py"),
                "--ckpt",
                str(ckpt),
                "--input",
                str(src),
                "--align-to",
                str(ref),
            ]
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT).stdout
        counts, skipped = AERCounts(), 0
        for line, s, t, sure, possible in zip(
            out.split("\n"), test["src"], test["tgt"], test["sure"], test["possible"]
        ):
            links = parse_links(line)
            # one link per target word, as val/aer: anything else means the pieces did not form the gold words
            if sorted(j for _, j in links) != list(range(len(t.split()))) or max(i for i, _ in links) >= len(s.split()):
                skipped += 1
                continue
            counts.add(links, parse_links(sure), parse_links(possible))
        events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
        events.Reload()
        logged = events.Scalars("test/aer")[-1].value
        aer = AERCounts.aer(counts.as_tensor())
        row = {"model": cfg, "pairs": len(test["src"]), "skipped": skipped, "aer_of_exported_links": round(aer, 4)}
        rows.append(row | {"test_aer_logged": round(logged, 4), "difference": round(aer - logged, 4)})
    print(table(rows, list(rows[0])))
    write_json(args.json, {"command": "translate.py --align-to (forced decoding of the reference)", "runs": rows})


def json_split(run: Path) -> dict:
    """The test split the run was scored on: its prepared copy (text and gold links, after the filters)."""
    from omegaconf import OmegaConf

    return prepared_corpus(OmegaConf.load(run / ".hydra" / "config.yaml")).references["test"].__dict__


if __name__ == "__main__":
    main()
