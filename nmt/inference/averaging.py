"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, as one self-contained checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nmt import checkpoint


def average_checkpoints(paths: Sequence[str | Path], out: str | Path, plain: bool = False) -> Path:
    """Average ``paths`` (same model settings and sentencepiece models) into ``out``; returns ``out``.

    The result keeps the first checkpoint's settings and subword models and the largest step; it
    holds no optimiser state, so it translates and fine-tunes but does not resume a run exactly.
    With ``plain``, checkpoints of an EMA run contribute their plain weights.
    """
    if not paths:
        raise ValueError("nothing to average: give at least one checkpoint")
    first = checkpoint.Checkpoint.of(checkpoint.read(paths[0]), paths[0], plain)
    total = {k: v.double() for k, v in first.weights.items()}
    steps = [first.step or 0]
    for path in paths[1:]:
        other = checkpoint.Checkpoint.of(checkpoint.read(path), path, plain)
        hint = "only checkpoints of one model and one data config average"
        checkpoint.check_vocabularies(path, other.tokenizer_state, paths[0], first.tokenizer_state, hint)
        checkpoint.check_fits(path, other.weights, f"those of {paths[0]}", first.weights, hint)
        for k, v in other.weights.items():
            total[k] += v.double()
        steps.append(other.step or 0)
    state = {k: (v / len(paths)).to(first.weights[k].dtype) for k, v in total.items()}
    return checkpoint.write(out, checkpoint.averaged(first, state, max(steps), [str(p) for p in paths]))


def average_best(checkpoint_callback, k: int) -> Path:
    """Average the ``k`` best checkpoints a ``ModelCheckpoint`` kept into ``averaged.ckpt`` beside them."""
    record, mode = checkpoint_callback.best_k_models, checkpoint_callback.mode
    ranked = sorted(record, key=lambda p: float(record[p]), reverse=mode == "max")
    if len(ranked) < k:
        raise ValueError(f"average_best={k} but only {len(ranked)} checkpoint(s) were kept by then")
    return average_checkpoints(ranked[:k], Path(checkpoint_callback.dirpath) / "averaged.ckpt")
