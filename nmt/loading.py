"""What ``translate.py`` and ``serve.py`` translate with, whatever ``--ckpt`` names: one checkpoint, several (an
ensemble), or a model directory ``export.py`` wrote (the CTranslate2 engine). One type for all three: the model
search runs on, its sentencepiece models, the attention choice it recorded and what ``GET /model`` tells of it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from . import checkpoint, engine, ensemble
from .alignment import AttentionChoice
from .data.tokenizer import Tokenizer
from .search import Decodable

log = logging.getLogger(__name__)


@dataclass
class TranslationModel:
    """A model ready to translate: ``model`` (a Seq2Seq, an Ensemble or an Engine), its ``tokenizer``, the attention
    choice its checkpoint ``recorded`` (numbered as the checkpoint's layers), ``info`` for ``GET /model`` and the
    ``languages`` it translates (source, target)."""

    model: Decodable
    tokenizer: Tokenizer
    recorded: AttentionChoice
    info: dict[str, Any]
    languages: tuple[str, str] = checkpoint.LANGUAGES

    def resolve(self, wanted: AttentionChoice, name: str = "--align-") -> AttentionChoice:
        """The choice to read the model's attention with, checked against what it has. An exported model has only the
        map it was exported with: another layer or head is refused (any readout and links apply)."""
        if not isinstance(self.model, engine.Engine):
            return wanted.check(*self.model.attention_layout, name=name)
        exported = self.recorded
        if wanted.context == "full":
            log.warning("%s: the engine runs no full-context pass; its attention is read as it translates", exported)
            wanted = replace(wanted, context="causal")
        layers = self.model.info.settings["model"]["decoder"]["num_layers"]
        wanted.check(layers, self.model.info.settings["model"]["decoder"]["heads"], name=name)
        if (wanted.layer % layers, wanted.head) != (exported.layer % layers, exported.head):
            got = "mean of heads" if wanted.head is None else f"head {wanted.head}"
            raise ValueError(
                f"{name}layer/head: {self.model.info.path} returns only the attention it was exported with "
                f"({exported}); for layer {wanted.layer}, {got}: export.py --align-layer {wanted.layer} --align-head "
                f"{'mean' if wanted.head is None else wanted.head}, or translate the checkpoint"
            )
        return self.model.choice(wanted)


def load(
    paths: Sequence[str | Path], device: torch.device, threads: int = 0, compute_type: str | None = None
) -> TranslationModel:
    """The checkpoint, the ensemble of several, or the exported model ``paths`` names, on ``device``; ``threads``
    (0: as they come) for the PyTorch path or the engine; ``compute_type`` is the engine's (an exported model's
    quantisation by default)."""
    if engine.check_members(paths):
        torch.set_num_threads(1)  # the engine's threads do the work; torch's own would only spin beside them
        found = engine.load(paths[0], device, threads, compute_type or "default")
        return TranslationModel(found, found.tok, found.info.alignment, engine_info(found), found.info.languages)
    if compute_type is not None:
        raise ValueError(f"--compute-type={compute_type}: applies to a model export.py wrote, not to a checkpoint")
    if threads:
        torch.set_num_threads(threads)
    members = ensemble.load_members(paths, device)
    model, tok, recorded = ensemble.assemble(members)
    return TranslationModel(model, tok, recorded, model_info(members, model), members[0].checkpoint.languages)


def model_info(members: Sequence[checkpoint.Loaded], model: torch.nn.Module) -> dict[str, Any]:
    """What ``GET /model`` tells: per checkpoint (file name only) its model settings, training step and
    recorded validation BLEU; the parameters, both vocabularies and the attention layout of what translates."""
    layers, heads = model.attention_layout
    tok = members[0].tokenizer
    return {
        "kind": "ensemble" if len(members) > 1 else members[0].checkpoint.model_settings.get("name"),
        "engine": "pytorch",
        "parameters": sum(p.numel() for p in model.parameters()),
        "attention": {"layers": layers, "heads": heads},
        "vocabulary": {"source": tok.src_vocab_size, "target": tok.tgt_vocab_size},
        "languages": dict(zip(("source", "target"), members[0].checkpoint.languages)),
        "checkpoints": [member_info(m) for m in members],
    }


def member_info(member: checkpoint.Loaded) -> dict[str, Any]:
    saved = member.checkpoint
    bleu = saved.best_score if saved.monitor == "val/bleu" else None
    return {
        "file": member.path.name,
        "model": saved.model_settings,
        "step": saved.step,
        "epoch": saved.epoch,
        "validation_bleu": None if bleu is None else round(bleu, 2),
        "alignment": saved.alignment_record,
    }


def engine_info(found: engine.Engine) -> dict[str, Any]:
    """``GET /model`` for an exported model: as for a checkpoint, with the engine, its quantisation and compute type
    (the attention is the one exported map)."""
    info, tok = found.info, found.tok
    return {
        "kind": info.settings["model"].get("name"),
        "engine": "ctranslate2",
        "quantization": info.quantization,
        "compute_type": found.translator.compute_type,
        "parameters": info.parameters,
        "attention": {"layers": 1, "heads": 1, "exported": info.alignment.as_dict()},
        "vocabulary": {"source": tok.src_vocab_size, "target": tok.tgt_vocab_size},
        "languages": dict(zip(("source", "target"), info.languages)),
        "checkpoints": [
            {
                "file": info.path.name,
                "model": info.settings["model"],
                "step": info.step,
                "exported_from": Path(info.checkpoint).name,
                "alignment": info.alignment_record,
            }
        ],
    }
