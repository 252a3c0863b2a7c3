"""How long building a training batch takes: the vectorised collate against the per-row loop it replaced, and what a
bounded set of batch shapes (data.shapes) costs in padding.

    python -m bench.speed.collate_speed [--data DIR] [--max-tokens 7440 16000] [--batches 300] [--shapes 12]

Builds the data module of experiment=tatoeba_transformer with trainer=gpu's data settings (lengths padded to a
multiple of 8), as train.py does, on the Tatoeba splits (--data: a folder with train.tsv, valid.tsv and test.tsv,
default data/fra-eng; prepared once, then read from --cache), and collates the batches its training sampler gives,
epoch after epoch until --batches, three ways interleaved batch by batch: the collate of nmt/data/batching.py, the
per-row collate it replaced (kept below, and checked to give the same tensors), and the collate with
data.shapes=--shapes (on that setting's own batches). Reports the median time a batch and its interquartile range,
and over one epoch the padding efficiency (real target tokens over the padded B x T; the sources' likewise) and the
distinct batch shapes, with and without the shapes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from bench.common import compose, corpus_overrides, options, table, write_json
from nmt.data.batching import TokenBucketSampler
from nmt.data.collate import Batch, BatchDataset, HostLengths
from nmt.data.encoded import EncodedCorpus
from nmt.data.joining import Joining
from nmt.specials import BOS, EOS, PAD

OVERRIDES = ["experiment=tatoeba_transformer", "trainer=gpu", "data.num_workers=0"]


def per_row_pad(seqs: list, bos: bool = False, eos: bool = False, multiple: int = 1) -> torch.Tensor:
    """The padding of the collate before it was vectorised: row by row."""
    lead = int(bos)
    width = max(len(s) for s in seqs) + lead + int(eos)
    out = np.full((len(seqs), -(-width // multiple) * multiple), PAD, dtype=np.int64)
    for row, s in enumerate(seqs):
        out[row, lead : lead + len(s)] = s
        if bos:
            out[row, 0] = BOS
        if eos:
            out[row, lead + len(s)] = EOS
    return torch.from_numpy(out)


def per_row_collate(
    c: EncodedCorpus, indices: list[int], subwords=None, links=None, multiple: int = 1, joining: Joining | None = None
) -> Batch:
    """The collate before it was vectorised: each pair read, checked, re-segmented, joined and sorted in Python (the
    reference tests/test_collate.py holds the vectorised one to)."""
    idx = np.asarray(indices, dtype=np.int64)
    src, tgt = [c.src(i) for i in idx.tolist()], [c.tgt(i) for i in idx.tolist()]
    for side, seqs in (("src", src), ("tgt", tgt)):
        c.check_ids(side, max(int(s.max(initial=0)) for s in seqs), idx.tolist())
    if subwords is not None:
        src, tgt = subwords(src, tgt, idx)
    rows = (joining or Joining()).groups(idx)
    lengths = [sum(len(s) for s in src[r]) for r in rows]
    order = sorted(range(len(rows)), key=lambda r: -lengths[r])  # longest source first, ties in their order
    pairs = [k for r in order for k in range(rows[r].start, rows[r].stop)]
    ends = np.cumsum([rows[r].stop - rows[r].start for r in order]).tolist()
    rows = [slice(a, b) for a, b in zip([0, *ends[:-1]], ends)]
    idx, src, tgt = idx[pairs], [src[k] for k in pairs], [tgt[k] for k in pairs]
    row_src, row_tgt = src, tgt
    if len(rows) < len(idx):  # rows that join pairs
        row_src = [np.concatenate([np.asarray(s, np.int64) for s in src[r]]) for r in rows]
        row_tgt = [np.concatenate([np.asarray(t, np.int64) for t in tgt[r]]) for r in rows]
    src_lens, tgt_lens = [len(s) for s in row_src], [len(t) + 1 for t in row_tgt]
    batch = Batch(
        src=per_row_pad(row_src, multiple=multiple),
        src_len=torch.tensor(src_lens, dtype=torch.int64),
        tgt_in=per_row_pad(row_tgt, bos=True, multiple=multiple),
        tgt_out=per_row_pad(row_tgt, eos=True, multiple=multiple),
        tgt_len=torch.tensor(tgt_lens, dtype=torch.int64),
        idx=torch.from_numpy(idx),
        host=HostLengths(torch.tensor(src_lens, dtype=torch.int64), sum(tgt_lens)),
    )
    if links is not None:
        shape = (len(rows), batch.tgt_out.shape[1], batch.src.shape[1])
        batch.align = links.targets(idx, src, tgt, shape, rows)
    return batch


def same(a: Batch, b: Batch) -> bool:
    """Every tensor of the two batches of one dtype and equal, and their host lengths equal."""
    pairs = [(getattr(a, k), getattr(b, k)) for k in ("src", "src_len", "tgt_in", "tgt_out", "tgt_len", "idx")]
    pairs.append((a.host.src, b.host.src))
    return all(x.dtype == y.dtype and torch.equal(x, y) for x, y in pairs) and a.host.tgt_tokens == b.host.tgt_tokens


def training_batches(args, max_tokens: int, shapes: int) -> tuple[BatchDataset, TokenBucketSampler]:
    """The training loader's dataset and sampler, of the data module train.py would build."""
    from hydra.utils import instantiate

    overrides = [*OVERRIDES, f"data.max_tokens={max_tokens}", f"data.shapes={shapes}"]
    dm = instantiate(compose([*overrides, *corpus_overrides(args.data, args.cache)]).data)
    dm.prepare_data()
    dm.setup("fit")
    loader = dm.train_dataloader()
    return loader.dataset, loader.sampler


def drawn(sampler: TokenBucketSampler, n: int) -> list[list[int]]:
    """The sampler's first ``n`` batches, epoch after epoch."""
    out, epoch = [], 0
    while len(out) < n:
        sampler.set_epoch(epoch)
        out += list(sampler)
        epoch += 1
    return out[:n]


def padding(dataset: BatchDataset, sampler: TokenBucketSampler) -> dict:
    """Over one epoch: real target (source) tokens over the padded B x T (B x S), and the distinct shapes."""
    sampler.set_epoch(0)
    real, padded, shapes = np.zeros(2), np.zeros(2), set()
    for b in sampler:
        batch = dataset[b]
        real += [batch.host.tgt_tokens, int(batch.src_len[: len(b)].sum())]
        padded += [batch.tgt_out.numel(), batch.src.numel()]
        shapes.add((len(batch), batch.src.shape[1], batch.tgt_out.shape[1]))
    efficiency = np.round(real / padded, 4).tolist()
    return {"batches_per_epoch": len(sampler), "tgt_tokens_per_batch": round(real[0] / len(sampler)),
            "padded_tgt_per_batch": round(padded[0] / len(sampler)), "distinct_shapes": len(shapes),
            "tgt_efficiency": efficiency[0], "src_efficiency": efficiency[1]}  # fmt: skip


def spread(seconds: list[float]) -> dict:
    q1, median, q3 = np.percentile(np.asarray(seconds) * 1e3, [25, 50, 75])
    return {"median_ms": round(float(median), 3), "q1_ms": round(float(q1), 3), "q3_ms": round(float(q3), 3)}


def measure(args, max_tokens: int) -> tuple[list[dict], list[dict], bool]:
    dataset, sampler = training_batches(args, max_tokens, 0)
    shaped, shaped_sampler = training_batches(args, max_tokens, args.shapes)
    plain, padded = drawn(sampler, args.batches), drawn(shaped_sampler, args.batches)
    ways = {  # the collate of nmt/data/batching.py, the one it replaced, and the first with data.shapes
        "vectorised": (lambda b: dataset[b], plain),
        "per_row": (lambda b: per_row_collate(dataset.corpus, b, multiple=dataset.multiple), plain),
        "shapes": (lambda b: shaped[b], padded),
    }
    for collate, batches in ways.values():  # the pages of the corpus read, the code warm
        for b in batches[:10]:
            collate(b)
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(args.batches):  # interleaved, the order turned each batch: drifts of the machine hit all alike
        for name in list(ways)[:: 1 if i % 2 else -1]:
            collate, batches = ways[name]
            t = time.perf_counter()
            collate(batches[i])
            seconds[name].append(time.perf_counter() - t)
    identical = all(same(dataset[b], per_row_collate(dataset.corpus, b, multiple=dataset.multiple)) for b in plain)
    tokens = {name: statistics.mean(dataset[b].host.tgt_tokens for b in batches) for name, (_, batches) in ways.items()}
    runs = [{"max_tokens": max_tokens, "collate": name, "shapes": args.shapes if name == "shapes" else 0,
             "batches": len(s), "tgt_tokens_per_batch": round(tokens[name]), **spread(s)}
            for name, s in seconds.items()]  # fmt: skip
    pads = [{"max_tokens": max_tokens, "shapes": n, **padding(d, s)}
            for n, (d, s) in ((0, (dataset, sampler)), (args.shapes, (shaped, shaped_sampler)))]  # fmt: skip
    return runs, pads, identical


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "data", "cache")
    p.add_argument("--max-tokens", type=int, nargs="+", default=[7440, 16000], help="padded tokens a batch")
    p.add_argument("--batches", type=int, default=300, help="batches timed at each budget (default: %(default)s)")
    p.add_argument("--shapes", type=int, default=12, help="data.shapes of the padded run (default: %(default)s)")
    options(p, "json")
    args = p.parse_args()
    torch.set_num_threads(1)  # a loader worker's share: the collate is numpy on one core
    runs, pads, identical = [], [], True
    for max_tokens in args.max_tokens:
        r, q, same_tensors = measure(args, max_tokens)
        runs, pads, identical = runs + r, pads + q, identical and same_tensors
    print(table(runs, ["max_tokens", "collate", "shapes", "batches", "tgt_tokens_per_batch", "median_ms", "q1_ms",
                       "q3_ms"]))  # fmt: skip
    print(table(pads, ["max_tokens", "shapes", "batches_per_epoch", "tgt_tokens_per_batch", "padded_tgt_per_batch",
                       "distinct_shapes", "tgt_efficiency", "src_efficiency"]))  # fmt: skip
    print(f"the vectorised and the per-row collate give identical batches: {identical}")
    write_json(args.json, {"overrides": OVERRIDES, "identical": identical, "runs": runs, "padding": pads})
    if not identical:
        raise SystemExit("collate_speed: the vectorised collate differs from the per-row one")


if __name__ == "__main__":
    main()
