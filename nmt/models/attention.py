"""Attention scoring: masked softmax, additive (Bahdanau) and scaled dot-product attention.

Masks follow one convention: boolean, ``True`` means "may attend". Masked scores get the
dtype's most negative finite value (fp16/bf16 safe) and a row with nothing to attend to
gets all-zero weights, never NaN.

Which fused kernel (flash, efficient, cuDNN, math) runs ``scaled_dot_product_attention`` here is not chosen in this
module: ``nmt.hardware.Kernels`` sets torch's state from ``kernels.attention`` (training applies it around every
step, the commands for the process), and on a CPU ``nmt.training.precision_auto.cpu_attention`` measures which is
faster.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.models.dropout import Dropout


class AttentionLayout(NamedTuple):
    """A model's cross-attention as alignments read it: ``layers`` of ``heads`` each (what an attention choice can
    name). Every model states it without running (``model.attention_layout``)."""

    layers: int
    heads: int


def length_mask(valid_lens: Tensor, max_len: int) -> Tensor:
    """``(..., max_len)`` boolean mask, True where the position is below the valid length."""
    return torch.arange(max_len, device=valid_lens.device) < valid_lens.unsqueeze(-1)


def causal_mask(size: int, device: torch.device | None = None) -> Tensor:
    """``(size, size)`` look-ahead mask: query ``t`` may attend to keys ``0..t``."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def attention_mask(
    scores_shape: torch.Size, valid_lens: Tensor | None = None, mask: Tensor | None = None
) -> Tensor | None:
    """One boolean mask broadcastable to ``scores_shape`` from valid lengths and/or a mask.

    ``valid_lens`` is ``(B,)`` (one per batch row, repeated over queries and heads) or
    ``(B, Q)`` (one per query); scores are ``(B, Q, K)`` or ``(B, H, Q, K)``. ``mask`` must be
    boolean, True = may attend (not the 1 = masked, or additive float, masks of other code).
    """
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention masks must be boolean, True = may attend; got a {mask.dtype} mask")
    if valid_lens is not None:
        lens = valid_lens
        if lens.dim() == 1:  # (B,) -> (B, 1, ..., 1)
            lens = lens.view(-1, *([1] * (len(scores_shape) - 2)))
        elif len(scores_shape) == 4:  # (B, Q) -> (B, 1, Q)
            lens = lens.unsqueeze(1)
        lm = length_mask(lens, scores_shape[-1])
        mask = lm if mask is None else mask & lm
    return mask


def masked_softmax(scores: Tensor, valid_lens: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last axis that ignores positions beyond ``valid_lens`` or where ``mask`` is False.

    d2l.ai semantics for ``valid_lens``; does not modify ``scores``.
    """
    mask = attention_mask(scores.shape, valid_lens, mask)
    if mask is None:
        return F.softmax(scores, dim=-1)
    weights = F.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
    # a row without any valid position would be uniform here: make it zero
    return weights * mask


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``(B, T, D)`` -> ``(B, heads, T, D / heads)``."""
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).transpose(1, 2)  # (B, heads, T, D/heads)


def merge_heads(x: Tensor) -> Tensor:
    """``(B, heads, T, d)`` -> ``(B, T, heads * d)``, the inverse of :func:`split_heads`."""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)  # (B, T, heads * d)


class AdditiveAttention(nn.Module):
    """``w_v^T tanh(W_q q + W_k k)`` (Bahdanau et al., 2014), no biases.

    ``project_keys`` lets a decoder compute ``W_k k`` once per source sentence and pass it
    as ``keys`` with ``keys_projected=True`` at every step.
    """

    def __init__(self, query_size: int, key_size: int, num_hiddens: int, dropout: float = 0.0):
        super().__init__()
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = Dropout(dropout)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.W_k(keys)

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        keys_projected: bool = False,
    ) -> tuple[Tensor, Tensor]:
        q = self.W_q(queries)  # (B, Q, h)
        k = keys if keys_projected else self.W_k(keys)  # (B, K, h)
        features = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (B, Q, K, h)
        scores = self.w_v(features).squeeze(-1)  # (B, Q, K)
        weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(weights), values), weights  # (B, Q, V), (B, Q, K)


class DotProductAttention(nn.Module):
    """``softmax(Q K^T / sqrt(d)) V`` for ``(B, Q, d)`` or multi-head ``(B, H, Q, d)`` inputs.

    With ``query_size``/``key_size`` given and ``project=True`` (or the sizes differing),
    queries go through a learned ``M`` first: the score is ``q^T M k`` (Luong's "general").
    ``valid_lens`` masks keys by length; ``attn_mask`` (``(Q, K)`` or broadcastable, True = may attend) masks any
    pattern; ``causal`` is the look-ahead mask (query ``t`` sees keys ``0..t``), which the fused kernel applies
    itself, so that a flash kernel (which takes no mask) can serve it. With ``need_weights=False`` the fused
    ``scaled_dot_product_attention`` kernel computes the same context and weights are None (except while training
    on a CPU with dropout, where the kernel's own Bernoulli masks cost more than ``Dropout``'s and differ compiled).
    """

    def __init__(
        self,
        dropout: float = 0.0,
        scale: bool = True,
        query_size: int | None = None,
        key_size: int | None = None,
        project: bool = False,
    ):
        super().__init__()
        self.dropout_p = dropout
        self.dropout = Dropout(dropout)
        self.scale = scale
        need = query_size is not None and key_size is not None and (project or query_size != key_size)
        self.M = nn.Linear(query_size, key_size, bias=False) if need else None

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None = None,
        attn_mask: Tensor | None = None,
        need_weights: bool = True,
        causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if self.M is not None:
            queries = self.M(queries)
        d = queries.shape[-1]
        scale = 1.0 / math.sqrt(d) if self.scale else 1.0
        shape = torch.Size([*queries.shape[:-1], keys.shape[-2]])  # (B, [H,] Q, K)
        mask = attention_mask(shape, valid_lens, attn_mask)
        fused = not need_weights and not self.dropout.draws_masks(queries)  # dropout on a CPU: masks of our own
        if causal and (mask is not None or not fused):  # the kernel takes is_causal or a mask, not both
            look_ahead = causal_mask(shape[-1], queries.device)[: shape[-2]]  # (Q, K)
            mask, causal = look_ahead if mask is None else mask & look_ahead, False
        if fused:
            p = self.dropout_p if self.training else 0.0
            context = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=mask, dropout_p=p, is_causal=causal, scale=scale
            )
            return context, None
        scores = torch.matmul(queries, keys.transpose(-2, -1)) * scale  # (B, [H,] Q, K)
        weights = masked_softmax(scores, mask=mask)
        return torch.matmul(self.dropout(weights), values), weights if need_weights else None
