"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, as one self-contained checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from .module import CheckpointError, TranslationModule


def weights(ckpt: dict, plain: bool = False) -> dict:
    """A checkpoint's weights: those it translates with, or with ``plain`` the un-averaged ones an EMA run keeps."""
    return ckpt.get("current_model_state", ckpt["state_dict"]) if plain else ckpt["state_dict"]


def average_checkpoints(paths: Sequence[str | Path], out: str | Path, plain: bool = False) -> Path:
    """Average ``paths`` (same model settings and sentencepiece models) into ``out``; returns ``out``.

    The result keeps the first checkpoint's settings and subword models and the largest step; it
    holds no optimiser state, so it translates and fine-tunes but does not resume a run exactly.
    With ``plain``, checkpoints of an EMA run contribute their plain weights (:func:`weights`).
    """
    if not paths:
        raise ValueError("nothing to average: give at least one checkpoint")
    first = TranslationModule.read_checkpoint(paths[0])
    total = {k: v.double() for k, v in weights(first, plain).items()}
    step = first.get("global_step", 0)
    for path in paths[1:]:
        ckpt = TranslationModule.read_checkpoint(path)
        if ckpt["hyper_parameters"]["model"] != first["hyper_parameters"]["model"]:
            raise CheckpointError(f"{path}: other model settings than {paths[0]}: only one model's checkpoints average")
        if ckpt["nmt"]["tokenizer"] != first["nmt"]["tokenizer"]:
            raise CheckpointError(f"{path}: other sentencepiece models than {paths[0]}")
        for k, v in weights(ckpt, plain).items():
            total[k] += v.double()
        step = max(step, ckpt.get("global_step", 0))
    state = {k: (v / len(paths)).to(weights(first, plain)[k].dtype) for k, v in total.items()}
    averaged = {
        "state_dict": state,
        "hyper_parameters": first["hyper_parameters"],
        "nmt": {**first["nmt"], "averaged_from": [str(p) for p in paths]},
        "global_step": step,
        "epoch": first.get("epoch", 0),
        "pytorch-lightning_version": first.get("pytorch-lightning_version", ""),  # Lightning's test() reads it
    }
    out = Path(out)
    tmp = out.with_name(out.name + ".part")
    torch.save(averaged, tmp)
    tmp.replace(out)
    return out


def average_best(checkpoint_callback, k: int) -> Path:
    """Average the ``k`` best checkpoints a ``ModelCheckpoint`` kept into ``averaged.ckpt`` beside them."""
    record, mode = checkpoint_callback.best_k_models, checkpoint_callback.mode
    ranked = sorted(record, key=lambda p: float(record[p]), reverse=mode == "max")
    if len(ranked) < k:
        raise ValueError(f"average_best={k} but only {len(ranked)} checkpoint(s) were kept by then")
    return average_checkpoints(ranked[:k], Path(checkpoint_callback.dirpath) / "averaged.ckpt")
