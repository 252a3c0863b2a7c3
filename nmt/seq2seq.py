"""Encoder + attention decoder + output layer, with the one-step API search uses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .decoders import BahdanauDecoder, LuongDecoder, State
from .encoder import Encoder

MODELS = ("bahdanau", "luong")


class Seq2Seq(nn.Module):
    """``forward(src, src_len, tgt_in)`` -> logits ``(B, T, V)``, cross-attention ``(B, T, S)``,
    self-attention ``(B, T, T)`` (Luong) or None.

    One step at a time: ``state = encode(src, src_len)``, then
    ``step(state, prev_tokens)`` -> log-probs ``(B, V)``, new state, attention row ``(B, S)``.
    """

    def __init__(self, encoder: Encoder, decoder: BahdanauDecoder | LuongDecoder, tgt_vocab_size: int, readout_size: int, tie_embeddings: bool = False):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.output = nn.Linear(readout_size, tgt_vocab_size)
        if tie_embeddings:
            if decoder.embedding.embedding_dim != readout_size:
                raise ValueError(f"tie_embeddings needs readout_size ({readout_size}) == target embedding size ({decoder.embedding.embedding_dim})")
            self.output.weight = decoder.embedding.weight

    def encode(self, src: Tensor, src_len: Tensor) -> State:
        states, final = self.encoder(src, src_len)
        return self.decoder.init_state(states, src_len, final)

    def decode(self, state: State, tgt_in: Tensor, need_weights: bool = True) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher-forced features ``(B, T, F)`` and attention weights."""
        return self.decoder(tgt_in, state, need_weights=need_weights)

    def logits(self, features: Tensor) -> Tensor:
        """Readout and output layer for features of any leading shape: ``(..., F)`` -> ``(..., V)``."""
        return self.output(self.decoder.readout(features))

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        features, cross, self_w = self.decode(self.encode(src, src_len), tgt_in)
        return self.logits(features), cross, self_w

    def step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        features, state, row = self.decoder.step(prev_tokens, state)
        return F.log_softmax(self.logits(features).float(), dim=-1), state, row

    @staticmethod
    def reorder_state(state: State, index: Tensor) -> State:
        """Select batch rows of a state (beam search): every tensor is batch-first."""
        return {k: v.index_select(0, index) for k, v in state.items()}


def build_model(
    name: str,
    src_vocab_size: int,
    tgt_vocab_size: int,
    emb_size: int = 256,
    enc_hidden: int = 256,
    enc_layers: int = 1,
    dec_hidden: int = 512,
    dec_layers: int = 1,
    attn_hidden: int = 512,
    readout_size: int = 256,
    heads: int = 1,
    dropout: float = 0.2,
    tie_embeddings: bool = False,
    pad_id: int = 0,
) -> Seq2Seq:
    """The model named ``bahdanau`` or ``luong`` with the given sizes (``conf/model/*.yaml``)."""
    if name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, not {name!r}")
    encoder = Encoder(src_vocab_size, emb_size, enc_hidden, enc_layers, dropout, pad_id)
    enc_size = encoder.output_size
    if name == "bahdanau":
        if dec_layers != 1:
            raise ValueError("the Bahdanau decoder has one GRU layer (dec_layers=1)")
        decoder = BahdanauDecoder(tgt_vocab_size, emb_size, dec_hidden, enc_size, attn_hidden, readout_size, dropout, pad_id)
    else:
        decoder = LuongDecoder(tgt_vocab_size, emb_size, dec_hidden, enc_size, readout_size, dec_layers, heads, dropout, pad_id)
    model = Seq2Seq(encoder, decoder, tgt_vocab_size, readout_size, tie_embeddings)
    with torch.no_grad():  # the padding rows stay zero after any re-initialisation
        for emb in (encoder.embedding, decoder.embedding):
            emb.weight[pad_id].zero_()
    return model
