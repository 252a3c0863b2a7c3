"""Data pipeline figures on the real corpus: loading, memory per million pairs, padding efficiency.

    python -m bench.speed.data_stats [--data DIR] [--max-tokens 2400]

Loads --data (a folder with the splits train.tsv, valid.tsv, test.tsv, e.g. a copy of the Tatoeba splits;
default data/fra-eng) with data=tsv (train/valid/test given), then reports bytes per
pair of the encoded corpus (and what 10 million pairs would take), and the share of real
tokens in padded batches for the length-bucketed sampler vs random batches of the same count.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import compose, corpus_overrides, options, padding_efficiency, prepared_corpus, table, write_json


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "data", "cache", "json")
    p.add_argument("--max-tokens", type=int, default=2400)
    args = p.parse_args()
    from nmt.data.batching import TokenBucketSampler
    from nmt.data.prepare import PreparedCorpus

    cfg = compose(["experiment=tatoeba_bahdanau", *corpus_overrides(args.data, args.cache)])
    t = time.perf_counter()
    directory = prepared_corpus(cfg).directory
    prepare_s = time.perf_counter() - t
    t = time.perf_counter()
    c = PreparedCorpus.load(directory).splits["train"]
    load_s = time.perf_counter() - t
    per_pair = c.nbytes / len(c)
    sampler = TokenBucketSampler(c.src_lens, c.tgt_lens, args.max_tokens, seed=1)
    bucketed = [np.asarray(b) for b in sampler]
    perm = np.random.default_rng(1).permutation(len(c))
    random_batches = np.array_split(perm, len(bucketed))
    rows = [
        {"figure": "train pairs (after filters)", "value": len(c)},
        {"figure": "prepare (read, sentencepiece, encode), s", "value": round(prepare_s, 1)},
        {"figure": "load prepared splits, s", "value": round(load_s, 2)},
        {"figure": "encoded bytes per pair", "value": round(per_pair, 1)},
        {"figure": "MiB per million pairs", "value": round(per_pair * 1e6 / 2**20, 1)},
        {"figure": "10M pairs on disk (memory-mapped in training), GiB", "value": round(per_pair * 1e7 / 2**30, 2)},
        {
            "figure": f"padding efficiency, bucketed ({args.max_tokens} tokens)",
            "value": round(padding_efficiency(c.src_lens, c.tgt_lens, bucketed), 4),
        },
        {
            "figure": "padding efficiency, random batches (same count)",
            "value": round(padding_efficiency(c.src_lens, c.tgt_lens, random_batches), 4),
        },
        {"figure": "batches per epoch", "value": len(bucketed)},
    ]
    print(table(rows, ["figure", "value"]))
    write_json(args.json, {r["figure"]: r["value"] for r in rows})


if __name__ == "__main__":
    main()
