"""The contract of a model part: what :class:`~nmt.models.seq2seq.Seq2Seq`, search and the views use of an encoder
and of a decoder, as Protocols that :func:`~nmt.models.seq2seq.build_part` holds each part it builds to
(:func:`lacking`). Optional members (a decoder's ``full_context``, learned positions' ``embed.position_limit``,
``python_loops``) are read with ``getattr`` and are not part of the contract."""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from torch import Tensor, nn

from nmt.models.attention import AttentionLayout
from nmt.models.decoders import State


@runtime_checkable
class EncoderPart(Protocol):
    """An encoder: ``src`` ``(B, S)`` ids padded with PAD and ``src_len`` ``(B,)`` -> states ``(B, S, D)`` and a
    summary ``(B, D)``, ``D`` its ``output_size``; ``host_len``, the lengths on the CPU where the caller has them
    (a training batch), else None. It reads a batch of empty sources (``S == 0``)."""

    embedding: nn.Embedding  # its padding row is kept zero; shared with the decoder's by model.share_embeddings
    output_size: int  # D, the decoder's enc_size

    def forward(self, src: Tensor, src_len: Tensor, host_len: Tensor | None = None) -> tuple[Tensor, Tensor]: ...


@runtime_checkable
class DecoderPart(Protocol):
    """An attention decoder. Features are ``(B, T, F)`` teacher-forced and ``(B, F)`` a step; ``readout`` maps them
    to the ``readout_size`` vector the output layer projects. Cross-attention is ``(B, layers, heads, T, S)``
    (a step's row ``(B, layers, heads, S)``), self-attention ``(B, layers, heads, T, T)`` or None; both None without
    ``need_weights``. ``step`` gives what ``forward`` gives at that position."""

    embedding: nn.Embedding
    readout: nn.Module
    readout_size: int
    attention_layout: AttentionLayout  # (layers, heads) of its cross-attention, stated without running

    def init_state(self, enc_states: Tensor, src_len: Tensor, enc_final: Tensor) -> State: ...

    def forward(
        self, tgt_in: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None, Tensor | None]: ...

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State, Tensor]: ...


def _positional(function) -> int:
    """How many arguments a method of a protocol is called with by position (``self`` aside)."""
    params = list(inspect.signature(function).parameters.values())[1:]
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def lacking(part: object, protocol: type) -> list[str]:
    """What ``part`` lacks of ``protocol``: each attribute it does not have, each method it does not have or that
    cannot be called with the protocol's positional arguments (e.g. ``forward(src, src_len, host_len)``)."""
    out = [f"the attribute {name}" for name in protocol.__annotations__ if not hasattr(part, name)]
    for name, function in vars(protocol).items():
        if name.startswith("_") or not inspect.isfunction(function):
            continue
        method = getattr(part, name, None)
        if not callable(method):
            out.append(f"the method {name}")
            continue
        try:
            inspect.signature(method).bind(*[None] * _positional(function))
        except TypeError:
            args = list(inspect.signature(function).parameters.values())[1:]  # as it is called: names, defaults
            shown = (a.name if a.default is a.empty else f"{a.name}={a.default!r}" for a in args)
            out.append(f"{name}({', '.join(shown)})")
        except ValueError:  # no signature to read (a builtin): taken on trust
            pass
    return out
