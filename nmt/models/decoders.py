"""Attention decoders with a teacher-forced ``forward`` and a one-step ``step``.

Both return *features* per target position, which the decoder's ``readout`` maps to the
vector the output layer projects to the vocabulary. Keeping the readout separate lets
training run it (and the output layer) on real target positions only.

State is a dict of batch-first tensors, so search can reorder any decoder's state alike.

Attention weights have one shape for every decoder, with room for layers and heads:
teacher-forced ``(B, layers, heads, T, S)`` (cross) and ``(B, layers, heads, T, T)`` (self),
one step ``(B, layers, heads, S)``. The RNN decoders have one layer of attention; Bahdanau's
has one head. :func:`nmt.alignment.choice.attention_map` reduces them to the ``(T, S)`` map that
alignments and heatmaps use.
"""

from __future__ import annotations

from typing import Annotated

import torch
from torch import Tensor, nn

from nmt.bounds import HEADS, LAYERS, SIZE
from nmt.models import cache, precision
from nmt.models.attention import (
    AdditiveAttention,
    AttentionLayout,
    DotProductAttention,
    merge_heads,
    split_heads,
)
from nmt.models.dropout import Dropout

State = dict[str, Tensor]


class BahdanauDecoder(nn.Module):
    """GRU decoder with additive attention, in the d2l.ai / Nematus form of Bahdanau et al. (2014).

    At step t the previous state ``s_{t-1}`` queries the encoder states; the context ``c_t``
    and the previous target embedding ``e_{t-1}`` feed the GRU, giving ``s_t``. Two choices
    differ from the paper's §3.1 and appendix A: the readout is ``tanh(W [s_t; c_t; e_{t-1}])``
    from the *new* state (the paper uses ``s_{t-1}`` and a maxout layer), and the initial state
    is bridged from both directions' final states (the paper uses the backward one only). The
    recurrence is sequential, so ``forward`` loops over time, but the embedding part of the
    GRU input is computed for all steps at once.
    """

    attention_layout = AttentionLayout(1, 1)
    # compiled (nmt.training.compiled), ``forward``'s loop over time stays in Python and each step's ``_cell`` is one
    # graph, compiled once for every batch: traced whole, the loop would be unrolled T times, a graph per target length
    python_loops = ("forward",)

    def __init__(
        self,
        *,
        vocab_size: int,
        emb_size: int,
        enc_size: int,
        readout_size: int,
        dropout: float,
        pad_id: int,
        hidden_size: Annotated[int, SIZE],
        attn_hidden: Annotated[int, SIZE],
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.bridge = nn.Linear(enc_size, hidden_size)
        self.attention = AdditiveAttention(hidden_size, enc_size, attn_hidden, dropout=0.0)
        # GRU cell written out so that the embedding part of its input is one matmul for all steps
        self.W_emb = nn.Linear(emb_size, 3 * hidden_size)
        self.W_ctx = nn.Linear(enc_size, 3 * hidden_size, bias=False)
        self.W_hh = nn.Linear(hidden_size, 3 * hidden_size)
        self.readout = nn.Sequential(
            nn.Linear(hidden_size + enc_size + emb_size, readout_size), nn.Tanh(), Dropout(dropout)
        )
        self.hidden_size, self.readout_size = hidden_size, readout_size

    def init_state(self, enc_states: Tensor, src_len: Tensor, enc_final: Tensor) -> State:
        return {
            "h": precision.state(torch.tanh(self.bridge(enc_final))),  # (B, H), float32 under mixed precision
            "keys": self.attention.project_keys(enc_states),  # (B, S, A), projected once
            "values": enc_states,  # (B, S, 2H_enc)
            "src_len": src_len,
        }

    def _cell(self, state: State, gates_emb: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One step from ``s_{t-1}``: returns ``s_t``, ``c_t`` (B, 2H_enc) and the attention row (B, S)."""
        h = state["h"]
        context, weights = self.attention(
            h.unsqueeze(1), state["keys"], state["values"], state["src_len"], keys_projected=True
        )
        context, weights = context.squeeze(1), weights.squeeze(1)
        # the gates' products in autocast's dtype, their sums and the new state in the state's (float32 under mixed
        # precision: nmt.models.precision)
        gi = (gates_emb + self.W_ctx(context)).to(h.dtype)  # (B, 3H)
        gh = self.W_hh(h).to(h.dtype)
        i_r, i_z, i_n = gi.chunk(3, dim=-1)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h, context, weights

    def forward(self, tgt_in: Tensor, state: State, need_weights: bool = True) -> tuple[Tensor, Tensor | None, None]:
        emb = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        # unbind once: indexing [:, t] every step would zero-fill a (B, T, 3H) gradient per step in backward
        gates_emb = self.W_emb(emb).unbind(1)  # T x (B, 3H)
        state = dict(state)
        hs, contexts, rows = [], [], []
        for gates_t in gates_emb:
            h, context, weights = self._cell(state, gates_t)
            state["h"] = h
            hs.append(h)
            contexts.append(context)
            rows.append(weights)
        features = torch.cat([torch.stack(hs, 1), torch.stack(contexts, 1), emb], dim=-1)  # (B, T, H + 2H_enc + E)
        return features, torch.stack(rows, 1)[:, None, None] if need_weights else None, None  # (B, 1, 1, T, S)

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State, Tensor]:
        emb = self.dropout(self.embedding(prev_tokens))  # (B, E)
        h, context, weights = self._cell(state, self.W_emb(emb))
        return torch.cat([h, context, emb], dim=-1), {**state, "h": h}, weights[:, None, None]  # (B, 1, 1, S)


class LuongDecoder(nn.Module):
    """GRU over the whole shifted target, then scaled dot-product attention (Luong et al., 2015).

    Each position attends (a) to the decoder's own states through self-attention with a
    look-ahead mask and (b) to the encoder states, masked by the source valid lengths; both
    use Luong's "general" score ``h^T M k``, scaled. ``tanh(W_c [h; self; cross])`` is the
    readout. Nothing at position t depends on a later position, so the teacher-forced pass is
    parallel over time and agrees with step-by-step decoding.
    """

    each_layer_once = True  # a training pass applies each linear layer once (nmt.models.precision.CastWeights)

    def __init__(
        self,
        *,
        vocab_size: int,
        emb_size: int,
        enc_size: int,
        readout_size: int,
        dropout: float,
        pad_id: int,
        hidden_size: Annotated[int, SIZE],
        num_layers: Annotated[int, LAYERS],
        heads: Annotated[int, HEADS],
    ):
        super().__init__()
        if hidden_size % heads or enc_size % heads:
            raise ValueError(
                f"model.decoder.heads={heads} must divide the decoder size {hidden_size} and encoder size {enc_size}"
            )
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.bridge = nn.Linear(enc_size, num_layers * hidden_size)
        self.rnn = nn.GRU(
            emb_size, hidden_size, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
        )
        self.self_query = nn.Linear(hidden_size, hidden_size, bias=False)  # M of the self-attention score
        self.cross_query = nn.Linear(hidden_size, enc_size, bias=False)  # M of the cross-attention score
        self.self_attention = DotProductAttention(dropout)
        self.cross_attention = DotProductAttention(dropout)
        self.readout = nn.Sequential(nn.Linear(2 * hidden_size + enc_size, readout_size), nn.Tanh(), Dropout(dropout))
        self.num_layers, self.hidden_size, self.heads, self.readout_size = num_layers, hidden_size, heads, readout_size

    @property
    def attention_layout(self) -> AttentionLayout:
        return AttentionLayout(1, self.heads)  # one cross-attention over the GRU's top layer

    def init_state(self, enc_states: Tensor, src_len: Tensor, enc_final: Tensor) -> State:
        B = enc_final.shape[0]
        h0 = precision.state(torch.tanh(self.bridge(enc_final))).view(B, self.num_layers, self.hidden_size)  # (B, L, H)
        return {
            "h": h0,
            "values": enc_states,
            "src_len": src_len,
            "past": enc_states.new_zeros(B, 0, self.hidden_size),  # (B, room, H): the first `length` decoded
            "length": src_len.new_zeros(B),
        }

    def _attend(
        self, states: Tensor, past: Tensor, state: State, causal: bool, need_weights: bool
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Self- and cross-attention for decoder ``states`` (B, T, H) over ``past`` (B, T', H)."""
        h = self.heads
        self_ctx, self_w = self.self_attention(
            split_heads(self.self_query(states), h),
            split_heads(past, h),
            split_heads(past, h),
            need_weights=need_weights,
            causal=causal,
        )
        enc = state["values"]
        cross_ctx, cross_w = self.cross_attention(
            split_heads(self.cross_query(states), h),
            split_heads(enc, h),
            split_heads(enc, h),
            valid_lens=state["src_len"],
            need_weights=need_weights,
        )
        features = torch.cat([states, merge_heads(self_ctx), merge_heads(cross_ctx)], dim=-1)  # (B, T, 2H + 2H_enc)
        if need_weights:  # one layer: (B, 1, heads, T, S) and (B, 1, heads, T, T')
            return features, cross_w.unsqueeze(1), self_w.unsqueeze(1)
        return features, None, None

    def forward(
        self, tgt_in: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        emb = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        h0, x = state["h"].transpose(0, 1).contiguous(), precision.state(emb)  # (layers, B, H), (B, T, E)
        with precision.full_precision(emb):  # the recurrence in float32 under mixed precision
            states, _ = self.rnn(x, h0)  # (B, T, H); padding comes after real positions: no packing
        return self._attend(states, states, state, causal=True, need_weights=need_weights)

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State, Tensor]:
        emb = self.dropout(self.embedding(prev_tokens)).unsqueeze(1)  # (B, 1, E)
        h0, x = state["h"].transpose(0, 1).contiguous(), precision.state(emb)  # (layers, B, H), (B, 1, E)
        with precision.full_precision(emb):
            out, h = self.rnn(x, h0)  # (B, 1, H), (layers, B, H)
        t = cache.decoded(state)
        past = cache.append(state["past"], t, out, dim=1)  # (B, room, H), the first t + 1 in use
        features, cross_w, _ = self._attend(out, past[:, : t + 1], state, causal=False, need_weights=True)
        state = {**state, "h": h.transpose(0, 1), "past": past, "length": state["length"] + 1}
        return features.squeeze(1), state, cross_w[:, :, :, 0]  # (B, 1, H, S)
