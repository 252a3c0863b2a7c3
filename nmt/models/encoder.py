"""Bidirectional GRU encoder over packed sequences."""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.bounds import LAYERS, SIZE
from nmt.models.dropout import Dropout
from nmt.models.precision import full_precision, state


class Encoder(nn.Module):
    """Embeddings + bidirectional GRU. Packing keeps padding out of both directions.

    ``forward`` returns per-token states ``(B, S, 2H)`` (zero at padded positions) and the
    final states of both directions concatenated ``(B, 2H)``, which the decoders' bridges map
    to their initial state.
    """

    each_layer_once = True  # a training pass applies each linear layer once (nmt.models.precision.CastWeights)

    def __init__(
        self,
        *,
        vocab_size: int,
        emb_size: int,
        hidden_size: Annotated[int, SIZE],
        num_layers: Annotated[int, LAYERS],
        dropout: float,
        pad_id: int,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.rnn = nn.GRU(
            emb_size,
            hidden_size,
            num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.hidden_size = hidden_size
        self.output_size = 2 * hidden_size

    def forward(self, src: Tensor, src_len: Tensor, host_len: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``host_len``: ``src_len`` on the CPU where the caller has it (a training batch): packing needs the lengths
        there, and reading them back from a GPU would wait for it."""
        S = src.shape[1]
        if S == 0:  # every source empty: read one padding step so that packing has something to pack
            src = F.pad(src, (0, 1), value=self.embedding.padding_idx)
        emb = self.dropout(self.embedding(src))  # (B, max(S, 1), E)
        # an empty source is read as one padding step (zero embedding); attention masks it out
        if host_len is None:  # read back from the device, and sorted there
            lengths, in_order = src_len.cpu().clamp(min=1), False
        else:  # rows already longest first (a training batch) are packed as they are: no order to copy to the GPU
            lengths = host_len.clamp(min=1)
            in_order = bool((lengths[:-1] >= lengths[1:]).all())
        packed = pack_padded_sequence(state(emb), lengths, batch_first=True, enforce_sorted=in_order)
        with full_precision(emb):  # the recurrence in float32 under mixed precision (nmt.models.precision)
            out, h_n = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        states = states[:, :S]  # (B, S, 2H)
        # h_n: (layers * 2, B, H); the last layer's forward and backward final states
        final = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # (B, 2H)
        return states, final
