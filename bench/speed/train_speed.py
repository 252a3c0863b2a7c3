"""Training throughput at the reference setting on real data, for each model.

    python -m bench.speed.train_speed [--models bahdanau luong transformer] [--data DIR] [--steps 150]
                                [--threads 2] [--max-tokens 2400 930] [--compile off on]
                                [--precision 32-true bf16-mixed]

Runs the real TranslationModule through Lightning's Trainer on the Tatoeba train split (--data: a folder
with the splits train.tsv, valid.tsv and test.tsv, default data/fra-eng, e.g. a copy of the Tatoeba splits) and
reports steady-state real target tokens/s (median over 10-step intervals after a warm-up),
padding efficiency, peak RSS (on a GPU beside the run's peak GPU memory allocated), parameters, and the achieved
model FLOP/s as a fraction of a float32 GEMM measured in the same process (FLOPs counted analytically on real tokens).

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

from bench.common import (
    compose,
    corpus_overrides,
    gemm_gflops,
    options,
    padding_efficiency,
    peak_rss_gib,
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
    """Times training in intervals of ``every`` steps after ``warmup`` steps, counting their real target tokens and
    FLOPs. Nothing reads a device tensor on the host within an interval: its batches' lengths are kept where they
    are and read after the device is synchronised at the interval's end (so that the work queued on a GPU counts)."""

    def __init__(self, model_cfg: dict, vocab_size: int, warmup: int, every: int = 10):
        self.model_cfg, self.vocab_size, self.warmup, self.every = model_cfg, vocab_size, warmup, every
        self.intervals: list[tuple[float, int, float, int]] = []  # (seconds, target tokens, FLOPs, steps)
        self.lengths: list[tuple[torch.Tensor, torch.Tensor]] = []  # (src_len, tgt_len) of the open interval
        self.seen, self.t0 = 0, 0.0

    @staticmethod
    def _synchronise(device: torch.device) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.seen += 1
        if self.seen <= self.warmup:
            if self.seen == self.warmup:  # end to end from here: the next batch's loading counts towards its step
                self._synchronise(pl_module.device)
                self.t0 = time.perf_counter()
            return
        self.lengths.append((batch.src_len, batch.tgt_len))
        if len(self.lengths) == self.every:
            self._synchronise(pl_module.device)
            now = time.perf_counter()
            tokens, flops = 0, 0.0
            for src_len, tgt_len in self.lengths:  # on the host only now, after the interval
                src, tgt = src_len.cpu().numpy(), tgt_len.cpu().numpy()
                tokens += int(tgt.sum())
                flops += model_flops(self.model_cfg, self.vocab_size, src, tgt)
            self.intervals.append((now - self.t0, tokens, flops, len(self.lengths)))
            self.lengths, self.t0 = [], now


def run(model: str, max_tokens: int, compiled: bool, precision: str, args) -> dict:
    from hydra.utils import instantiate

    from nmt.data.batching import TokenBucketSampler
    from nmt.training.module import TranslationModule

    # on a GPU its preset (trainer=gpu: padded lengths, loader workers, pinned memory) under the experiment's model,
    # schedule and batch; on a CPU the batches are built in the main process, as its 2 threads are all there is
    overrides = [f"experiment=tatoeba_{model}", f"data.max_tokens={max_tokens}"]
    overrides += ["trainer=gpu"] if args.accelerator == "gpu" else ["data.num_workers=0"]
    overrides += [f"compile.enabled={str(compiled).lower()}", *args.overrides]
    cfg = compose([*overrides, *corpus_overrides(args.data, args.cache)])
    L.seed_everything(1, verbose=False)
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer)
    meter = Meter(cfg.model, module.model.output.out_features, args.warmup)
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
    gpu = args.accelerator == "gpu"
    if gpu:  # this run's peak, not the process's so far
        torch.cuda.reset_peak_memory_stats()
    trainer.fit(module, datamodule=dm)
    if not meter.intervals:
        raise SystemExit(f"train_speed: --steps {args.steps} timed no interval of {meter.every} steps: raise --steps")
    rates = [n / seconds for seconds, n, _, _ in meter.intervals]
    flop_rates = [f / seconds for seconds, _, f, _ in meter.intervals]
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
        "tgt_tokens_per_batch": round(sum(i[1] for i in meter.intervals) / sum(i[3] for i in meter.intervals), 1),
        "model_gflops_per_s": round(statistics.median(flop_rates) / 1e9, 1),
        "padding_efficiency": round(padding_efficiency(c.src_lens, c.tgt_lens, [np.asarray(b) for b in sampler]), 4),
        "parameters": sum(p.numel() for p in module.parameters()),
        **({"peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3)} if gpu else {}),
        "peak_rss_gib": round(peak_rss_gib(), 3),
    }


COLUMNS = ["model", "max_tokens", "precision", "compiled", "tgt_tokens_per_batch", "tgt_tokens_per_s", "vs_eager",
           "vs_float32_eager", "vs_joeynmt", "graphs", "compile_seconds", "model_gflops_per_s", "fraction_of_gemm",
           "padding_efficiency", "parameters", "peak_gpu_gib", "peak_rss_gib"]  # fmt: skip


def compared(rows: list[dict], gemm: dict[str, float], gpu: bool) -> None:
    """Each row's FLOP rate as a share of its precision's GEMM rate (``gemm``), its speed against the eager run of
    the same setting (a compiled row) and the float32 one (a bf16 row), and on a CPU against JoeyNMT's."""
    eager = {(r["model"], r["max_tokens"], r["precision"]): r["tgt_tokens_per_s"] for r in rows if "graphs" not in r}
    for row in rows:
        row["fraction_of_gemm"] = round(row["model_gflops_per_s"] / gemm[row["precision"]], 3)
        if "graphs" in row and (key := (row["model"], row["max_tokens"], row["precision"])) in eager:
            row["vs_eager"] = round(row["tgt_tokens_per_s"] / eager[key], 2)
        if row["precision"] != "32-true" and (key := (row["model"], row["max_tokens"], "32-true")) in eager:
            row["vs_float32_eager"] = round(row["tgt_tokens_per_s"] / eager[key], 2)
        if not gpu:  # JoeyNMT 2.3.0 on this kind of machine (the JoeyNMT anchor's README.md), on CPU
            row["joeynmt_tgt_tokens_per_s"] = JOEYNMT[row["model"]]
            row["vs_joeynmt"] = round(row["tgt_tokens_per_s"] / JOEYNMT[row["model"]], 2)


def record(args, rows: list[dict], gemms: dict, dtypes: dict, where: str, kernels, complete: bool) -> dict:
    """The JSON of the runs so far, written after each run (a run stopped from outside keeps what it measured); the
    best GEMM rate of each dtype."""
    gemm = {dtype: max(readings) for dtype, readings in gemms.items()}
    compared(rows, {p: gemm[d] for p, d in dtypes.items()}, args.accelerator != "cpu")
    write_json(
        args.json,
        {
            "threads": args.threads,
            "device": where,
            "float32_matmul": kernels.float32_matmul,  # how the float32 GEMM and runs computed on a GPU
            "attention_backends": list(kernels.attention),
            "gemm_gflops_per_s": {str(d).removeprefix("torch."): round(r, 1) for d, r in gemm.items()},
            "gemm_readings": {str(d).removeprefix("torch."): [round(g, 1) for g in rs] for d, rs in gemms.items()},
            "complete": complete,  # false: the runs asked for that are missing were not measured
            "runs": rows,
        },
    )
    return gemm


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "data", "cache", "models", "threads")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--max-tokens", type=int, nargs="+", default=[2400, 930], help="padded tokens a batch")
    p.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"], help="cpu, or gpu (one GPU, trainer=gpu)")
    options(p, "precision", "compile", "json")
    p.add_argument("--gemm-n", type=int, default=1024, help="the GEMM's matrix size (a GPU's: at least 8,192)")
    p.add_argument(
        "overrides", nargs="*", help="more train.py overrides for every run, e.g. kernels.float32_matmul=highest"
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gpu = args.accelerator != "cpu"
    # each precision's products in its own GEMM rate (bf16 where it computes in bf16), measured around every run
    dtypes = {p: torch.bfloat16 if "bf16" in p else torch.float32 for p in args.precision}
    gemms: dict[torch.dtype, list[float]] = {}

    from omegaconf import OmegaConf

    from nmt.hardware import Kernels

    # float32 products as the runs compute them (kernels.float32_matmul: TF32 on a GPU unless "highest")
    kernels = Kernels.of(OmegaConf.to_container(compose(args.overrides).kernels))

    def measure_gemms() -> None:
        with kernels.applied():
            for dtype in set(dtypes.values()):
                rate = gemm_gflops(args.gemm_n, device="cuda" if gpu else "cpu", dtype=dtype)
                gemms.setdefault(dtype, []).append(rate)

    measure_gemms()
    rows: list[dict] = []
    where = torch.cuda.get_device_name() if gpu else f"{args.threads} threads"
    for max_tokens in args.max_tokens:
        for model in args.models:  # peak RSS is the process's so far: run --models X alone for one model's
            for precision in args.precision:
                for compiled in args.compile:
                    rows.append(run(model, max_tokens, compiled == "on", precision, args))
                    measure_gemms()  # around every run: noisy machine, the best is the ceiling
                    record(args, rows, gemms, dtypes, where, kernels, complete=False)
    gemm = record(args, rows, gemms, dtypes, where, kernels, complete=True)
    for dtype, rate in gemm.items():
        print(f"{dtype} GEMM on {where}: {rate:.1f} GFLOP/s")
    print(table(rows, COLUMNS))


if __name__ == "__main__":
    main()
