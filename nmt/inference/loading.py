"""What ``--ckpt`` names, loaded (:func:`load_model`, the one loader): one checkpoint, several (an ensemble), or a
model directory ``export.py`` wrote (the CTranslate2 engine, :mod:`nmt.inference.ct2`). Everything above it sees one
type, :class:`TranslationModel`: the engine, its sentencepiece models, the attention choice it recorded and what
``GET /model`` tells of it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt import checkpoint
from nmt.alignment.choice import AttentionChoice
from nmt.commands import named_as_started
from nmt.data.tokenizer import Tokenizer
from nmt.hardware import Kernels
from nmt.inference.ct2 import check_members, engine_info, load_engine
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


def load_model(
    paths: Sequence[str | Path],
    device: torch.device,
    threads: int = 0,
    compute_type: str | None = None,
    kernels: Kernels | None = None,
) -> TranslationModel:
    """The checkpoint, the ensemble of several, or the exported model ``paths`` names, on ``device``; ``threads``
    (0: as they come) for the PyTorch path or the engine; ``compute_type`` is the engine's (an exported model's
    quantisation by default); ``kernels`` how the PyTorch path computes (default: as training does)."""
    if check_members(paths):
        if kernels is not None:
            raise ValueError(
                named_as_started(
                    "--attention-backends and --float32-matmul: apply to a checkpoint, not to a model export.py wrote "
                    "(CTranslate2 runs kernels of its own; --compute-type sets its precision)"
                )
            )
        return load_export(paths[0], device, threads, compute_type or "default")
    if compute_type is not None:
        wrote = named_as_started("applies to a model export.py wrote, not to a checkpoint")
        raise ValueError(f"--compute-type={compute_type}: {wrote}")
    return load_checkpoints(paths, device, threads, kernels)


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


def load_export(
    path: str | Path, device: torch.device, threads: int = 0, compute_type: str = "default"
) -> TranslationModel:
    """The exported model in ``path`` as :class:`TranslationModel` (:func:`load_engine`)."""
    torch.set_num_threads(1)  # the engine's threads do the work; torch's own would only spin beside them
    found = load_engine(path, device, threads, compute_type)
    return TranslationModel(found, found.tok, found.info.alignment, engine_info(found), found.info.languages)
