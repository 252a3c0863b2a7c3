"""What translates: one protocol that the PyTorch search and the CTranslate2 engine both satisfy (OpenNMT-py's
``InferenceEngine`` is the shape), so that ``Translator``, the aligner, the views and the server never ask which
one they hold."""

from __future__ import annotations

import logging
from typing import Protocol

import torch
from torch import Tensor, nn

from nmt.alignment.choice import AttentionChoice
from nmt.inference.search import Decodable, Hypothesis, SearchOptions, translate_batch
from nmt.models.attention import AttentionLayout

log = logging.getLogger(__name__)


class InferenceEngine(Protocol):
    """Searches, reads a given output (forced decoding) and says which attention it can return."""

    attention_layout: AttentionLayout  # (layers, heads) of the attention rows its hypotheses carry
    every_map: bool  # whether it returns every layer's and head's attention (an export returns one map)
    position_limit: int | None  # the longest sequence it encodes or decodes (None: any length)

    @property
    def device(self) -> torch.device:
        """Where its inputs go."""

    @property
    def module(self) -> nn.Module | None:
        """The PyTorch model behind it, which adaptation may train (None: it runs elsewhere)."""

    def translate_batch(self, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
        """Up to ``options.nbest`` hypotheses per sentence of ``src (B, S)``, best first."""

    def read(
        self, src: Tensor, src_len: Tensor, tokens: list[int], full_context: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``tokens`` read after ``src (1, S)``: log-probs ``(T + 1,)``, cross-attention ``(layers, heads, T + 1, S)``
        and the decoder's self-attention where it returns one."""

    def resolve(self, wanted: AttentionChoice, name: str = "--align-") -> AttentionChoice:
        """The choice to read its attention with for ``wanted``, or a ValueError naming ``name`` and what it has."""


class PyTorchEngine:
    """A ``Seq2Seq`` or an ``Ensemble`` searched by :func:`nmt.inference.search.translate_batch`."""

    every_map = True

    def __init__(self, model: Decodable):
        self.model = model.eval()
        self.attention_layout = model.attention_layout
        self.position_limit = getattr(model, "position_limit", None)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def module(self) -> nn.Module:
        return self.model

    def translate_batch(self, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
        return translate_batch(self.model, src, src_len, options)

    def read(
        self, src: Tensor, src_len: Tensor, tokens: list[int], full_context: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.model.read(src, src_len, tokens, **({"full_context": True} if full_context else {}))

    def resolve(self, wanted: AttentionChoice, name: str = "--align-") -> AttentionChoice:
        return wanted.check(*self.attention_layout, name=name)


def as_engine(model: InferenceEngine | Decodable) -> InferenceEngine:
    """``model`` as an engine: a PyTorch model (a ``Seq2Seq``, an ``Ensemble``) is run by :class:`PyTorchEngine`."""
    return PyTorchEngine(model) if isinstance(model, nn.Module) else model
