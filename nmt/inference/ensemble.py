"""Several trained models decoding as one: at every step the members' log-probabilities are averaged.

``Ensemble`` has the one-step API of ``Seq2Seq`` (``encode``, ``step``, ``reorder_state``, ``read``), so
greedy and beam search, ``Translator`` and ``translate.py`` use it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from nmt import checkpoint
from nmt.alignment.choice import DEFAULT_CHOICE, AttentionChoice, attention_map
from nmt.data.tokenizer import Tokenizer
from nmt.models.attention import AttentionLayout
from nmt.models.decoders import State
from nmt.models.seq2seq import Seq2Seq


class Ensemble(nn.Module):
    """Members that share both vocabularies. Members may differ in layers and heads, so the ensemble's attention
    is one layer of one head ``(B, 1, 1, ...)``: the mean of the members'
    :func:`~nmt.alignment.choice.attention_map`."""

    attention_layout = AttentionLayout(1, 1)

    def __init__(self, members: Sequence[Seq2Seq]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(members)

    @property
    def position_limit(self) -> int | None:
        """The smallest of its members' (None: no member has one)."""
        return min((n for m in self.members if (n := m.position_limit) is not None), default=None)

    def encode(self, src: Tensor, src_len: Tensor) -> State:
        # one flat dict of batch-first tensors, "<member>/<key>", so reorder_state treats it like any state
        return {f"{m}/{k}": v for m, model in enumerate(self.members) for k, v in model.encode(src, src_len).items()}

    def _member_state(self, state: State, m: int) -> State:
        prefix = f"{m}/"
        return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}

    def step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        logps, rows, new = [], [], {}
        for m, model in enumerate(self.members):
            logp, member_state, row = model.step(self._member_state(state, m), prev_tokens)
            logps.append(logp)
            rows.append(attention_map(row.unsqueeze(-2)))  # (B, L, H, S) -> (B, 1, S)
            new |= {f"{m}/{k}": v for k, v in member_state.items()}
        return torch.stack(logps).mean(0), new, torch.stack(rows).mean(0)[:, None, None, 0]  # (B, V), (B, 1, 1, S)

    reorder_state = staticmethod(Seq2Seq.reorder_state)

    @torch.inference_mode()
    def read(self, src: Tensor, src_len: Tensor, tokens: list[int]) -> tuple[Tensor, Tensor, None]:
        """Teacher-forced, as ``Seq2Seq.read``: the members' mean log-probs and cross-attention (no self-attention)."""
        reads = [model.read(src, src_len, tokens) for model in self.members]
        cross = torch.stack([attention_map(r[1]) for r in reads]).mean(0)  # (T + 1, S)
        return torch.stack([r[0] for r in reads]).mean(0), cross[None, None], None


def load_ensemble(
    paths: Sequence[str | Path], device: str | torch.device = "cpu"
) -> tuple[nn.Module, Tokenizer, AttentionChoice]:
    """The model of one checkpoint, or the ensemble of several (:func:`assemble`)."""
    return assemble(load_members(paths, device))


def load_members(paths: Sequence[str | Path], device: str | torch.device = "cpu") -> list[checkpoint.Loaded]:
    """Each checkpoint's model, checked to translate the way the first one does, with its sentencepiece models."""
    loaded = [checkpoint.load_checkpoint(p, device) for p in paths]
    first = loaded[0]
    for member in loaded[1:]:
        if member.checkpoint.languages != first.checkpoint.languages:
            ways = [f"{m.path} translates {'→'.join(m.checkpoint.languages)}" for m in (first, member)]
            raise checkpoint.CheckpointError(f"{' but '.join(ways)}: the members of an ensemble translate one way")
        checkpoint.check_vocabularies(
            member.path,
            member.checkpoint.tokenizer_state,
            first.path,
            first.checkpoint.tokenizer_state,
            "the members of an ensemble must share their sentencepiece models (train them on one data config)",
        )
    return loaded


def assemble(loaded: Sequence[checkpoint.Loaded]) -> tuple[nn.Module, Tokenizer, AttentionChoice]:
    """One model, or the ensemble of several, the sentencepiece models they share, and the attention alignments
    read: the one checkpoint's recorded choice; an ensemble's members' last-layer head means (members may differ
    in layers and heads)."""
    first = loaded[0]
    model = first.model if len(loaded) == 1 else Ensemble([m.model for m in loaded]).eval()
    return model, first.tokenizer, recorded_choice(loaded)


def recorded_choice(loaded: Sequence[checkpoint.Loaded]) -> AttentionChoice:
    """What alignments read: the one checkpoint's recorded choice, or for an ensemble the default."""
    return loaded[0].checkpoint.alignment if len(loaded) == 1 else DEFAULT_CHOICE
