"""Encoder + attention decoder + output layer and its loss, with the one-step API search uses."""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .decoders import BahdanauDecoder, LuongDecoder, State
from .encoder import Encoder
from .loss import output_layer_loss
from .specials import BOS, EOS, PAD

DECODERS = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}
MODELS = tuple(DECODERS)


class Seq2Seq(nn.Module):
    """``forward(src, src_len, tgt_in)`` -> logits ``(B, T, V)``, cross-attention ``(B, T, S)``,
    self-attention ``(B, T, T)`` (Luong) or None.

    Training: ``loss(src, src_len, tgt_in, tgt_out)``. One step at a time:
    ``state = encode(src, src_len)``, then ``step(state, prev_tokens)`` -> log-probs ``(B, V)``,
    new state, attention row ``(B, S)``.
    """

    def __init__(
        self, encoder: Encoder, decoder: BahdanauDecoder | LuongDecoder, *, tgt_vocab_size: int, tie_embeddings: bool
    ):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        readout_size = decoder.readout_size
        self.output = nn.Linear(readout_size, tgt_vocab_size)
        if tie_embeddings:
            if decoder.embedding.embedding_dim != readout_size:
                raise ValueError(
                    f"model.tie_embeddings needs model.readout_size ({readout_size}) == model.emb_size "
                    f"({decoder.embedding.embedding_dim})"
                )
            self.output.weight = decoder.embedding.weight

    def encode(self, src: Tensor, src_len: Tensor) -> State:
        states, final = self.encoder(src, src_len)
        return self.decoder.init_state(states, src_len, final)

    def decode(
        self, state: State, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher-forced features ``(B, T, F)`` and attention weights."""
        return self.decoder(tgt_in, state, need_weights=need_weights)

    def logits(self, features: Tensor) -> Tensor:
        """Readout and output layer for features of any leading shape: ``(..., F)`` -> ``(..., V)``."""
        return self.output(self.decoder.readout(features))

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        features, cross, self_w = self.decode(self.encode(src, src_len), tgt_in)
        return self.logits(features), cross, self_w

    def loss(
        self,
        src: Tensor,
        src_len: Tensor,
        tgt_in: Tensor,
        tgt_out: Tensor,
        label_smoothing: float = 0.0,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Mean label-smoothed loss, mean NLL and the count of real target tokens, and the cross-attention
        ``(B, T, S)`` (with ``need_weights``). The readout and output layer never see padding positions.
        """
        features, cross, _ = self.decode(self.encode(src, src_len), tgt_in, need_weights=need_weights)
        real = tgt_out != PAD  # (B, T)
        hidden = self.decoder.readout(features[real])  # (N, R), N = real target tokens
        loss, nll = output_layer_loss(hidden, self.output.weight, self.output.bias, tgt_out[real], label_smoothing)
        return loss, nll, real.sum(), cross

    @torch.inference_mode()
    def read(self, src: Tensor, src_len: Tensor, tokens: list[int]) -> tuple[Tensor, Tensor, Tensor | None]:
        """One sentence ``src (1, S)`` re-read with the output ``tokens`` (no BOS/EOS), teacher-forced: log-probs of
        ``tokens`` + EOS ``(T + 1,)``, cross-attention ``(T + 1, S)`` and self-attention ``(T + 1, T + 1)`` or None.
        """
        tgt_in = torch.tensor([[BOS, *tokens]], device=src.device)
        logits, cross, self_w = self(src, src_len, tgt_in)
        target = torch.tensor([*tokens, EOS], device=src.device)
        logp = logits[0].float().log_softmax(-1).gather(1, target.unsqueeze(1)).squeeze(1)
        return logp, cross[0].float(), None if self_w is None else self_w[0].float()

    def step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        features, state, row = self.decoder.step(prev_tokens, state)
        return F.log_softmax(self.logits(features).float(), dim=-1), state, row

    @staticmethod
    def reorder_state(state: State, index: Tensor) -> State:
        """Select batch rows of a state (beam search): every tensor is batch-first."""
        return {k: v.index_select(0, index) for k, v in state.items()}


def build_model(
    *,
    name: str,
    src_vocab_size: int,
    tgt_vocab_size: int,
    emb_size: int,
    enc_hidden: int,
    enc_layers: int,
    readout_size: int,
    dropout: float,
    tie_embeddings: bool,
    **decoder: int,
) -> Seq2Seq:
    """The model ``name`` with the sizes of ``conf/model/<name>.yaml``; ``decoder`` holds its decoder's own keys
    (``dec_hidden`` and ``attn_hidden`` for Bahdanau; ``dec_hidden``, ``dec_layers`` and ``heads`` for Luong).
    A key set to None counts as not given.
    """
    decoder = {k: v for k, v in decoder.items() if v is not None}
    if name not in DECODERS:
        raise ValueError(f"model.name must be one of {MODELS}, not {name!r}")
    cls = DECODERS[name]
    own = [p for p, v in inspect.signature(cls).parameters.items() if v.kind == v.KEYWORD_ONLY and p not in SHARED]
    if unknown := sorted(set(decoder) - set(own)):
        raise ValueError(
            f"model.{unknown[0]} is not a setting of the {name} model (its decoder takes {', '.join(own)})"
        )
    if missing := [k for k in own if k not in decoder]:
        raise ValueError(f"model.{missing[0]} is missing: the {name} model needs {', '.join(own)}")
    encoder = Encoder(
        vocab_size=src_vocab_size,
        emb_size=emb_size,
        hidden_size=enc_hidden,
        num_layers=enc_layers,
        dropout=dropout,
        pad_id=PAD,
    )
    dec = cls(
        vocab_size=tgt_vocab_size,
        emb_size=emb_size,
        enc_size=encoder.output_size,
        readout_size=readout_size,
        dropout=dropout,
        pad_id=PAD,
        **decoder,
    )
    model = Seq2Seq(encoder, dec, tgt_vocab_size=tgt_vocab_size, tie_embeddings=tie_embeddings)
    with torch.no_grad():  # the padding rows stay zero after any re-initialisation
        for emb in (encoder.embedding, dec.embedding):
            emb.weight[PAD].zero_()
    return model


SHARED = (
    "vocab_size",
    "emb_size",
    "enc_size",
    "readout_size",
    "dropout",
    "pad_id",
)  # given to every decoder by build_model
