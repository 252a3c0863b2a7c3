"""Encoder + attention decoder + output layer and its loss, with the one-step API search uses."""

from __future__ import annotations

import importlib
import inspect
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.bounds import FRACTION, SIZE
from nmt.models.attention import AttentionLayout
from nmt.models.decoders import State
from nmt.models.loss import output_layer_loss
from nmt.models.parts import DecoderPart, EncoderPart, lacking
from nmt.specials import BOS, EOS, PAD


class Seq2Seq(nn.Module):
    """``forward(src, src_len, tgt_in)`` -> logits ``(B, T, V)``, cross-attention ``(B, L, H, T, S)``,
    self-attention ``(B, L, H, T, T)`` or None (a decoder without it), for ``L`` attention layers of ``H`` heads.

    Training: ``loss(src, src_len, tgt_in, tgt_out)``. One step at a time:
    ``state = encode(src, src_len)``, then ``step(state, prev_tokens)`` -> log-probs ``(B, V)``,
    new state, attention row ``(B, L, H, S)``.

    The encoder maps ``(src, src_len)`` to states ``(B, S, D)`` and a summary ``(B, D)`` and has
    ``embedding`` and ``output_size``; the decoder has ``embedding``, ``readout``, ``readout_size``,
    ``init_state``, a teacher-forced ``forward`` and ``step`` (see :mod:`nmt.models.decoders`).
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module, *, tgt_vocab_size: int, tie_embeddings: bool):
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

    @property
    def attention_layout(self) -> AttentionLayout:
        return self.decoder.attention_layout

    @property
    def position_limit(self) -> int | None:
        """The longest sequence its encoder or decoder takes (learned positions), None where there is no limit."""
        limits = [e.position_limit for part in (self.encoder, self.decoder) if (e := getattr(part, "embed", None))]
        return min((n for n in limits if n is not None), default=None)

    @property
    def applied_once(self) -> list[nn.Module]:
        """The parts that a training pass applies each of whose layers once (each part says so: ``each_layer_once``;
        a decoder looping over time does not), and the output layer."""
        return [p for p in (self.encoder, self.decoder) if getattr(p, "each_layer_once", False)] + [self.output]

    def encode(self, src: Tensor, src_len: Tensor, host_len: Tensor | None = None) -> State:
        states, final = self.encoder(src, src_len, host_len)
        return self.decoder.init_state(states, src_len, final)

    @property
    def full_context(self) -> bool:
        """Whether the decoder can run a pass that sees the whole target (the Transformer's can)."""
        return getattr(self.decoder, "full_context", False)

    def decode(
        self, state: State, tgt_in: Tensor, need_weights: bool = True, full_context: bool = False
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher-forced features ``(B, T, F)`` and attention weights; with ``full_context`` every position sees
        the whole target (no look-ahead mask: an alignment pass, never a translation)."""
        if not full_context:
            return self.decoder(tgt_in, state, need_weights=need_weights)
        if not self.full_context:
            raise ValueError(f"{type(self.decoder).__name__} has no full-context pass (the Transformer decoder has)")
        return self.decoder(tgt_in, state, need_weights=need_weights, full_context=True)

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
        full_context: bool = False,
        host_len: Tensor | None = None,
        tgt_tokens: int | None = None,
        static: bool = False,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Mean label-smoothed loss, mean NLL and the count of real target tokens, and the cross-attention
        ``(B, L, H, T, S)`` (with ``need_weights``; with ``full_context`` too, that of a second pass over the same
        encoding that sees the whole target). The readout and output layer never see padding positions, except with
        ``static``: there every position goes through them, each weighted by whether it is real, so that no shape
        of the step depends on the data (a captured CUDA graph replays it for any batch of its shape).

        A training batch gives what its loader counted on the host, so that nothing is read back from a GPU:
        ``host_len`` (``src_len``) and ``tgt_tokens`` (the real target tokens, ``(tgt_out != PAD).sum()``).
        """
        state = self.encode(src, src_len, host_len)
        features, cross, _ = self.decode(state, tgt_in, need_weights=need_weights and not full_context)
        if need_weights and full_context:
            cross = self.decode(state, tgt_in, full_context=True)[1]
        real = tgt_out != PAD  # (B, T)
        if static:  # every position, weighted: 1 / real tokens where real, 0 on padding
            count = real.sum()
            rows = real.flatten().to(torch.float32) / count.clamp(min=1)  # (B * T,)
            hidden = self.decoder.readout(features.flatten(0, 1))  # (B * T, R)
            loss, nll = output_layer_loss(hidden, self.output.weight, self.output.bias, tgt_out.flatten(),
                                          label_smoothing, rows)  # fmt: skip
            return loss, nll, count, cross
        if tgt_tokens is None:  # the mask's count read back from the device
            hidden, target = self.decoder.readout(features[real]), tgt_out[real]  # (N, R), (N,)
        else:  # the real positions' indices, of a size known beforehand: no shape that waits on the data
            at = torch.nonzero_static(real.flatten(), size=tgt_tokens).squeeze(1)  # (N,), N = real target tokens
            hidden = self.decoder.readout(features.flatten(0, 1).index_select(0, at))  # (N, R)
            target = tgt_out.flatten().index_select(0, at)  # (N,)
        loss, nll = output_layer_loss(hidden, self.output.weight, self.output.bias, target, label_smoothing)
        return loss, nll, real.sum(), cross

    @torch.inference_mode()
    def read(
        self, src: Tensor, src_len: Tensor, tokens: list[int], full_context: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One sentence ``src (1, S)`` re-read with the output ``tokens`` (no BOS/EOS), teacher-forced: log-probs of
        ``tokens`` + EOS ``(T + 1,)``, cross-attention ``(L, H, T + 1, S)`` and self-attention ``(L, H, T + 1, T + 1)``
        or None; with ``full_context`` both attentions are those of the pass that sees the whole target.
        """
        tgt_in = torch.tensor([[BOS, *tokens]], device=src.device)
        state = self.encode(src, src_len)
        features, cross, self_w = self.decode(state, tgt_in)
        logits = self.logits(features)
        if full_context:
            _, cross, self_w = self.decode(state, tgt_in, full_context=True)
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


class PrefixRerun(nn.Module):
    """A ``Seq2Seq`` decoding without its cache, as JoeyNMT's Transformer does: every step re-runs the whole prefix
    teacher-forced and keeps the last position. The same output as the model's own ``step``, at O(t^2) a sentence:
    the reference that cached decoding is tested and timed against."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model
        self.attention_layout = model.attention_layout

    def encode(self, src: Tensor, src_len: Tensor) -> State:
        return {**self.model.encode(src, src_len), "prefix": src.new_zeros(len(src), 0)}

    def step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        prefix = torch.cat([state["prefix"], prev_tokens.unsqueeze(1)], 1)  # (B, t + 1)
        features, cross, _ = self.model.decode({k: v for k, v in state.items() if k != "prefix"}, prefix)
        logp = F.log_softmax(self.model.logits(features[:, -1]).float(), dim=-1)
        return logp, {**state, "prefix": prefix}, cross[:, :, :, -1]  # (B, V), state, (B, L, H, S)

    reorder_state = staticmethod(Seq2Seq.reorder_state)

    def read(self, src: Tensor, src_len: Tensor, tokens: list[int]) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.model.read(src, src_len, tokens)


def build_model(
    *,
    src_vocab_size: int,
    tgt_vocab_size: int,
    encoder: dict,
    decoder: dict,
    emb_size: Annotated[int, SIZE],
    dropout: Annotated[float, FRACTION],
    tie_embeddings: bool,
    share_embeddings: bool = False,
    readout_size: Annotated[int, SIZE] | None = None,
    name: str = "",
) -> Seq2Seq:
    """The model of a ``conf/model/*.yaml``: its ``encoder`` and ``decoder`` are chosen by ``_target_`` (a class of
    ``nmt``) with their own keys; the embedding size, readout size (for the parts that take one) and dropout are
    given to both. ``share_embeddings``: the source and target embeddings one matrix (one vocabulary for both
    languages; with ``tie_embeddings`` the output layer's too, as fairseq's ``--share-all-embeddings``). ``name`` only
    labels runs.
    """
    if share_embeddings and src_vocab_size != tgt_vocab_size:
        raise ValueError(
            f"model.share_embeddings=true needs one vocabulary for both languages (here {src_vocab_size:,} and "
            f"{tgt_vocab_size:,} pieces): add data.prepare.spm.joint=true"
        )
    enc = build_part(
        "model.encoder", encoder, EncoderPart, vocab_size=src_vocab_size, emb_size=emb_size, dropout=dropout, pad_id=PAD
    )
    dec = build_part(
        "model.decoder",
        decoder,
        DecoderPart,
        vocab_size=tgt_vocab_size,
        emb_size=emb_size,
        enc_size=enc.output_size,
        readout_size=readout_size,
        dropout=dropout,
        pad_id=PAD,
    )
    if share_embeddings:
        if enc.embedding.weight.shape != dec.embedding.weight.shape:
            raise ValueError("model.share_embeddings=true needs the encoder's and decoder's embeddings of one size")
        enc.embedding.weight = dec.embedding.weight
    model = Seq2Seq(enc, dec, tgt_vocab_size=tgt_vocab_size, tie_embeddings=tie_embeddings)
    with torch.no_grad():  # the padding rows stay zero after any re-initialisation
        for emb in (enc.embedding, dec.embedding):
            emb.weight[PAD].zero_()
    return model


def build_part(key: str, settings: dict, protocol: type, **common: Any) -> nn.Module:
    """Instantiate ``settings["_target_"]``, a model part of this package, with its own keys and ``common``, and hold
    it to its contract, ``protocol`` (:mod:`nmt.models.parts`).

    Only classes under ``nmt.`` are built, so a checkpoint's settings can never name other code.
    """
    if not isinstance(settings, dict) or not isinstance(settings.get("_target_"), str):
        raise ValueError(f"{key} needs a _target_: the class of the part (e.g. nmt.models.encoder.Encoder)")
    target = settings["_target_"]
    module, _, name = target.rpartition(".")
    cls = None
    if target.startswith("nmt.") and module:
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            cls = None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"{key}._target_={target!r}: not a model part of this package (a class under nmt.)")
    params = inspect.signature(cls).parameters
    own = [p for p, v in params.items() if v.kind == v.KEYWORD_ONLY and p not in common]
    given = {k: v for k, v in settings.items() if k != "_target_"}
    common = {k: v for k, v in common.items() if k in params}
    if unset := [k for k, v in common.items() if v is None]:
        raise ValueError(f"model.{unset[0]} is missing: {name} needs it")
    if unknown := sorted(set(given) - set(own)):
        raise ValueError(f"{key}.{unknown[0]} is not a setting of {name} (it takes {', '.join(own)})")
    if missing := [k for k in own if k not in given and params[k].default is inspect.Parameter.empty]:
        raise ValueError(f"{key}.{missing[0]} is missing: {name} needs {', '.join(own)}")
    part = cls(**given, **common)
    if lacks := lacking(part, protocol):
        raise ValueError(f"{key}._target_={target}: not an {protocol.__name__} ({protocol.__module__}): it lacks "
                         f"{'; '.join(lacks)}")  # fmt: skip
    return part
