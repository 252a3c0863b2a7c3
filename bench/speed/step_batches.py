"""The batches bench/speed/step_speed.py times: one epoch of the training sampler's, grouped by padded shape, a fixed
few kept to stand for it and moved to the device once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from bench.speed.train_speed import model_flops

PAD_MULTIPLE = 8  # lengths rounded up to a multiple of 8, as trainer=gpu's


def shape_of(batch) -> tuple[int, int, int]:
    """A batch's padded shape (B, S, T)."""
    return (int(batch.src.shape[0]), int(batch.src.shape[1]), int(batch.tgt_in.shape[1]))


def choose(shapes: list[tuple[int, int, int]], n: int) -> list[int]:
    """``n`` of the epoch's batches by their shapes (their positions, in epoch order): one of each shape where there
    are no more shapes than ``n``; the rest (all, where there are more) spread evenly over the batches sorted by
    shape, so that they stand for the epoch's mix of lengths."""
    order = sorted(range(len(shapes)), key=lambda i: (shapes[i][1], shapes[i][2], shapes[i][0], i))
    first: dict[tuple[int, int, int], int] = {}
    for i in order:
        first.setdefault(shapes[i], i)
    chosen = list(first.values()) if len(first) <= n else []
    taken = set(chosen)
    rest = [i for i in order if i not in taken]
    k = min(n - len(chosen), len(rest))
    chosen += [rest[int((j + 0.5) * len(rest) / k)] for j in range(k)] if k > 0 else []
    return sorted(chosen)


def real_tokens(batch) -> tuple[int, int]:
    """(real target tokens, real source tokens) of a host batch (EOS counted in the target, as the loss is)."""
    tgt = int(batch.host.tgt_tokens) if batch.host is not None else int(batch.tgt_len.sum())
    return tgt, int(batch.src_len[batch.tgt_len > 0].sum())


def padding_share(batches: list) -> float:
    """Real tokens (source and target) over padded ones (B x S + B x T)."""
    real = sum(sum(real_tokens(b)) for b in batches)
    padded = sum(s[0] * (s[1] + s[2]) for s in map(shape_of, batches))
    return real / padded if padded else float("nan")


@dataclass
class Batches:
    """One --max-tokens: the fixed batches on the device, their real target tokens and FLOPs by model, and how they
    stand for the epoch they were drawn from."""

    max_tokens: int
    device: list = field(default_factory=list)
    tokens: int = 0  # real target tokens of the list
    flops: dict[str, float] = field(default_factory=dict)  # model -> forward + backward FLOPs of the list
    info: dict = field(default_factory=dict)


def draw_batches(cfg, n: int, device: torch.device, models: dict[str, dict]) -> tuple[Batches, Any]:
    """The training loader's epoch at ``cfg``'s data settings, ``n`` of its batches kept (:func:`choose`) and moved to
    ``device``; the data module."""
    from hydra.utils import instantiate

    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    epoch = list(dm.train_dataloader())
    shapes = [shape_of(b) for b in epoch]
    chosen = [epoch[i] for i in choose(shapes, n)]
    counts: dict[tuple[int, int, int], int] = {}
    for s in shapes:
        counts[s] = counts.get(s, 0) + 1
    kept = {shape_of(b) for b in chosen}
    vocab = dm.tokenizer.tgt_vocab_size
    out = Batches(int(cfg.data.max_tokens))
    for b in chosen:
        rows = b.tgt_len > 0  # filler rows (data.shapes) carry no target
        src, tgt = b.src_len[rows].cpu().numpy(), b.tgt_len[rows].cpu().numpy()  # host batches: no copy
        out.tokens += real_tokens(b)[0]
        for model, m in models.items():
            out.flops[model] = out.flops.get(model, 0.0) + model_flops(m, vocab, src, tgt)
    out.device = [b.to(device) for b in chosen]
    out.info = {
        "max_tokens": out.max_tokens,
        "pad_multiple": int(cfg.data.pad_multiple),
        "data_shapes": cfg.data.get("shapes"),
        "batches": len(chosen),
        "epoch_batches": len(epoch),
        "epoch_shapes": len(counts),
        "covers_every_shape": kept == set(counts),
        "epoch_batches_of_these_shapes": round(sum(counts[s] for s in kept) / len(epoch), 4),
        "tgt_tokens_per_batch": round(out.tokens / len(chosen), 1),
        "epoch_tgt_tokens_per_batch": round(sum(real_tokens(b)[0] for b in epoch) / len(epoch), 1),
        "padding_efficiency": round(padding_share(chosen), 4),
        "epoch_padding_efficiency": round(padding_share(epoch), 4),
        "shapes": [
            {"shape": list(s), "batches": sum(shape_of(b) == s for b in chosen), "epoch_batches": counts[s]}
            for s in sorted(kept, key=lambda s: (s[1], s[2], s[0]))
        ],  # fmt: skip
    }
    return out, dm
