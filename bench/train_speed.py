"""Training throughput at the reference setting on real data, for each model.

    python bench/train_speed.py [--models bahdanau luong transformer] [--data DIR] [--steps 150]
                                [--threads 2] [--max-tokens 2400 930] [--compile off on]
                                [--precision 32-true bf16-mixed]

Runs the real TranslationModule through Lightning's Trainer on the Tatoeba train split (--data: a folder
with the splits train.tsv, valid.tsv and test.tsv, default data/fra-eng, e.g. a copy of the Tatoeba splits) and
reports steady-state real target tokens/s (median over 10-step intervals after a warm-up),
padding efficiency, peak RSS, parameters, and the achieved model FLOP/s as a fraction of a
float32 GEMM measured in the same process (FLOPs counted analytically on real tokens).

A step is timed from the end of one batch to the end of the next, so loading and collating
the batch count, as in JoeyNMT's own figure. Each model runs at every --max-tokens: 2,400
padded tokens (the reference setting, ~2,070 real target tokens a batch) and 930 (~805 real
target tokens a batch, as JoeyNMT's 2,048 padded tokens without bucketing give; its Transformer's 4,096
padded tokens give ~1,610, about --max-tokens 1860). With ``--compile off on`` each model runs eager and then
with ``compile.enabled=true`` (nmt/training/compiled.py), one after the other: the compiled row has its ratio to the
eager one, the graphs compiled and the seconds of the steps that compiled them (the warm-up steps hold the first
compilations; any later ones count in the median). With ``--precision 32-true bf16-mixed`` each runs in float32 and
then with bfloat16 mixed precision (Lightning's autocast: products in bf16, weights and optimiser in float32), each
row's FLOP rate a share of its own precision's GEMM rate; on a CPU this pays where it has bf16 instructions
(AVX512-BF16, AMX), and on a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import lightning as L
import numpy as np
import torch
from common import (
    DATA,
    SPLITS_HELP,
    compose,
    corpus_overrides,
    gemm_gflops,
    padding_efficiency,
    peak_rss_gib,
    splits,
    table,
    write_json,
)


def transformer_flops(m: dict, V: int, src_lens: np.ndarray, tgt_lens: np.ndarray) -> float:
    """Forward + backward FLOPs of one Transformer batch (3x forward), real tokens only: projections, feed-forward,
    attention scores and contexts, the output layer."""
    D, Le, Ld = m["emb_size"], m["encoder"]["num_layers"], m["decoder"]["num_layers"]
    Fe, Fd = m["encoder"]["ff_size"], m["decoder"]["ff_size"]
    src_lens, tgt_lens = np.asarray(src_lens, np.int64), np.asarray(tgt_lens, np.int64)
    S, T = src_lens.sum(), tgt_lens.sum()
    enc = Le * (S * 2 * (4 * D * D + 2 * D * Fe) + (src_lens**2).sum() * 4 * D)
    cross_kv = Ld * S * 2 * 2 * D * D  # the encoder's keys and values, per decoder layer
    per_tgt = Ld * 2 * (6 * D * D + 2 * D * Fd) + 2 * D * V
    attn = Ld * ((tgt_lens * (tgt_lens + 1) / 2).sum() * 4 * D + (tgt_lens * src_lens).sum() * 4 * D)
    return 3.0 * float(enc + cross_kv + T * per_tgt + attn)


def model_flops(m: dict, V: int, src_lens: np.ndarray, tgt_lens: np.ndarray) -> float:
    """Forward + backward FLOPs of one batch (3x forward), real tokens only."""
    if m["name"] == "transformer":
        return transformer_flops(m, V, src_lens, tgt_lens)
    E, R, He, H = m["emb_size"], m["readout_size"], m["encoder"]["hidden_size"], m["decoder"]["hidden_size"]
    A = m["decoder"].get("attn_hidden")
    K = 2 * He  # encoder state size
    src_lens, tgt_lens = np.asarray(src_lens, np.int64), np.asarray(tgt_lens, np.int64)  # stored as small types
    S, T = src_lens.sum(), tgt_lens.sum()
    enc = S * 2 * 6 * He * (E + He)
    if m["name"] == "bahdanau":
        enc += S * 2 * K * A  # keys projected once
        per_tgt = 2 * (H * A + E * 3 * H + K * 3 * H + H * 3 * H + (H + K + E) * R + R * V)
        attn = (tgt_lens * src_lens).sum() * 2 * (A + K)  # scores and context per (target, source) pair
    else:
        per_tgt = 2 * (3 * H * (E + H) + H * H + H * K + (2 * H + K) * R + R * V)
        attn = (tgt_lens * src_lens).sum() * 4 * K + (tgt_lens * (tgt_lens + 1) / 2).sum() * 4 * H
    return 3.0 * float(enc + T * per_tgt + attn)


JOEYNMT = {"bahdanau": 829, "luong": 829, "transformer": 471}  # the anchors' RNN and Transformer, target tokens/s


class Meter(L.Callback):
    """Times each training step and counts its real target tokens and FLOPs."""

    def __init__(self, model_cfg: dict, vocab_size: int):
        self.model_cfg, self.vocab_size = model_cfg, vocab_size
        self.steps: list[tuple[float, int, float]] = []  # (seconds, target tokens, FLOPs)

    def on_train_start(self, trainer, pl_module):
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()  # end to end: the next batch's loading counts towards its step
        src_len, tgt_len = batch.src_len.numpy(), batch.tgt_len.numpy()
        flops = model_flops(self.model_cfg, self.vocab_size, src_len, tgt_len)
        self.steps.append((now - self.t0, int(tgt_len.sum()), flops))
        self.t0 = now


def run(model: str, max_tokens: int, compiled: bool, precision: str, args) -> dict:
    from hydra.utils import instantiate

    from nmt.data.batching import TokenBucketSampler
    from nmt.training.module import TranslationModule

    overrides = [f"experiment=tatoeba_{model}", f"data.max_tokens={max_tokens}", "data.num_workers=0"]
    overrides.append(f"compile.enabled={str(compiled).lower()}")
    cfg = compose([*overrides, *corpus_overrides(args.data, args.cache)])
    L.seed_everything(1, verbose=False)
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer)
    meter = Meter(cfg.model, module.model.output.out_features)
    trainer = L.Trainer(
        accelerator=args.accelerator,
        precision=precision,
        max_steps=args.warmup + args.steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        gradient_clip_val=1.0,
        use_distributed_sampler=False,
        callbacks=[meter],
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=dm)
    steps = meter.steps[args.warmup :]
    rates, flop_rates = [], []
    for i in range(0, len(steps) - 9, 10):
        chunk = steps[i : i + 10]
        seconds = sum(s for s, _, _ in chunk)
        rates.append(sum(n for _, n, _ in chunk) / seconds)
        flop_rates.append(sum(f for _, _, f in chunk) / seconds)
    c = dm.corpus.splits["train"]
    sampler = TokenBucketSampler(c.src_lens, c.tgt_lens, cfg.data.max_tokens, seed=1)
    done = module._train_loss  # the compiled loss: its graphs and compiling seconds
    return {
        "model": model,
        "max_tokens": max_tokens,
        "precision": precision,
        "compiled": compiled and not done.failed,
        **({"graphs": done.graphs, "compile_seconds": round(done.seconds, 1)} if compiled else {}),
        "tgt_tokens_per_s": round(statistics.median(rates), 1),
        "tgt_tokens_per_s_range": [round(min(rates), 1), round(max(rates), 1)],
        "tgt_tokens_per_batch": round(float(np.mean([n for _, n, _ in steps])), 1),
        "model_gflops_per_s": round(statistics.median(flop_rates) / 1e9, 1),
        "padding_efficiency": round(padding_efficiency(c.src_lens, c.tgt_lens, [np.asarray(b) for b in sampler]), 4),
        "parameters": sum(p.numel() for p in module.parameters()),
        "peak_rss_gib": round(peak_rss_gib(), 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=splits, default=str(DATA / "fra-eng"), metavar="DIR", help=SPLITS_HELP)
    p.add_argument("--cache", default="data")
    p.add_argument("--models", nargs="+", default=["bahdanau", "luong", "transformer"])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, nargs="+", default=[2400, 930], help="padded tokens a batch")
    p.add_argument("--accelerator", default="cpu", help="cpu, or gpu (one GPU)")
    p.add_argument(
        "--precision", nargs="+", default=["32-true"], help="Lightning's precision(s), e.g. 32-true bf16-mixed"
    )
    p.add_argument("--compile", nargs="+", choices=["off", "on"], default=["off"], help="eager, compiled, or both")
    p.add_argument("--json", default="bench/results/train_speed.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gpu = args.accelerator != "cpu"
    # each precision's products in its own GEMM rate (bf16 where it computes in bf16), measured around every run
    dtypes = {p: torch.bfloat16 if "bf16" in p else torch.float32 for p in args.precision}
    gemms: dict[torch.dtype, list[float]] = {}

    def measure_gemms() -> None:
        for dtype in set(dtypes.values()):
            gemms.setdefault(dtype, []).append(gemm_gflops(device="cuda" if gpu else "cpu", dtype=dtype))

    measure_gemms()
    rows = []
    for max_tokens in args.max_tokens:
        for model in args.models:  # peak RSS is the process's so far: run --models X alone for one model's
            for precision in args.precision:
                for compiled in args.compile:
                    rows.append(run(model, max_tokens, compiled == "on", precision, args))
                    measure_gemms()  # around every run: noisy machine, the best is the ceiling
    gemm = {dtype: max(readings) for dtype, readings in gemms.items()}
    eager = {(r["model"], r["max_tokens"], r["precision"]): r["tgt_tokens_per_s"] for r in rows if "graphs" not in r}
    for row in rows:
        row["fraction_of_gemm"] = round(row["model_gflops_per_s"] / gemm[dtypes[row["precision"]]], 3)
        if "graphs" in row and (key := (row["model"], row["max_tokens"], row["precision"])) in eager:
            row["vs_eager"] = round(row["tgt_tokens_per_s"] / eager[key], 2)
        if row["precision"] != "32-true" and (key := (row["model"], row["max_tokens"], "32-true")) in eager:
            row["vs_float32_eager"] = round(row["tgt_tokens_per_s"] / eager[key], 2)
        if not gpu:  # JoeyNMT 2.3.0 on this kind of machine (the JoeyNMT anchor's README.md), on CPU
            row["joeynmt_tgt_tokens_per_s"] = JOEYNMT[row["model"]]
            row["vs_joeynmt"] = round(row["tgt_tokens_per_s"] / JOEYNMT[row["model"]], 2)
    where = torch.cuda.get_device_name() if gpu else f"{args.threads} threads"
    for dtype, rate in gemm.items():
        print(f"{dtype} GEMM on {where}: {rate:.1f} GFLOP/s")
    print(
        table(
            rows,
            [
                "model",
                "max_tokens",
                "precision",
                "compiled",
                "tgt_tokens_per_batch",
                "tgt_tokens_per_s",
                "vs_eager",
                "vs_float32_eager",
                "vs_joeynmt",
                "graphs",
                "compile_seconds",
                "model_gflops_per_s",
                "fraction_of_gemm",
                "padding_efficiency",
                "parameters",
                "peak_rss_gib",
            ],
        )
    )
    write_json(
        args.json,
        {
            "threads": args.threads,
            "device": where,
            "gemm_gflops_per_s": {str(d).removeprefix("torch."): round(r, 1) for d, r in gemm.items()},
            "gemm_readings": {str(d).removeprefix("torch."): [round(g, 1) for g in rs] for d, rs in gemms.items()},
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
