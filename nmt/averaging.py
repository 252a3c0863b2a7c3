"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, as one self-contained checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from . import checkpoint
from .checkpoint import weights


def average_checkpoints(paths: Sequence[str | Path], out: str | Path, plain: bool = False) -> Path:
    """Average ``paths`` (same model settings and sentencepiece models) into ``out``; returns ``out``.

    The result keeps the first checkpoint's settings and subword models and the largest step; it
    holds no optimiser state, so it translates and fine-tunes but does not resume a run exactly.
    With ``plain``, checkpoints of an EMA run contribute their plain weights (:func:`weights`).
    """
    if not paths:
        raise ValueError("nothing to average: give at least one checkpoint")
    first = checkpoint.read(paths[0])
    total = {k: v.double() for k, v in weights(first, plain).items()}
    step = first.get("global_step", 0)
    for path in paths[1:]:
        ckpt = checkpoint.read(path)
        hint = "only checkpoints of one model and one data config average"
        checkpoint.check_vocabularies(path, ckpt["nmt"]["tokenizer"], paths[0], first["nmt"]["tokenizer"], hint)
        checkpoint.check_fits(path, weights(ckpt, plain), f"those of {paths[0]}", weights(first, plain), hint)
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
    return checkpoint.write(out, averaged)


def average_best(checkpoint_callback, k: int) -> Path:
    """Average the ``k`` best checkpoints a ``ModelCheckpoint`` kept into ``averaged.ckpt`` beside them."""
    record, mode = checkpoint_callback.best_k_models, checkpoint_callback.mode
    ranked = sorted(record, key=lambda p: float(record[p]), reverse=mode == "max")
    if len(ranked) < k:
        raise ValueError(f"average_best={k} but only {len(ranked)} checkpoint(s) were kept by then")
    return average_checkpoints(ranked[:k], Path(checkpoint_callback.dirpath) / "averaged.ckpt")
