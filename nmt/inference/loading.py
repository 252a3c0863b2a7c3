"""What ``translate.py`` and ``serve.py`` translate with: one type, :class:`TranslationModel`, for one checkpoint,
several (an ensemble) and a model directory ``export.py`` wrote (:func:`nmt.ct2.engine.load_export`): the engine,
its sentencepiece models, the attention choice it recorded and what ``GET /model`` tells of it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt import checkpoint
from nmt.alignment.choice import AttentionChoice
from nmt.data.tokenizer import Tokenizer
from nmt.hardware import Kernels
from nmt.inference.engine import InferenceEngine, PyTorchEngine
from nmt.inference.ensemble import assemble, load_members

log = logging.getLogger(__name__)


@dataclass
class TranslationModel:
    """A model ready to translate: ``model`` (the engine that runs it), its ``tokenizer``, the attention
    choice its checkpoint ``recorded`` (numbered as the checkpoint's layers), ``info`` for ``GET /model`` and the
    ``languages`` it translates (source, target)."""

    model: InferenceEngine
    tokenizer: Tokenizer
    recorded: AttentionChoice
    info: dict[str, Any]
    languages: tuple[str, str] = checkpoint.LANGUAGES

    def resolve(self, wanted: AttentionChoice, name: str = "--align-") -> AttentionChoice:
        """The choice to read the model's attention with, checked against what it has (the engine's answer)."""
        return self.model.resolve(wanted, name)


def load_checkpoints(
    paths: Sequence[str | Path], device: torch.device, threads: int = 0, kernels: Kernels | None = None
) -> TranslationModel:
    """The checkpoint, or the ensemble of several, that ``paths`` names, on ``device``; ``threads`` (0: as they come)
    for torch; ``kernels`` (default: ``conf/``'s, as training uses them) applied for the rest of the process."""
    if threads:
        torch.set_num_threads(threads)
    (kernels or Kernels()).apply()
    members = load_members(paths, device)
    model, tok, recorded = assemble(members)
    info = model_info(members, model)
    return TranslationModel(PyTorchEngine(model), tok, recorded, info, members[0].checkpoint.languages)


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
