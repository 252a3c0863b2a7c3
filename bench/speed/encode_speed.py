"""Encoding a block with BPE: whole sentences against each distinct word once (what preparation does).

    python -m bench.speed.encode_speed [--data DIR] [--pairs 100000] [--repeats 5]

Trains BPE models of the reference setting (8,000 pieces a side) on the first ``--pairs`` Tatoeba training pairs
(--data: a folder with train.tsv, default data/fra-eng), then times ``encode_flat`` on them, one sentencepiece
thread, both ways alternately, and checks that both give the same ids. Writes bench/results/encode_speed.json.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import sentencepiece as spm

from bench.common import DATA, options, table, training_split, write_json
from nmt.data.readers import read_tsv
from nmt.data.tokenizer import encode_flat, train_model, word_local


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data",
        type=training_split,
        default=str(DATA / "fra-eng"),
        metavar="DIR",
        help="a folder with the Tatoeba training split, train.tsv (default: %(default)s)",
    )
    p.add_argument("--pairs", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    options(p, "json")
    args = p.parse_args()
    pairs = read_tsv(args.data / "train.tsv")
    rows = []
    for side, texts in (("French", pairs.src[: args.pairs]), ("English", pairs.tgt[: args.pairs])):
        model = train_model(texts, "bpe", 8000, 1.0, 1)
        assert word_local(model)
        sp = spm.SentencePieceProcessor(model_proto=model)
        times: dict[bool, list[float]] = {False: [], True: []}
        out = {}
        for _ in range(args.repeats):
            for by_words in (False, True):
                t = time.perf_counter()
                out[by_words] = encode_flat(sp, texts, by_words, threads=1)
                times[by_words].append(time.perf_counter() - t)
        same = all(np.array_equal(a, b) for a, b in zip(out[False], out[True]))
        words = " ".join(texts).split(" ")
        sentences_s, words_s = statistics.median(times[False]), statistics.median(times[True])
        rows.append(
            {
                "side": side,
                "sentences": len(texts),
                "words": len(words),
                "distinct_words": len(set(words)),
                "by_sentence_s": round(sentences_s, 3),
                "by_word_s": round(words_s, 3),
                "speed_up": round(sentences_s / words_s, 2),
                "same_ids": same,
            }
        )
        if not same:
            raise SystemExit(f"{side}: word-by-word ids differ from sentencepiece's")
    print(table(rows, list(rows[0])))
    write_json(args.json, {"command": "python -m bench.speed.encode_speed", "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
