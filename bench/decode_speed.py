"""Decoding speed on the Tatoeba test split: greedy and beam 5, batched vs one sentence at a time.

    python bench/decode_speed.py --ckpt runs/<run>/checkpoints/last.ckpt [--data ../shared/data/fra-eng] [--threads 2]

Batched decoding uses translate.py's code and defaults (length-sorted batches of 4,000 source
tokens x beam; --batch-type sentences --batch-size 64 gives JoeyNMT's batching);
"one at a time" is the same search called with batches of one sentence, timed on the first
--single sentences. Batched figures are the median of --repeats passes over the test split.
BLEU/chrF (sacrebleu) of the batched output is printed as a sanity check.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import sacrebleu
import torch
from common import SHARED, table, write_json

from nmt.data.readers import read_tsv
from nmt.module import TranslationModule
from nmt.search import SearchOptions
from nmt.translator import Batching, Translator


def timed(translator: Translator, sentences: list[str]) -> tuple[float, list[str]]:
    t = time.perf_counter()
    out = [r.text for r in translator.translate(sentences)]
    return time.perf_counter() - t, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data", default=str(SHARED))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--batch-size", type=int, default=4000, help="translate.py's default: source tokens x beam per batch"
    )
    p.add_argument("--batch-type", default="tokens")
    p.add_argument("--single", type=int, default=300, help="sentences timed one at a time")
    p.add_argument("--repeats", type=int, default=3, help="batched passes over the test split; the median is reported")
    p.add_argument("--json", default="bench/results/decode_speed.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    test = read_tsv(Path(args.data) / "test.tsv")
    module = TranslationModule.from_checkpoint(args.ckpt)
    rows = []
    for beam in (1, 5):
        batched = Translator(
            module.model, module.tokenizer, SearchOptions(beam_size=beam), Batching(args.batch_size, args.batch_type)
        )
        timed(batched, test.src[:64])  # warm-up
        passes = [timed(batched, test.src) for _ in range(args.repeats)]
        seconds, hyps = statistics.median(s for s, _ in passes), passes[0][1]
        single = Translator(module.model, module.tokenizer, SearchOptions(beam_size=beam), Batching(1, "sentences"))
        one_s, _ = timed(single, test.src[: args.single])
        rate, one_rate = len(test.src) / seconds, args.single / one_s
        rows.append(
            {
                "search": "greedy" if beam == 1 else f"beam {beam}",
                "sentences": len(test.src),
                "batched_sent_per_s": round(rate, 1),
                "one_at_a_time_sent_per_s": round(one_rate, 1),
                "batching_speedup": round(rate / one_rate, 1),
                "vs_joeynmt": round(rate / (191.9 if beam == 1 else 48.7), 2),
                "bleu": round(sacrebleu.corpus_bleu(hyps, [test.tgt]).score, 2),
                "chrf": round(sacrebleu.corpus_chrf(hyps, [test.tgt]).score, 2),
            }
        )
    print(f"checkpoint {args.ckpt}, model {module.hparams.model['name']}, {args.threads} threads")
    print(table(rows, list(rows[0])))
    write_json(
        args.json, {"ckpt": args.ckpt, "model": module.hparams.model["name"], "threads": args.threads, "runs": rows}
    )


if __name__ == "__main__":
    main()
