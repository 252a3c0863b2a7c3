"""Several trained models decoding as one: at every step the members' log-probabilities are averaged.

``Ensemble`` has the one-step API of ``Seq2Seq`` (``encode``, ``step``, ``reorder_state``, ``read``), so
greedy and beam search, ``Translator`` and ``translate.py`` use it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .data.tokenizer import Tokenizer
from .decoders import State
from .seq2seq import Seq2Seq


class Ensemble(nn.Module):
    """Members that share both vocabularies; attention rows are the members' mean."""

    def __init__(self, members: Sequence[Seq2Seq]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(members)

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
            rows.append(row.float())
            new |= {f"{m}/{k}": v for k, v in member_state.items()}
        return torch.stack(logps).mean(0), new, torch.stack(rows).mean(0)  # (B, V), (B, S)

    reorder_state = staticmethod(Seq2Seq.reorder_state)

    @torch.inference_mode()
    def read(self, src: Tensor, src_len: Tensor, tokens: list[int]) -> tuple[Tensor, Tensor, None]:
        """Teacher-forced, as ``Seq2Seq.read``: the members' mean log-probs and cross-attention (no self-attention)."""
        reads = [model.read(src, src_len, tokens) for model in self.members]
        return torch.stack([r[0] for r in reads]).mean(0), torch.stack([r[1] for r in reads]).mean(0), None


def load(paths: Sequence[str], device: str | torch.device = "cpu") -> tuple[nn.Module, Tokenizer]:
    """The model of one checkpoint, or the ensemble of several, and the sentencepiece models they share."""
    from .module import TranslationModule

    modules = [TranslationModule.from_checkpoint(p, device) for p in paths]
    check_shared(paths, [m.tokenizer for m in modules])
    if len(modules) == 1:
        return modules[0].model, modules[0].tokenizer
    return Ensemble([m.model for m in modules]).eval(), modules[0].tokenizer


def check_shared(paths: Sequence[str], tokenizers: Sequence[Tokenizer]) -> None:
    """Raise a CheckpointError naming the first member whose sentencepiece models differ from the first one's."""
    from .module import CheckpointError

    first = tokenizers[0]
    for path, tok in zip(paths[1:], tokenizers[1:]):
        for side, mine, theirs in (
            ("target", first.tgt_bytes, tok.tgt_bytes),
            ("source", first.src_bytes, tok.src_bytes),
        ):
            if mine != theirs:
                raise CheckpointError(
                    f"{path}: another {side} vocabulary than {paths[0]}: "
                    "the members of an ensemble must share their sentencepiece models (train them on one data config)"
                )
