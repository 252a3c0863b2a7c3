"""The CTranslate2 engine against the PyTorch path on one Transformer checkpoint: the Tatoeba test split translated by
each (PyTorch; the export in float32, int8 and int8_float32), greedy and beam 5, at each thread count, in turn in one
run, each in a fresh process (its peak RSS is that of translating the split).

    python -m bench.serving.engine --ckpt runs/<run>/checkpoints/best.ckpt [--data DIR] [--threads 1 2] \
        [--joeynmt-venv /tmp/joey] [--joeynmt-anchor DIR] [--work /tmp/engine_bench] [--json bench/results/engine.json]

Search settings are translate.py's defaults on both paths (GNMT length penalty 0.6, budget 1.5 x source + 10).
Per row: sentences/s (model loading and a 64-line warm-up excluded), the speed-up over PyTorch at the same search
and threads, test BLEU, the share of lines translated exactly as PyTorch does and the largest score difference on
those lines, and peak RSS. With ``--joeynmt-venv``, JoeyNMT 2.3 and our PyTorch path decode the same weights in turn
at each thread count under JoeyNMT's anchor settings on both sides (``bench/anchors/joeynmt_decode.py``; from the
transformer.yaml of ``--joeynmt-anchor``, default data/anchors/joeynmt: no length penalty, batches of 64 sentences,
output up to 1.5 x the source): the "joeynmt" rows, not comparable with the others, which use translate.py's
defaults. ``--data`` is a folder with the splits train.tsv, valid.tsv and test.tsv (default data/fra-eng), e.g. a copy
of the Tatoeba splits.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu

from bench.common import DATA, ROOT, check, joeynmt_config, options, peak_rss_gib, write_json

QUANTIZED = ("float32", "int8", "int8_float32")
SEARCHES = {"greedy": 1, "beam 5": 5}


def one(model: str, beam: int, threads: int, sentences: list[str], out: Path) -> None:
    """In this process: load ``model``, warm up, translate ``sentences``; write the outputs and timings to ``out``."""
    import torch

    from nmt.inference.loading import load_model as load
    from nmt.inference.search import SearchOptions
    from nmt.inference.translator import Translator

    loaded = load([model], torch.device("cpu"), threads)
    choice = loaded.resolve(loaded.recorded)
    translator = Translator(loaded.model, loaded.tokenizer, SearchOptions(beam_size=beam), alignment=choice)
    translator.translate(sentences[:64])
    start = time.perf_counter()
    results = translator.translate(sentences)
    seconds = time.perf_counter() - start
    scores = [r.scores[0] if r.scores else 0.0 for r in results]
    rows = {"seconds": seconds, "texts": [r.text for r in results], "scores": scores, "peak_rss_gib": peak_rss_gib()}
    out.write_text(json.dumps(rows))


def run_one(model: Path | str, beam: int, threads: int, args, work: Path) -> dict:
    out = work / "one.json"
    cmd = [sys.executable, "-m", __spec__.name, "--one", str(model), "--beam", str(beam), "--threads", str(threads)]
    cmd += ["--data", str(args.data.resolve()), "--out", str(out)]  # the child runs in ROOT
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads(out.read_text())


def exports(ckpt: str, work: Path) -> dict[str, Path]:
    """The checkpoint exported once per quantisation (kept in ``work`` between runs)."""
    from nmt import checkpoint
    from nmt.ct2_export import export

    dirs = {q: work / f"ct2-{q}" for q in QUANTIZED}
    if missing := [q for q, d in dirs.items() if not d.exists()]:
        loaded = checkpoint.load_checkpoint(ckpt)  # once for all of them
        for q in missing:
            export(loaded, dirs[q], q)
    return dirs


def size_mib(path: Path) -> float:
    files = [path] if path.is_file() else list(path.iterdir())
    return round(sum(f.stat().st_size for f in files) / 2**20, 1)


def compare(ref: dict, got: dict, refs: list[str], base_seconds: float) -> dict:
    same = [i for i, (a, b) in enumerate(zip(ref["texts"], got["texts"])) if a == b]
    n, differ = len(ref["texts"]), sorted(set(range(len(ref["texts"]))) - set(same))
    return {
        "sentences_per_s": round(n / got["seconds"], 1),
        "speedup": round(base_seconds / got["seconds"], 2),
        "bleu": round(sacrebleu.corpus_bleu(got["texts"], [refs]).score, 2),
        "identical_to_pytorch": round(len(same) / n, 4),
        "max_score_diff_identical": round(max(abs(ref["scores"][i] - got["scores"][i]) for i in same), 5),
        "differing_lines_scored_higher": sum(got["scores"][i] > ref["scores"][i] for i in differ),  # by its own model
        "peak_rss_gib": round(got["peak_rss_gib"], 3),
    }


def joeynmt_rows(args, test, work: Path) -> list[dict]:
    from bench.anchors import joeynmt_decode
    from nmt import checkpoint

    loaded = checkpoint.load_checkpoint(args.ckpt)
    return joeynmt_decode.side_by_side(
        loaded, test, args.joeynmt_venv, work / "joeynmt", args.joeynmt_anchor, args.threads
    )


def threading_rows(model: Path, sentences: list[str]) -> list[dict]:
    """The engine alone (no ``Translator``) on the split in batches of 64: one replica on one thread, two replicas of
    one thread (``inter_threads``, what ``--threads 2`` runs) and one replica on two threads (``intra_threads``)."""
    import ctranslate2

    from nmt.data.tokenizer import Tokenizer

    tok = Tokenizer.load(model)
    pieces = [tok.src_pieces(ids) for ids in tok.encode_src(sentences)]
    rows = []
    for inter, intra in ((1, 1), (2, 1), (1, 2)):
        translator = ctranslate2.Translator(str(model), device="cpu", inter_threads=inter, intra_threads=intra)
        translator.translate_batch(pieces[:64])
        for name, beam in SEARCHES.items():
            start = time.perf_counter()
            translator.translate_batch(pieces, beam_size=beam, max_batch_size=64, return_attention=True)
            speed = round(len(pieces) / (time.perf_counter() - start), 1)
            rows.append({"search": name, "inter_threads": inter, "intra_threads": intra, "sentences_per_s": speed})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", help="the Transformer checkpoint measured (train.py's .ckpt)")
    options(p, "data")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--work", default="/tmp/engine_bench")
    p.add_argument("--joeynmt-venv", help="JoeyNMT 2.3.0's virtual environment: its decoding of the same weights")
    p.add_argument(
        "--joeynmt-anchor",
        type=joeynmt_config,
        default=DATA / "anchors" / "joeynmt",
        metavar="DIR",
        help="with --joeynmt-venv: the JoeyNMT 2.3 anchor's folder, its transformer.yaml (default: %(default)s)",
    )
    options(p, "json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.joeynmt_venv:  # the anchor's default is checked only where it is read
        args.joeynmt_anchor = check(p, "--joeynmt-anchor", joeynmt_config, args.joeynmt_anchor)
    from nmt.data.readers import read_tsv

    test = read_tsv(args.data / "test.tsv")
    sentences, refs = test.src, test.tgt
    if args.one:
        return one(args.one, args.beam, args.threads[0], sentences, Path(args.out))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    models = {"pytorch": Path(args.ckpt), **exports(args.ckpt, work)}
    sizes = {name: size_mib(path) for name, path in models.items()}
    rows = []
    for name, beam in SEARCHES.items():
        for threads in args.threads:
            runs = {m: run_one(path, beam, threads, args, work) for m, path in models.items()}
            for m, got in runs.items():
                measured = compare(runs["pytorch"], got, refs, runs["pytorch"]["seconds"])
                row = {"search": name, "threads": threads, "model": m, **measured}
                print(json.dumps(row), flush=True)
                rows.append(row)
    result = {"ckpt": args.ckpt, "sentences": len(sentences), "size_mib": sizes, "rows": rows}
    result["threading"] = threading_rows(models["float32"], sentences)
    if args.joeynmt_venv:
        result["joeynmt"] = joeynmt_rows(args, test, work)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
