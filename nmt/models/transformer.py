"""The Transformer (Vaswani et al., 2017) built from :mod:`nmt.models.attention`: encoder and decoder stacks of
multi-head scaled dot-product attention, with the decoder API of :mod:`nmt.models.decoders`.

Pre-norm with a final layer norm by default (``norm: post`` for the paper's post-norm), sinusoidal
positions (``positions: learned`` for learned ones), embeddings scaled by ``sqrt(d_model)``; ``emb_size``
is ``d_model``. Training runs every position at once under a look-ahead mask through the fused attention
kernel; the weights path runs only when attention is asked for. One step of decoding reads the cached keys
and values of every layer's self-attention (one new position per step: O(t), not O(t^2)) and the encoder's
keys and values, projected once per sentence.

Attention comes back per layer and head: cross ``(B, layers, heads, T, S)``, self ``(B, layers, heads, T, T)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Literal, get_args

import torch
from torch import Tensor, nn

from nmt.bounds import FRACTION, HEADS, LAYERS, POSITIONS, SIZE
from nmt.models import cache
from nmt.models.attention import AttentionLayout, DotProductAttention, length_mask, merge_heads, split_heads
from nmt.models.dropout import Dropout

# The words of model.*.norm (layer norm before each sublayer and a final one, or after: the paper's) and of
# model.*.positions (fixed sinusoids, or a learned table of max_positions); train.py checks them from these hints
Norm, Positions = Literal["pre", "post"], Literal["sinusoidal", "learned"]
NORMS, POSITION_KINDS = get_args(Norm), get_args(Positions)

State = dict[str, Tensor]


class MultiHeadAttention(nn.Module):
    """Queries from ``x``, keys and values from ``memory`` (projected by :meth:`keys_values`, which a decoder
    caches), ``heads`` heads of :class:`~nmt.models.attention.DotProductAttention` and an output projection."""

    def __init__(self, d_model: int, heads: int, dropout: float, memory_size: int | None = None):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(memory_size or d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.attention = DotProductAttention(dropout)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """``(B, S, D_mem)`` -> keys and values ``(B, heads, S, D / heads)`` each."""
        k, v = self.kv_proj(memory).chunk(2, dim=-1)
        return split_heads(k, self.heads), split_heads(v, self.heads)

    def forward(
        self,
        x: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """``x (B, T, D)`` -> ``(B, T, D)`` and, with ``need_weights``, the weights ``(B, heads, T, S)``; ``mask``:
        boolean, broadcastable to ``(B, heads, T, S)`` (:func:`key_mask`); ``causal``: under the look-ahead mask."""
        q = split_heads(self.q_proj(x), self.heads)  # (B, heads, T, D / heads)
        context, weights = self.attention(q, keys, values, attn_mask=mask, need_weights=need_weights, causal=causal)
        return self.out_proj(merge_heads(context)), weights


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, ff_size: int, dropout: float):
        super().__init__(nn.Linear(d_model, ff_size), nn.ReLU(), Dropout(dropout), nn.Linear(ff_size, d_model))

    def forward(self, x: Tensor) -> Tensor:
        first, _, dropout, second = self  # ReLU and dropout in one step (Dropout.after_relu)
        return second(dropout.after_relu(first(x)))


class Sublayer(nn.Module):
    """A residual block around ``fn``: ``x + drop(fn(norm(x)))`` (pre-norm) or ``norm(x + drop(fn(x)))`` (post)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def forward(self, x: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


class Embedding(nn.Module):
    """Token embeddings scaled by ``sqrt(d)``, plus sinusoidal or learned positions, then dropout."""

    def __init__(
        self, vocab_size: int, d_model: int, pad_id: int, dropout: float, positions: Positions, max_positions: int
    ):
        super().__init__()
        if positions not in POSITION_KINDS:
            raise ValueError(f"model positions={positions!r}: must be {' or '.join(POSITION_KINDS)}")
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)  # scaled by sqrt(d) below: unit variance
        self.learned = nn.Embedding(max_positions, d_model) if positions == "learned" else None
        self.dropout, self.scale, self.max_positions = Dropout(dropout), math.sqrt(d_model), max_positions
        # sinusoids of the first max_positions positions, computed once (not saved); grown past them where needed
        self.register_buffer("sinusoids", sinusoids(max_positions, d_model, torch.device("cpu")), persistent=False)
        self._retired: list[Tensor] = []  # tables grown out of: a captured CUDA graph may still read one

    @property
    def position_limit(self) -> int | None:
        """How many positions it encodes: ``max_positions`` learned ones, or any number of sinusoidal ones (None)."""
        return None if self.learned is None else self.max_positions

    def positions(self, start: int, length: int, device: torch.device) -> Tensor:
        """``(length, d)`` encodings of positions ``start .. start + length - 1``."""
        if self.learned is not None:
            if start + length > self.max_positions:
                raise ValueError(
                    f"position {start + length - 1} is beyond model max_positions={self.max_positions} (learned)"
                )
            return self.learned.weight[start : start + length]
        if start + length > len(self.sinusoids) or self.sinusoids.device != device:  # a batch costs a slice, no op
            self._retired.append(self.sinusoids)
            rows = max(start + length, 2 * len(self.sinusoids))
            self.sinusoids = sinusoids(rows, self.embedding.embedding_dim, device)
        return self.sinusoids[start : start + length]

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        """``(B, T)`` ids at positions ``start ..`` -> ``(B, T, d)``."""
        x = self.embedding(tokens) * self.scale
        return self.dropout(x + self.positions(start, tokens.shape[1], tokens.device).to(x.dtype))


def sinusoids(length: int, d: int, device: torch.device) -> Tensor:
    """``(length, d)`` sinusoidal encodings of positions ``0 .. length - 1`` (Vaswani et al., 2017, section 3.5)."""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)  # (L, 1)
    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / d))
    table = torch.zeros(length, d, device=device)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return table


def autocast_once(x: Tensor) -> Tensor:
    """``x`` in autocast's lower precision where autocast is on: one cast for the several products that read ``x``
    (autocast would cast it again for each, forward and backward), none where it is off."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind) and x.dtype == torch.float32:
        return x.to(torch.get_autocast_dtype(kind))
    return x


def key_mask(lengths: Tensor, keys: int) -> Tensor:
    """``(B, 1, 1, keys)`` boolean, True where the key is below the row's length: one mask a batch, broadcast over
    heads and queries by every layer."""
    return length_mask(lengths, keys)[:, None, None, :]


def _check_sizes(d_model: int, heads: int, norm: Norm) -> None:
    if d_model % heads:
        raise ValueError(f"model.emb_size={d_model} (d_model) must be a multiple of the heads ({heads})")
    if norm not in NORMS:
        raise ValueError(f"model norm={norm!r}: must be {' or '.join(NORMS)}")


def _init_linear(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ff_size: int, dropout: float, attention_dropout: float, pre: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ff = FeedForward(d_model, ff_size, dropout)
        self.sub_attn, self.sub_ff = Sublayer(d_model, dropout, pre), Sublayer(d_model, dropout, pre)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """``x (B, S, D)``, ``mask (B, 1, 1, S)`` (:func:`key_mask`)."""

        def attend(h: Tensor) -> Tensor:
            h = autocast_once(h)  # queries, keys and values read the same h
            return self.self_attn(h, *self.self_attn.keys_values(h), mask=mask)[0]

        x = self.sub_attn(x, attend)
        return self.sub_ff(x, self.ff)


class TransformerEncoder(nn.Module):
    """``(src, src_len)`` -> states ``(B, S, d_model)`` and their mean over real positions ``(B, d_model)``."""

    capturable = True  # a training step's ops depend on the batch's shape alone (nmt.training.graphs)
    each_layer_once = True  # a training pass applies each linear layer once (nmt.models.precision.CastWeights)

    def __init__(
        self,
        *,
        vocab_size: int,
        emb_size: int,
        dropout: float,
        pad_id: int,
        num_layers: Annotated[int, LAYERS],
        heads: Annotated[int, HEADS],
        ff_size: Annotated[int, SIZE],
        attention_dropout: Annotated[float, FRACTION] = 0.1,
        norm: Norm = "pre",
        positions: Positions = "sinusoidal",
        max_positions: Annotated[int, POSITIONS] = 1024,
    ):
        super().__init__()
        _check_sizes(emb_size, heads, norm)
        self.embed = Embedding(vocab_size, emb_size, pad_id, dropout, positions, max_positions)
        pre = norm == "pre"
        self.layers = nn.ModuleList(
            EncoderLayer(emb_size, heads, ff_size, dropout, attention_dropout, pre) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(emb_size) if pre else nn.Identity()
        self.output_size = emb_size
        _init_linear(self)

    @property
    def embedding(self) -> nn.Embedding:
        return self.embed.embedding

    def forward(self, src: Tensor, src_len: Tensor, host_len: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """States ``(B, S, D)`` and their mean over real positions ``(B, D)``; ``host_len`` (the encoders' protocol:
        lengths on the host, for an encoder that packs) is not needed here."""
        S = src.shape[1]
        if S == 0:  # every source empty: one padding position, which nothing attends to
            src = src.new_full((src.shape[0], 1), self.embedding.padding_idx)
        x = self.embed(src)  # (B, S, D)
        mask = key_mask(src_len, x.shape[1])  # (B, 1, 1, S)
        for layer in self.layers:
            x = layer(x, mask)
        x = self.final_norm(x)[:, :S]  # (B, S, D)
        real = mask.flatten(1)[:, :S].unsqueeze(-1)  # (B, S, 1)
        final = (x * real).sum(1) / src_len.clamp(min=1).unsqueeze(1).to(x.dtype)  # (B, D)
        return x, final


class DecoderLayer(nn.Module):
    def __init__(
        self, d_model: int, enc_size: int, heads: int, ff_size: int, dropout: float, attention_dropout: float, pre: bool
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, attention_dropout, memory_size=enc_size)
        self.ff = FeedForward(d_model, ff_size, dropout)
        self.sub_self, self.sub_cross, self.sub_ff = (Sublayer(d_model, dropout, pre) for _ in range(3))

    def forward(
        self,
        x: Tensor,
        past: tuple[Tensor, Tensor, int] | None,
        memory: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need: bool,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``x (B, T, D)``; ``past``: the self-attention key and value caches ``(B, heads, room, d)`` and the ``t``
        positions in use; this call's keys and values are written after them, in place (None: ``x`` is the whole
        target, under the look-ahead mask, or with ``tgt_mask (B, 1, 1, T)`` seeing all of its real positions: the full
        context); ``src_mask (B, 1, 1, S)`` the source's (:func:`key_mask`). Returns the output and with ``need`` the
        cross ``(B, heads, T, S)`` and self ``(B, heads, T, t + T)`` weights."""
        weights: dict[str, Tensor | None] = {}

        def attend_self(h: Tensor) -> Tensor:
            h = autocast_once(h)  # queries, keys and values read the same h
            k, v = self.self_attn.keys_values(h)
            causal = past is None and tgt_mask is None  # the whole target under the look-ahead mask
            if past is not None:
                (k_cache, v_cache, t), end = past, past[2] + h.shape[1]
                k_cache[:, :, t:end], v_cache[:, :, t:end] = k, v
                k, v = k_cache[:, :, :end], v_cache[:, :, :end]
            out, weights["self"] = self.self_attn(h, k, v, mask=tgt_mask, need_weights=need, causal=causal)
            return out

        def attend_cross(h: Tensor) -> Tensor:
            out, weights["cross"] = self.cross_attn(h, *memory, mask=src_mask, need_weights=need)
            return out

        x = self.sub_self(x, attend_self)
        x = self.sub_cross(x, attend_cross)
        return self.sub_ff(x, self.ff), weights["cross"], weights["self"]


class TransformerDecoder(nn.Module):
    """Decoder stack with the API of :mod:`nmt.models.decoders`: ``init_state``, teacher-forced ``forward``, ``step``,
    ``readout`` (the final layer norm of pre-norm) and ``readout_size`` (``d_model``).

    State: ``src_len``, its mask ``src_mask (B, 1, 1, S)`` (made once a batch), the encoder's keys and values of each
    layer ``i``, ``cross_k{i}``/``cross_v{i}`` ``(B, heads, S, d)`` (one projection each, nothing stacked and selected
    again), and the self-attention cache ``self_k``/``self_v`` ``(B, layers, heads, room, d)`` of which the first
    ``length`` positions are decoded (batch-first, so beam search reorders it like any state; appended to in place).

    ``forward(..., full_context=True)`` runs the whole target without the look-ahead mask (each position sees every
    real target position): the "full context" pass whose attention Garg et al. (2019) align with, never a translation.
    """

    full_context = True  # forward can see the whole target
    capturable = True  # a training step's ops depend on the batch's shape alone (nmt.training.graphs)
    each_layer_once = True  # a training pass applies each linear layer once (nmt.models.precision.CastWeights)

    def __init__(
        self,
        *,
        vocab_size: int,
        emb_size: int,
        enc_size: int,
        dropout: float,
        pad_id: int,
        num_layers: Annotated[int, LAYERS],
        heads: Annotated[int, HEADS],
        ff_size: Annotated[int, SIZE],
        attention_dropout: Annotated[float, FRACTION] = 0.1,
        norm: Norm = "pre",
        positions: Positions = "sinusoidal",
        max_positions: Annotated[int, POSITIONS] = 1024,
    ):
        super().__init__()
        _check_sizes(emb_size, heads, norm)
        self.embed = Embedding(vocab_size, emb_size, pad_id, dropout, positions, max_positions)
        pre = norm == "pre"
        self.layers = nn.ModuleList(
            DecoderLayer(emb_size, enc_size, heads, ff_size, dropout, attention_dropout, pre) for _ in range(num_layers)
        )
        self.readout = nn.LayerNorm(emb_size) if pre else nn.Identity()
        self.readout_size, self.heads = emb_size, heads
        _init_linear(self)

    @property
    def attention_layout(self) -> AttentionLayout:
        return AttentionLayout(len(self.layers), self.heads)

    @property
    def embedding(self) -> nn.Embedding:
        return self.embed.embedding

    def init_state(self, enc_states: Tensor, src_len: Tensor, enc_final: Tensor) -> State:
        memory = autocast_once(enc_states)  # every layer's keys and values read the same states
        B, d = enc_states.shape[0], self.readout_size // self.heads
        empty = enc_states.new_zeros(B, len(self.layers), self.heads, 0, d)
        state = {
            "src_len": src_len,
            "src_mask": key_mask(src_len, enc_states.shape[1]),  # an empty source: all-zero attention rows and context
            "self_k": empty,
            "self_v": empty,
            "length": src_len.new_zeros(B),
        }
        for i, layer in enumerate(self.layers):
            state[f"cross_k{i}"], state[f"cross_v{i}"] = layer.cross_attn.keys_values(memory)  # (B, heads, S, d) each
        return state

    def _run(
        self, x: Tensor, state: State, t: int | None, need: bool, tgt_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``t``: positions already in the state's caches (None: ``x`` is the whole target, teacher-forced; with
        ``tgt_mask (B, 1, 1, T)``, its real positions, seen whole)."""
        cross, self_w = [], []
        for i, layer in enumerate(self.layers):
            past = None if t is None else (state["self_k"][:, i], state["self_v"][:, i], t)  # views: written in place
            memory = (state[f"cross_k{i}"], state[f"cross_v{i}"])
            x, c, s = layer(x, past, memory, state["src_mask"], need, tgt_mask)
            cross.append(c)
            self_w.append(s)
        if not need:
            return x, None, None
        return x, torch.stack(cross, 1), torch.stack(self_w, 1)  # (B, layers, heads, T, S | t + T)

    def forward(
        self, tgt_in: Tensor, state: State, need_weights: bool = True, full_context: bool = False
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        # the full context: every real target position (BOS and the words) seen from every other
        tgt_mask = (tgt_in != self.embedding.padding_idx)[:, None, None, :] if full_context else None  # (B, 1, 1, T)
        return self._run(self.embed(tgt_in), state, t=None, need=need_weights, tgt_mask=tgt_mask)

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State, Tensor]:
        t = cache.decoded(state)
        x = self.embed(prev_tokens.unsqueeze(1), start=t)  # (B, 1, D)
        B, L, H, _, d = state["self_k"].shape
        blank = x.new_zeros(B, L, H, 1, d)  # room for this position in every layer's cache; the layers fill it
        state = {
            **state,
            "self_k": cache.append(state["self_k"], t, blank, dim=3),
            "self_v": cache.append(state["self_v"], t, blank, dim=3),
            "length": state["length"] + 1,
        }
        x, cross, _ = self._run(x, state, t=t, need=True)
        return x.squeeze(1), state, cross[:, :, :, 0]  # (B, D), state, (B, layers, heads, S)
