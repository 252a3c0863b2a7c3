"""Adapting a model to the text it aligns: a few epochs of its own translation loss on the (source, translation)
pairs it is given, before it aligns them. A statistical aligner learns from the corpus it aligns (eflomal is
trained on the very lines it links); this gives a translation model the same data, and with it the words of the
text that its training corpus never had. Nothing but the pairs is used, no gold links; and where word links of the
pairs are given (a statistical aligner's, as guided training uses them: Garg et al., 2019), the attention that
alignments read is pulled towards them too, by the guided-alignment loss of training (``align_weight``).

The loop is a plain one (Adam, label smoothing, gradient clipping, dropout on, the pairs in a seeded random order,
a few hundred steps): a copy of the model is trained in memory and thrown away afterwards, with no checkpoint, log,
schedule or validation, which is all Lightning's Trainer would add. Two models (a pair aligning both ways) adapt
at the same time, the second in a process of its own (:func:`adapted_together`).
"""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nmt.alignment.choice import AttentionChoice, attention_map
from nmt.alignment.symmetrisation import Links
from nmt.data.collate import pad
from nmt.data.readers import normalize
from nmt.data.tokenizer import Tokenizer
from nmt.data.training_links import TrainingLinks, word_starts
from nmt.models.loss import guided_alignment_loss
from nmt.models.seq2seq import Seq2Seq

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Adaptation:
    """How a model adapts to the pairs it aligns; ``epochs`` 0: not at all; ``align_weight``: the guided-alignment
    term's weight where links of the pairs are given."""

    epochs: int = 0
    lr: float = 3e-4
    batch_pairs: int = 16
    label_smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 0
    align_weight: float = 5.0  # what every alignment figure of docs/alignment.md was measured with


def adapted(
    model: nn.Module,
    tok: Tokenizer,
    sources: list[str],
    targets: list[str],
    how: Adaptation,
    links: list[Links] | None = None,
    choice: AttentionChoice | None = None,
    after_epoch: Callable[[int, nn.Module], None] | None = None,
    max_len: int | None = None,
) -> nn.Module:
    """A copy of ``model`` (a ``Seq2Seq``) trained ``how.epochs`` epochs on the pairs (those with a side empty of
    pieces, or longer than ``max_len`` pieces, are left out), in eval mode; ``model`` itself is unchanged. With
    ``links`` (pair k's ``(source word, target word)`` links, words as the pair's text splits them) the attention
    ``choice`` reads is guided towards them. ``after_epoch(e, model)`` is given a copy of the model after each epoch e
    (from 1), in eval mode, its random draws apart from the training's: one run shows what every shorter adaptation
    gives."""
    if how.epochs == 0:
        return model
    if not isinstance(model, Seq2Seq):
        raise ValueError(
            f"--adapt-epochs: {'an exported model' if model is None else type(model).__name__} cannot adapt: give one "
            "checkpoint (an ensemble or an exported model is not trained here)"
        )
    pairs = []  # (source pieces, target pieces, the pair's index)
    for k, (s, t) in enumerate(zip(sources, targets)):
        src = tok.encode_src([text])[0] if (text := normalize(s)) else []
        tgt = tok.encode_tgt([text])[0] if (text := normalize(t)) else []
        if src and tgt and max(len(src), len(tgt)) <= (max_len or len(src) + len(tgt)):
            pairs.append((src, tgt, k))
    guide = None if links is None else guidance(links, tok)
    choice = choice or AttentionChoice()
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
                loss = batch_loss(adapting, batch, how, guide, choice)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(adapting.parameters(), how.clip)
                optimizer.step()
                total += loss.item() * len(batch)
            log.info("adapting to %d pairs: epoch %d of %d, loss %.3f", len(pairs), epoch + 1, how.epochs,
                     total / len(pairs))  # fmt: skip
            if after_epoch is not None:
                with torch.random.fork_rng(devices=cuda):
                    after_epoch(epoch + 1, copy.deepcopy(adapting).eval())
    return adapting.eval()


@dataclass(frozen=True)
class Job:
    """One model to adapt to its pairs, the arguments of :func:`adapted`."""

    model: nn.Module
    tok: Tokenizer
    sources: list[str]
    targets: list[str]
    how: Adaptation
    links: list[Links] | None = None
    choice: AttentionChoice | None = None
    max_len: int | None = None

    def run(self) -> nn.Module:
        return adapted(self.model, self.tok, self.sources, self.targets, self.how, self.links, self.choice,
                       max_len=self.max_len)  # fmt: skip


def adapted_together(jobs: list[Job]) -> list[nn.Module]:
    """Each job's model adapted (:func:`adapted`), at the same time where the machine has the threads: the first
    here, each other in a Python process of its own (``python -m nmt.inference.adaptation``), the threads shared
    between them (a pair of models adapts in about the time one takes where there are cores for both: small batches
    keep two threads of one model half idle). Each process seeds its own draws, so the models are those that
    adapting them one after the other with as many threads each gives."""
    threads = torch.get_num_threads()
    share = threads // len(jobs)
    on_cpu = all(isinstance(j.model, Seq2Seq) and next(j.model.parameters()).device.type == "cpu" for j in jobs)
    if len(jobs) == 1 or share < 1 or not on_cpu:  # one at a time (adapted refuses a model it cannot train)
        return [job.run() for job in jobs]
    with tempfile.TemporaryDirectory(prefix="adapting-") as tmp:
        children = []
        for k, job in enumerate(jobs[1:]):
            given, state = Path(tmp) / f"job{k}.pt", Path(tmp) / f"state{k}.pt"
            torch.save({"job": job, "threads": share}, given)
            cmd = [sys.executable, "-m", __name__, str(given), str(state)]
            children.append((subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), state))
        torch.set_num_threads(share)
        try:
            out = [jobs[0].run()]
        finally:
            torch.set_num_threads(threads)
        for job, (child, state) in zip(jobs[1:], children):
            _, err = child.communicate()
            if child.returncode != 0:
                last = (err.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
                raise RuntimeError(f"adapting a model in a process of its own failed: {last}")
            model = copy.deepcopy(job.model)
            model.load_state_dict(torch.load(state, weights_only=True))
            out.append(model.eval())
    return out


def batch_loss(
    model: Seq2Seq,
    batch: list[tuple[list[int], list[int], int]],
    how: Adaptation,
    guide: TrainingLinks | None,
    choice: AttentionChoice,
) -> torch.Tensor:
    """The translation loss of a batch of (source pieces, target pieces, pair index), plus with ``guide`` the
    guided-alignment term of the attention ``choice`` reads."""
    device = next(model.parameters()).device
    src, tgt = [s for s, _, _ in batch], [t for _, t, _ in batch]
    tgt_out = pad(tgt, eos=True)  # (B, T): target + EOS
    loss, _, _, cross = model.loss(
        pad(src).to(device),
        torch.tensor([len(s) for s in src], device=device),
        pad(tgt, bos=True).to(device),  # (B, T): BOS + target
        tgt_out.to(device),
        how.label_smoothing,
        need_weights=guide is not None,
        full_context=choice.context == "full",
    )
    if guide is None:
        return loss
    shape = (len(batch), tgt_out.shape[1], max(map(len, src)))  # (B, T, S)
    pieces = [np.asarray(x) for x in src], [np.asarray(x) for x in tgt]
    target = guide.targets(
        np.array([k for _, _, k in batch]), *pieces, shape, [slice(b, b + 1) for b in range(len(batch))]
    )
    return loss + how.align_weight * guided_alignment_loss(attention_map(cross, choice), target.to(device))


def guidance(links: list[Links], tok: Tokenizer) -> TrainingLinks:
    """Pair k's links as the guided-alignment targets of training read them (``TrainingLinks``)."""
    ordered = [sorted(x) for x in links]
    offsets = np.cumsum([0, *map(len, ordered)])
    src = np.array([i for x in ordered for i, _ in x], np.int64)
    tgt = np.array([j for x in ordered for _, j in x], np.int64)
    return TrainingLinks(offsets, src, tgt, word_starts(tok))


if __name__ == "__main__":  # adapted_together's other processes: adapt the job of file argv[1], its weights to argv[2]
    given = torch.load(sys.argv[1], weights_only=False)  # written by adapted_together, not a user's file
    torch.set_num_threads(given["threads"])
    torch.save(given["job"].run().state_dict(), sys.argv[2])
