"""AER of the exported word links on the built-in corpus, against its gold links, for the runs of bench/toy_quality.py,
and the AER of every layer, head and readout on the test split.

    python bench/alignment.py [--runs runs/bench_toy_bahdanau runs/bench_toy_luong runs/bench_toy_transformer]

For each run: `translate.py --align-to` (forced decoding of the reference, as val/aer and test/aer
read the attention of the reference) writes Pharaoh links for the test split with the best
checkpoint; their AER against the corpus's sure/possible links is set beside the test/aer that
train.py logged for the same checkpoint and split. Pairs whose pieces do not form the gold words
are left out of both. The links are read from the attention choice the checkpoint recorded (lowest
validation AER), as translate.py does by default.

Then, per run, the test-split AER of every attention choice (teacher-forced reference, as test/aer): each
layer's head mean and its best single head, with the "output" readout (the row that outputs word j) and the
"input" readout (the row whose input is word j: Shift-Att, Chen et al., 2020).
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

from nmt import checkpoint
from nmt.alignment import READOUTS, AERCounts, aer_grid, parse_links


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", nargs="+", default=[f"runs/bench_toy_{m}" for m in ("bahdanau", "luong", "transformer")])
    p.add_argument("--json", default="bench/results/alignment.json")
    args = p.parse_args()
    rows, grids = [], []
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
        grids.append({"model": cfg, "run": str(run), **test_grid(run, ckpt)})
    print(table(rows, list(rows[0])))
    layers = [
        {"model": g["model"], "readout": r, "layer": layer, "head_mean": v["head_mean"], "best_head": v["best_head"]}
        for g in grids
        for r, per_layer in g["layers"].items()
        for layer, v in enumerate(per_layer)
    ]
    print(table(layers, list(layers[0])))
    command = "translate.py --align-to (forced decoding of the reference); every choice teacher-forced"
    write_json(args.json, {"command": command, "runs": rows, "choices": grids})


def test_grid(run: Path, ckpt: Path) -> dict:
    """The test-split AER of every attention choice of the checkpoint, by readout and layer."""
    from omegaconf import OmegaConf

    corpus = prepared_corpus(OmegaConf.load(run / ".hydra" / "config.yaml"))
    refs, ids, loaded = corpus.references["test"], corpus.splits["test"], checkpoint.load(ckpt)
    tok, total = loaded.tokenizer, None
    for k in range(len(ids)):
        src, tgt = torch.tensor([ids.src(k).tolist()]), ids.tgt(k).tolist()
        _, cross, _ = loaded.model.read(src, torch.tensor([src.shape[1]]), tgt)
        words = len(refs.src[k].split()), len(refs.tgt[k].split())
        gold = parse_links(refs.sure[k]), parse_links(refs.possible[k])
        counts = aer_grid(cross, tok.src_pieces(src[0].tolist()), tok.tgt_pieces(tgt), *gold, words)
        if counts is not None:
            total = counts if total is None else total + counts
    aer = AERCounts.aers(total)  # (readouts, layers, heads + 1)
    heads = aer.shape[2] - 1
    at = lambda x: round(float(x), 4)  # noqa: E731
    layers = {
        r: [{"head_mean": at(a[heads]), "best_head": at(a[:heads].min())} for a in aer[i]]
        for i, r in enumerate(READOUTS)
    }
    recorded = checkpoint.alignment(loaded.ckpt)
    chosen = aer[READOUTS.index(recorded.readout), recorded.layer, heads if recorded.head is None else recorded.head]
    return {"layers": layers, "chosen": recorded.as_dict() | {"test_aer": round(float(chosen), 4)}}


def json_split(run: Path) -> dict:
    """The test split the run was scored on: its prepared copy (text and gold links, after the filters)."""
    from omegaconf import OmegaConf

    return prepared_corpus(OmegaConf.load(run / ".hydra" / "config.yaml")).references["test"].__dict__


if __name__ == "__main__":
    main()
