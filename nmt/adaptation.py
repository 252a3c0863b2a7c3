"""Adapting a model to the text it aligns: a few epochs of its own translation loss on the (source, translation)
pairs it is given, before it aligns them. A statistical aligner learns from the corpus it aligns (eflomal is
trained on the very lines it links); this gives a translation model the same data, and with it the words of the
text that its training corpus never had. Nothing but the pairs is used: no gold links, no other aligner.

The loop is a plain one (Adam, label smoothing, gradient clipping, dropout on, the pairs in a seeded random order,
a few hundred steps): a copy of the model is trained in memory and thrown away afterwards, with no checkpoint, log,
schedule or validation, which is all Lightning's Trainer would add.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import torch
from torch import nn

from .data.batching import pad
from .data.readers import normalize
from .data.tokenizer import Tokenizer
from .seq2seq import Seq2Seq

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Adaptation:
    """How a model adapts to the pairs it aligns; ``epochs`` 0: not at all."""

    epochs: int = 0
    lr: float = 3e-4
    batch_pairs: int = 16
    label_smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 0


def adapted(model: nn.Module, tok: Tokenizer, sources: list[str], targets: list[str], how: Adaptation) -> nn.Module:
    """A copy of ``model`` (a ``Seq2Seq``) trained ``how.epochs`` epochs on the pairs (those with both sides
    empty of pieces are left out), in eval mode; ``model`` itself is unchanged."""
    if how.epochs == 0:
        return model
    if not isinstance(model, Seq2Seq):
        raise ValueError(
            f"--adapt-epochs: {type(model).__name__} cannot adapt: give one checkpoint (an ensemble or an exported "
            "model is not trained here)"
        )
    pairs = []
    for s, t in zip(sources, targets):
        src = tok.encode_src([text])[0] if (text := normalize(s)) else []
        tgt = tok.encode_tgt([text])[0] if (text := normalize(t)) else []
        if src and tgt:
            pairs.append((src, tgt))
    adapting = copy.deepcopy(model).train()
    if not pairs:
        return adapting.eval()
    device = next(adapting.parameters()).device
    optimizer = torch.optim.Adam(adapting.parameters(), lr=how.lr)
    generator = torch.Generator().manual_seed(how.seed)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), torch.inference_mode(False), torch.enable_grad():
        torch.manual_seed(how.seed)  # dropout's masks, without touching the caller's random state
        for epoch in range(how.epochs):
            order = torch.randperm(len(pairs), generator=generator).tolist()
            total = 0.0
            for k in range(0, len(order), how.batch_pairs):
                batch = [pairs[i] for i in order[k : k + how.batch_pairs]]
                src, tgt = [s for s, _ in batch], [t for _, t in batch]
                loss = adapting.loss(
                    pad(src).to(device),
                    torch.tensor([len(s) for s in src], device=device),
                    pad(tgt, bos=True).to(device),  # (B, T): BOS + target
                    pad(tgt, eos=True).to(device),  # (B, T): target + EOS
                    how.label_smoothing,
                )[0]
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(adapting.parameters(), how.clip)
                optimizer.step()
                total += loss.item() * len(batch)
            log.info("adapting to %d pairs: epoch %d of %d, loss %.3f", len(pairs), epoch + 1, how.epochs,
                     total / len(pairs))  # fmt: skip
    return adapting.eval()
