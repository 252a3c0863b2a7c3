"""Forward + backward speed of the two models alone, at the reference size, on synthetic batches.

    python -m bench.speed.model_speed [--threads 2] [--tokens 2048] [--repeats 15]

Embeddings 256, encoder 256 per direction, decoder 512, vocabulary 8,000, batches of about
--tokens target tokens (sentences of 12 source and 12 target tokens, no padding), Adam step
included. Prints the median target tokens/s and the Luong/Bahdanau ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from omegaconf import OmegaConf

from bench.common import compose, options, table, write_json
from nmt.models.seq2seq import build_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "threads")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--length", type=int, default=12)
    p.add_argument("--repeats", type=int, default=15)
    options(p, "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, L = 8000, args.length
    B = args.tokens // L
    src, tgt = torch.randint(4, V, (B, L)), torch.randint(4, V, (B, L + 1))
    src_len = torch.full((B,), L)
    rows = []
    for name in ("bahdanau", "luong"):
        sizes = OmegaConf.to_container(compose([f"experiment=tatoeba_{name}"]).model)  # the reference size
        model = build_model(src_vocab_size=V, tgt_vocab_size=V, **sizes)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        times = []
        for i in range(args.repeats + 3):
            t = time.perf_counter()
            loss, _, _, _ = model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:], label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i >= 3:
                times.append(time.perf_counter() - t)
        rows.append(
            {
                "model": name,
                "tgt_tokens_per_s": round(B * L / statistics.median(times), 1),
                "step_ms": round(1000 * statistics.median(times), 1),
            }
        )
    ratio = rows[1]["tgt_tokens_per_s"] / rows[0]["tgt_tokens_per_s"]
    print(f"{B} sentences x {L} target tokens, {args.threads} threads")
    print(table(rows, ["model", "tgt_tokens_per_s", "step_ms"]))
    print(f"Luong / Bahdanau: {ratio:.2f}x")
    write_json(
        args.json, {"threads": args.threads, "batch": [B, L], "runs": rows, "luong_over_bahdanau": round(ratio, 2)}
    )


if __name__ == "__main__":
    main()
