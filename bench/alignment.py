"""Word alignment against gold links: every attention choice of our models beside eflomal's own links, on the
built-in corpus's test split and on real text (the Hansards development part, ../shared/data/hansards-dev).

    python bench/alignment.py [--runs runs/bench_toy_bahdanau ...] [--ckpts TATOEBA_CKPT ...]

Built-in corpus, for each run of bench/toy_quality.py: `translate.py --align-to` (forced decoding of the
reference, as val/aer and test/aer read the attention of the reference) writes Pharaoh links for the test split
with the best checkpoint; their AER against the corpus's sure/possible links is set beside the test/aer that
train.py logged for the same checkpoint and split. Pairs whose pieces do not form the gold words are left out of
both. The links are read from the attention choice the checkpoint recorded (lowest validation AER), as
translate.py does by default. Then, per run, the test-split AER of every attention choice (teacher-forced
reference, as test/aer): each layer's head mean and its best single head, with the "output" readout (the row that
outputs word j) and the "input" readout (the row whose input is word j: Shift-Att, Chen et al., 2020). Beside
them eflomal (nmt/data/eflomal.py), trained on the run's training pairs with the test lines appended.

Real text, for each Tatoeba checkpoint given with --ckpts: the same on the Hansards development part (French
lowercased and tokenised as the set gives it), overall and by French line length; beside it eflomal trained on the
Tatoeba training split (its raw text, whitespace words) with the Hansards lines appended, both directions and each
symmetrisation, and the seconds it took.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import gold
import torch
from common import ROOT, SHARED, compose, prepared_corpus, table, write_json
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt import checkpoint
from nmt.alignment import READOUTS, AERGrid, aer_grid, parse_links
from nmt.data.links import training_words


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", nargs="*", default=[f"runs/bench_toy_{m}" for m in ("bahdanau", "luong", "transformer")])
    p.add_argument("--ckpts", nargs="*", default=[], help="Tatoeba checkpoints measured on the Hansards lines")
    p.add_argument("--hansards", default=str(ROOT.parent / "shared" / "data" / "hansards-dev"))
    p.add_argument("--tatoeba", default=str(SHARED), help="the folder of the models' training split, train.tsv")
    p.add_argument("--json", default="bench/results/alignment.json")
    args = p.parse_args()
    result = {"built_in": built_in([Path(r) for r in args.runs if Path(r).is_dir()])}
    if Path(args.hansards).is_dir():
        result["hansards_dev"] = real_text(gold.hansards(args.hansards), Path(args.tatoeba), args.ckpts)
    write_json(args.json, result)


def built_in(runs: list[Path]) -> dict:
    """The built-in corpus's test split: each run's exported links, every choice, and eflomal (on the default
    corpus where no run is given)."""
    rows, grids = [], []
    for run in runs:
        ckpt = next((run / "checkpoints").glob("best-*.ckpt"))
        model = torch.load(ckpt, weights_only=True)["hyper_parameters"]["model"]["name"]
        test = gold.corpus_gold(prepared_corpus(config(run)).references["test"])
        exported = test.aer(align_to(ckpt, test))
        events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
        events.Reload()
        logged = events.Scalars("test/aer")[-1].value
        row = {
            "model": model,
            "pairs": len(test.src),
            "skipped": exported["skipped"],
            "aer_of_exported_links": exported["aer"],
        }
        rows.append(row | {"test_aer_logged": round(logged, 4), "difference": round(exported["aer"] - logged, 4)})
        grids.append({"model": model, "run": str(run), **choice_grid(ckpt, test)})
    if rows:
        print(table(rows, list(rows[0])))
        print_layers(grids)
    corpus = prepared_corpus(config(runs[0]) if runs else compose([]))
    train = list(training_words(corpus.splits["train"], corpus.tokenizer))
    efl = gold.eflomal_aer(train, gold.corpus_gold(corpus.references["test"]))
    print(table([{"eflomal": k, **v} for k, v in efl["aer"].items()], ["eflomal", "aer", "skipped"]))
    command = "translate.py --align-to (forced decoding of the reference); every choice teacher-forced"
    return {"command": command, "runs": rows, "choices": grids, "eflomal": efl}


def real_text(lines: gold.Gold, tatoeba: Path, ckpts: list[str]) -> dict:
    """The Hansards lines: eflomal trained on the Tatoeba training split, and each checkpoint's attention."""
    efl = gold.eflomal_aer(gold.tsv_words(tatoeba / "train.tsv"), lines)
    print(table([{"eflomal": k, **v} for k, v in efl["aer"].items()], ["eflomal", "aer", "skipped", "by_length"]))
    models = []
    for ckpt in map(Path, ckpts):
        recorded = lines.aer(align_to(ckpt, lines))
        models.append({"ckpt": str(ckpt), "recorded_choice": recorded, **choice_grid(ckpt, lines)})
        print(f"{ckpt}: AER of translate.py --align-to (the recorded choice) {recorded}")
    if models:
        print_layers([{"model": m["ckpt"], **m} for m in models])
    return {"lines": len(lines.src), "eflomal": efl, "models": models}


def config(run: Path):
    return OmegaConf.load(run / ".hydra" / "config.yaml")


def align_to(ckpt: Path, lines: gold.Gold) -> list[set | None]:
    """``translate.py --align-to``'s links of each line (None where it gives not one link per English word: the
    pieces did not form the gold's words)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, ref = Path(tmp) / "src.fr", Path(tmp) / "ref.en"
        src.write_text("".join(s + "\n" for s in lines.src), encoding="utf-8")
        ref.write_text("".join(t + "\n" for t in lines.tgt), encoding="utf-8")
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
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT).stdout.split("\n")
    found = []
    for line, s, t in zip(out, lines.src, lines.tgt):
        links = parse_links(line)
        whole = (
            links
            and sorted(j for _, j in links) == list(range(len(t.split())))
            and max(i for i, _ in links) < len(s.split())
        )
        found.append(links if whole else None)
    return found


def choice_grid(ckpt: Path, lines: gold.Gold) -> dict:
    """The AER of every attention choice of the checkpoint on the lines (teacher-forced), by readout and layer."""
    loaded = checkpoint.load(ckpt)
    tok, grid = loaded.tokenizer, AERGrid()  # as validation in training adds it up
    srcs, tgts = tok.encode_src(lines.src), tok.encode_tgt(lines.tgt)
    for k, (src_ids, tgt) in enumerate(zip(srcs, tgts)):
        src = torch.tensor([src_ids])
        with torch.no_grad():
            _, cross, _ = loaded.model.read(src, torch.tensor([src.shape[1]]), tgt)
        words = len(lines.src[k].split()), len(lines.tgt[k].split())
        pair = tok.src_pieces(src_ids), tok.tgt_pieces(tgt), lines.sure[k], lines.possible[k], words
        grid.add(aer_grid(cross, *pair))
    aer = grid.aers()  # (readouts, layers, heads + 1)
    heads = aer.shape[2] - 1
    at = lambda x: round(float(x), 4)  # noqa: E731
    layers = {
        r: [{"head_mean": at(a[heads]), "best_head": at(a[:heads].min())} for a in aer[i]]
        for i, r in enumerate(READOUTS)
    }
    recorded = loaded.checkpoint.alignment
    chosen = aer[READOUTS.index(recorded.readout), recorded.layer, heads if recorded.head is None else recorded.head]
    return {"layers": layers, "best": at(aer.nan_to_num(1.0).min()), "chosen": recorded.as_dict() | {"aer": at(chosen)}}


def print_layers(grids: list[dict]) -> None:
    layers = [
        {"model": g["model"], "readout": r, "layer": layer, "head_mean": v["head_mean"], "best_head": v["best_head"]}
        for g in grids
        for r, per_layer in g["layers"].items()
        for layer, v in enumerate(per_layer)
    ]
    print(table(layers, list(layers[0])))


if __name__ == "__main__":
    main()
