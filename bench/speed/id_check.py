"""What checking every batch's ids against the vocabulary costs (damaged prepared data is named where it is read).

    python -m bench.speed.id_check [--data DIR] [--batches 300] [--rounds 7]

Collates the same training batches of the Tatoeba corpus (--data: a folder with the splits train.tsv, valid.tsv and
test.tsv, default data/fra-eng; the reference batch, 2,400 padded tokens) with the check and without it, in turn,
and reports the median time per batch of each, and the difference as a share of one training step of each model at
the speed bench/results/train_speed.json measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.common import ROOT, compose, corpus_overrides, options, prepared_corpus, table, write_json
from nmt.data.batching import TokenBucketSampler
from nmt.data.collate import BatchDataset
from nmt.data.encoded import EncodedCorpus


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "data", "cache")
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--rounds", type=int, default=7)
    options(p, "json")
    args = p.parse_args()
    cfg = compose(["experiment=tatoeba_bahdanau", "data.max_tokens=2400", *corpus_overrides(args.data, args.cache)])
    corpus = prepared_corpus(cfg).splits["train"]
    batches = [list(b) for _, b in zip(range(args.batches), TokenBucketSampler(corpus.src_lens, corpus.tgt_lens,
                                                                                 2400, seed=1))]  # fmt: skip
    dataset = BatchDataset(corpus)
    checked = EncodedCorpus.check_ids
    timings: dict[str, list[float]] = {"checked": [], "unchecked": []}
    for _ in range(args.rounds):
        for name in timings:
            EncodedCorpus.check_ids = checked if name == "checked" else lambda *a: None
            t = time.perf_counter()
            for b in batches:
                dataset[b]
            timings[name].append((time.perf_counter() - t) / len(batches))
    EncodedCorpus.check_ids = checked
    per_batch = {k: statistics.median(v) for k, v in timings.items()}
    cost = per_batch["checked"] - per_batch["unchecked"]
    speed = json.loads((ROOT / "bench/results/train_speed.json").read_text())
    rows = []
    for run in speed["runs"]:
        if run["max_tokens"] == 2400:
            step = run["tgt_tokens_per_batch"] / run["tgt_tokens_per_s"]
            rows.append({"model": run["model"], "step_ms": round(step * 1e3, 1), "check_share": f"{cost / step:.3%}"})
    print(f"collate per batch: {per_batch['checked'] * 1e6:.0f} us checked, {per_batch['unchecked'] * 1e6:.0f} us "
          f"without the check; the check: {cost * 1e6:.1f} us a batch")  # fmt: skip
    print(table(rows, ["model", "step_ms", "check_share"]))
    write_json(args.json, {
        "batches": len(batches), "rounds": args.rounds,
        "collate_us": {k: round(v * 1e6, 1) for k, v in per_batch.items()},
        "check_us": round(cost * 1e6, 1), "share_of_a_training_step": rows,
    })  # fmt: skip


if __name__ == "__main__":
    main()
