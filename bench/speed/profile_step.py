"""Where the time goes: torch.profiler over training steps and greedy decoding at the reference setting.

    python -m bench.speed.profile_step [--data DIR] [--steps 20] [--threads 2]
                                 [--precision 32-true bf16-mixed] [--compile off on]

For each model (--models, at experiment=tatoeba_<model>): --steps training steps (loss, backward, fused Adam) on
real Tatoeba batches (--data: a folder with the splits train.tsv, valid.tsv and test.tsv, default data/fra-eng, e.g.
a copy of the Tatoeba splits), and greedy decoding of the first --sentences test sentences with translate.py's
batching. Operators are grouped (matrix products, log-softmax and its gradient, tanh, GRU cell arithmetic, optimiser,
...) and each group's share of the profiled CPU self time is printed and written to JSON. With --precision and
--compile, training is profiled at each precision (bf16-mixed: under the CPU's bf16 autocast, as Lightning runs it)
and eager or compiled (the compiled step of ``compile.enabled=true``: Inductor's fused kernels are the group
"compiled kernels"); the total milliseconds a step are recorded beside the shares.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.common import compose, corpus_overrides, options, table, write_json

GROUPS = {  # operator name (aten::...) -> group; the first matching prefix wins
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::_addmm_activation", "aten::baddbmm"),
    "log-softmax / softmax": ("aten::_log_softmax", "aten::_softmax", "aten::exp", "aten::_log_softmax_backward"),
    "tanh": ("aten::tanh",),
    "sigmoid": ("aten::sigmoid",),
    "dropout masks": ("aten::bernoulli", "aten::native_dropout", "aten::random_"),
    "optimiser": ("aten::_fused_adam", "aten::_fused_adamw"),
    "fused attention (scaled_dot_product_attention)": ("aten::_scaled_dot_product", "aten::_flash_attention"),
    "layer norm": ("aten::native_layer_norm",),
    "relu": ("aten::relu", "aten::threshold_backward", "aten::clamp_min"),
    "elementwise add/mul/sub": ("aten::add", "aten::mul", "aten::sub", "aten::rsub", "aten::div"),
    "copies, gathers, concatenation": ("aten::copy_", "aten::cat", "aten::index", "aten::gather", "aten::stack"),
    "packed GRU (encoder)": ("aten::gru", "aten::_pack_padded", "aten::_pad_packed"),
    "compiled kernels (Inductor)": ("## Call CompiledFxGraph",),
    "casts to and from bf16": ("aten::_to_copy", "aten::to"),
}


def grouped(prof) -> dict[str, float]:
    """Each group's share of the profiled CPU self time, in percent."""
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        group = next((g for g, prefixes in GROUPS.items() if event.key.startswith(prefixes)), "other")
        totals[group] = totals.get(group, 0.0) + event.self_cpu_time_total
    whole = sum(totals.values())
    return {g: round(100 * t / whole, 1) for g, t in sorted(totals.items(), key=lambda x: -x[1])}


def profiled(model, loss_fn, smoothing: float, batches: list, bf16: bool, compiled: bool) -> tuple[dict, float]:
    """Training steps on ``batches`` after the first three (warm-up; compiled: every batch first, so that no
    compilation is profiled): each operator group's share of the profile, and the milliseconds a step took."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    def step(b) -> None:
        with autocast:
            loss, _, _, _ = loss_fn(b.src, b.src_len, b.tgt_in, b.tgt_out, smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for b in batches if compiled else batches[:3]:
        step(b)
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[3:]:
            step(b)
    return grouped(prof), round(1000 * (time.perf_counter() - started) / len(batches[3:]), 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "data", "cache", "models")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sentences", type=int, default=500)
    options(p, "threads", "precision", "compile", "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from hydra.utils import instantiate

    from nmt.data.readers import read_tsv
    from nmt.inference.search import SearchOptions
    from nmt.inference.translator import Translator
    from nmt.training.compiled import Compilation, CompiledLoss
    from nmt.training.module import TranslationModule

    test = read_tsv(args.data / "test.tsv").src[: args.sentences]
    out, rows, step_ms = {}, [], {}
    for name in args.models:
        cfg = compose([f"experiment=tatoeba_{name}", "data.num_workers=0", *corpus_overrides(args.data, args.cache)])
        torch.manual_seed(1)
        compilation = Compilation(**{**cfg.compile, "enabled": "on" in args.compile})  # the switch as asked
        dm = instantiate(cfg.data)  # as train.py builds it (data.pad_multiple pads)
        dm.prepare_data()
        dm.setup("fit")
        module = TranslationModule.from_config(cfg, dm.tokenizer)
        model, smoothing = module.model.train(), module.label_smoothing
        batches = list(itertools.islice(iter(dm.train_dataloader()), args.steps + 3))
        for precision, compiled in itertools.product(args.precision, args.compile):
            variant = "" if (precision, compiled) == ("32-true", "off") else f" ({precision}, compile {compiled})"
            loss_fn = CompiledLoss(model.loss, compilation.dynamic) if compiled == "on" else model.loss
            out[f"{name}/training{variant}"], step_ms[f"{name}/training{variant}"] = profiled(
                model, loss_fn, smoothing, batches, precision == "bf16-mixed", compiled == "on"
            )
        translator = Translator(model.eval(), dm.tokenizer, SearchOptions(beam_size=1))
        translator.translate(test[:50])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            translator.translate(test)
        out[f"{name}/greedy decoding"] = grouped(prof)
    for what, shares in out.items():
        rows += [{"what": what, "group": g, "share_%": s} for g, s in shares.items()]
    print(table(rows, ["what", "group", "share_%"]))
    for what, ms in step_ms.items():
        print(f"{what}: {ms} ms a step (under the profiler)")
    out = {"threads": args.threads, "steps": args.steps, "sentences": len(test), "shares": out, "step_ms": step_ms}
    write_json(args.json, out)


if __name__ == "__main__":
    main()
