"""A trained Transformer as a CTranslate2 model directory (``export.py``): its weights written into CTranslate2's
public model specification (``ctranslate2.specs.TransformerSpec``), quantised as asked, beside both sentencepiece
models and ``nmt.json`` (what the engine needs to translate as ``translate.py`` does: the attention choice).

CTranslate2 returns the attention of one decoder layer, averaged over its first N heads. The checkpoint's recorded
choice (or the one given) is exported: a head mean as N = all heads; one head as N = 1, with that head moved first
in its layer (:func:`head_first`: the layer computes the same function). The readout is applied when reading.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from nmt import checkpoint
from nmt.alignment.choice import AttentionChoice
from nmt.commands import named_as_started
from nmt.data.tokenizer import Tokenizer
from nmt.models.seq2seq import Seq2Seq
from nmt.models.transformer import MultiHeadAttention, TransformerDecoder, TransformerEncoder
from nmt.specials import BOS, EOS, UNK

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16")
META = "nmt.json"  # what this project adds to the engine's model directory
FORMAT = 1


class ExportError(ValueError):
    """A checkpoint or target that cannot be exported; the message names it."""


def head_first(attention: MultiHeadAttention, head: int) -> None:
    """Reorder ``attention``'s heads in place so that ``head`` comes first (the others keep their order): the rows of
    the query, key and value projections and the columns of the output projection move together."""
    H = attention.heads
    order = [head, *(h for h in range(H) if h != head)]
    d = attention.q_proj.out_features // H
    rows = torch.cat([torch.arange(h * d, (h + 1) * d) for h in order])  # (D,) new row -> old row
    D = attention.q_proj.out_features
    kv_rows = torch.cat([rows, rows + D])  # keys then values
    with torch.no_grad():
        for linear, index in ((attention.q_proj, rows), (attention.kv_proj, kv_rows)):
            linear.weight.copy_(linear.weight[index])
            linear.bias.copy_(linear.bias[index])
        attention.out_proj.weight.copy_(attention.out_proj.weight[:, rows])


def check_exportable(loaded: checkpoint.Loaded) -> Seq2Seq:
    """The checkpoint's Seq2Seq if CTranslate2 can run it (a Transformer), else one line saying why not."""
    model = loaded.model
    if not (isinstance(model.encoder, TransformerEncoder) and isinstance(model.decoder, TransformerDecoder)):
        kind = loaded.checkpoint.model_settings.get("name", "this model")
        raise ExportError(
            named_as_started(
                f"{loaded.path}: a {kind} model: CTranslate2 runs Transformers only (the RNN models stay on "
                "translate.py's PyTorch path)"
            )
        )
    return model


def positions_exported(model: Seq2Seq, wanted: int | None) -> int:
    """How many positions the exported tables hold: ``wanted`` (sinusoidal positions only: any number), else the
    model's ``max_positions``. The engine refuses longer lines and outputs; the PyTorch model has no such limit with
    sinusoidal positions, so translate.py refuses what a table could not hold, naming this limit."""
    embeds = (model.encoder.embed, model.decoder.embed)
    if wanted is None:
        return min(e.max_positions for e in embeds)
    learned = [e.position_limit for e in embeds if e.position_limit is not None]
    if learned and wanted > min(learned):
        raise ExportError(f"--max-positions {wanted}: the model learned {min(learned)} positions; give at most that")
    if wanted < 2:
        raise ExportError(f"--max-positions {wanted}: must be at least 2 (a word and the end of sentence)")
    return wanted


def spec(model: Seq2Seq, tok: Tokenizer, choice: AttentionChoice, positions: int):
    """The CTranslate2 specification of ``model`` with its weights, its position tables ``positions`` long;
    ``choice``'s head must already be first."""
    from ctranslate2.specs import transformer_spec

    enc, dec = model.encoder, model.decoder
    pre = isinstance(enc.final_norm, nn.LayerNorm)
    layers, heads = dec.attention_layout
    s = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(len(enc.layers), enc.layers[0].self_attn.heads, pre_norm=pre),
        transformer_spec.TransformerDecoderSpec(
            layers,
            heads,
            pre_norm=pre,
            alignment_layer=choice.layer % layers,
            alignment_heads=heads if choice.head is None else 1,
        ),
    )
    s.config.layer_norm_epsilon = enc.final_norm.eps if pre else enc.layers[0].sub_ff.norm.eps
    src_pieces = [tok.src.id_to_piece(i) for i in range(tok.src_vocab_size)]
    tgt_pieces = [tok.tgt.id_to_piece(i) for i in range(tok.tgt_vocab_size)]
    s.config.unk_token, s.config.bos_token, s.config.eos_token = (tgt_pieces[i] for i in (UNK, BOS, EOS))
    s.config.decoder_start_token = tgt_pieces[BOS]
    _set_embeddings(s.encoder, enc.embed, positions)
    _set_norm(s.encoder.layer_norm, enc.final_norm) if pre else None
    for layer_spec, layer in zip(s.encoder.layer, enc.layers):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.sub_attn.norm, self_attention=True)
        _set_ffn(layer_spec.ffn, layer.ff, layer.sub_ff.norm)
    _set_embeddings(s.decoder, dec.embed, positions)
    _set_norm(s.decoder.layer_norm, dec.readout) if pre else None
    for layer_spec, layer in zip(s.decoder.layer, dec.layers):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.sub_self.norm, self_attention=True)
        _set_attention(layer_spec.attention, layer.cross_attn, layer.sub_cross.norm, self_attention=False)
        _set_ffn(layer_spec.ffn, layer.ff, layer.sub_ff.norm)
    s.decoder.projection.weight = _np(model.output.weight)
    s.decoder.projection.bias = _np(model.output.bias)
    s.register_source_vocabulary(src_pieces)
    s.register_target_vocabulary(tgt_pieces)
    return s


def _np(t: torch.Tensor):
    return t.detach().float().cpu().numpy().copy()


def _set_embeddings(layer_spec, embed, positions: int) -> None:
    """Token embeddings (scaled by sqrt(d) in the engine, as here) and the position table the model adds, its first
    ``positions`` rows: of the learned one, or of the sinusoidal one written out."""
    emb = layer_spec.embeddings[0] if isinstance(layer_spec.embeddings, list) else layer_spec.embeddings
    emb.weight = _np(embed.embedding.weight)
    layer_spec.scale_embeddings = True
    layer_spec.position_encodings.encodings = _np(embed.positions(0, positions, torch.device("cpu")))


def _set_norm(norm_spec, norm: nn.LayerNorm) -> None:
    norm_spec.gamma, norm_spec.beta = _np(norm.weight), _np(norm.bias)


def _set_linear(linear_spec, weight: torch.Tensor, bias: torch.Tensor) -> None:
    linear_spec.weight, linear_spec.bias = _np(weight), _np(bias)


def _set_attention(att_spec, att: MultiHeadAttention, norm: nn.LayerNorm, self_attention: bool) -> None:
    """Self-attention: one fused query-key-value projection; cross-attention: the query, then keys and values (our
    ``kv_proj`` already is keys then values)."""
    q, kv = att.q_proj, att.kv_proj
    if self_attention:
        _set_linear(att_spec.linear[0], torch.cat([q.weight, kv.weight]), torch.cat([q.bias, kv.bias]))
    else:
        _set_linear(att_spec.linear[0], q.weight, q.bias)
        _set_linear(att_spec.linear[1], kv.weight, kv.bias)
    _set_linear(att_spec.linear[-1], att.out_proj.weight, att.out_proj.bias)
    _set_norm(att_spec.layer_norm, norm)


def _set_ffn(ffn_spec, ff: nn.Sequential, norm: nn.LayerNorm) -> None:
    _set_linear(ffn_spec.linear_0, ff[0].weight, ff[0].bias)
    _set_linear(ffn_spec.linear_1, ff[3].weight, ff[3].bias)
    _set_norm(ffn_spec.layer_norm, norm)


def check_export(out: str | Path, quantization: str) -> Path:
    """``out`` if an export can be written there (a new folder), with CTranslate2 installed and ``quantization``
    one of its; else one line saying why (checked before a checkpoint is loaded)."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise ExportError("ctranslate2 is not installed: pip install 'nmt-attention[ct2]'") from None
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"--quantization={quantization!r}: must be one of {', '.join(QUANTIZATIONS)}")
    out = Path(out)
    if out.exists():
        raise ExportError(f"{out}: already exists; give a new folder (nothing was written)")
    if not out.parent.is_dir():
        raise ExportError(f"{out}: cannot write: folder {out.parent} does not exist")
    return out


def export(
    loaded: checkpoint.Loaded,
    out: str | Path,
    quantization: str = "float32",
    choice: AttentionChoice | None = None,
    max_positions: int | None = None,
) -> Path:
    """Write the CTranslate2 model of the checkpoint ``loaded`` into the new folder ``out``, whole or not at all;
    ``choice``: the attention exported (default: the recorded one); ``max_positions``: the positions its tables hold
    (:func:`positions_exported`). ``loaded`` is left as it was."""
    import ctranslate2

    out = check_export(out, quantization)
    model = copy.deepcopy(check_exportable(loaded))  # its heads may be reordered
    chosen = (choice or loaded.checkpoint.alignment).check(*model.attention_layout, name="--align-")
    if chosen.head is not None:
        head_first(model.decoder.layers[chosen.layer].cross_attn, chosen.head)
    positions = positions_exported(model, max_positions)
    model_spec = spec(model, loaded.tokenizer, chosen, positions)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model_spec.validate()
        model_spec.optimize(quantization=quantization)
        model_spec.save(str(tmp))
        loaded.tokenizer.save(tmp)
        meta = metadata(loaded, chosen, quantization, ctranslate2.__version__) | {"positions": positions}
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        tmp.rename(out)
    except Exception as e:
        why = checkpoint.first_line(e)
        raise ExportError(f"{loaded.path}: the conversion failed ({why}); nothing was written") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def metadata(loaded: checkpoint.Loaded, chosen: AttentionChoice, quantization: str, version: str) -> dict:
    """``nmt.json``: the attention the engine returns (the exported choice; its head is now the engine's head 0), the
    checkpoint it came from, its settings and training facts, the quantisation and CTranslate2's version."""
    saved = loaded.checkpoint
    return {
        "format": FORMAT,
        "alignment": chosen.as_dict(),
        "alignment_record": saved.alignment_record,
        "checkpoint": str(saved.path),
        "step": saved.step,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "settings": {"model": saved.model_settings, "languages": list(saved.languages)},
        "quantization": quantization,
        "ctranslate2": version,
    }
