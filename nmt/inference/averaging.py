"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, as one self-contained checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from nmt import checkpoint

log = logging.getLogger(__name__)


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


def average_best(checkpoint_callback, k: int) -> Path | None:
    """Average the ``k`` best checkpoints a ``ModelCheckpoint`` kept into ``averaged.ckpt`` beside them.

    A run stopped before ``k`` were kept (its time budget, early stopping) averages those it has, with a warning;
    ``None`` where it kept none (stopped before its first validation).
    """
    record, mode = checkpoint_callback.best_k_models, checkpoint_callback.mode
    ranked = sorted(record, key=lambda p: float(record[p]), reverse=mode == "max")
    if len(ranked) < k:
        log.warning("average_best=%d: the run kept %d checkpoint(s) by its end; %s", k, len(ranked),
                    f"averaging those {len(ranked)}" if ranked else "nothing to average")
    if not ranked:
        return None
    return average_checkpoints(ranked[:k], Path(checkpoint_callback.dirpath) / "averaged.ckpt")
