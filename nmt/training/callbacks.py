"""Callbacks: checkpoints that keep the best score across resumes, target tokens/s, attention heatmaps; the
checkpoint writer that never leaves half a file."""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import lightning as L
import torch
from lightning.fabric.utilities.throughput import Throughput
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import RunningStage, TrainerFn

from nmt.bounds import INT32, Range
from nmt.checkpoint import non_finite
from nmt.data.atomic import folder_error
from nmt.data.collate import Batch
from nmt.training.schedules import TimeBudget
from nmt.training.stopping import launched
from nmt.views.plotting import heatmap, heatmap_grid
from nmt.views.translation_attention import SentenceAttention, sentence_attention
from nmt.views.viewer import write_report

log = logging.getLogger(__name__)


def _sentences(batch: Batch) -> int:
    """The batch's pairs: its rows, less the filler rows of ``data.shapes``, and more where rows join pairs."""
    return len(batch.idx)


def target_tokens(batch: Batch) -> int:
    """Real target tokens, EOS included (what the loss is computed on), as the loader counted them on the host."""
    return batch.host.tgt_tokens if batch.host is not None else int(batch.tgt_len.sum())


class TokenThroughput(ThroughputMonitor):
    """Lightning's ``ThroughputMonitor`` counting sentences and real target tokens.

    Logs ``train/device/items_per_sec`` (target tokens/s of one device; validation time left
    out) and ``train/device/samples_per_sec`` (sentences/s) over at least the last ``window_size``
    batches, and with several devices ``train/items_per_sec`` and ``train/samples_per_sec``
    for all of them (rank 0's rate times the world size). In training the clock is read, after waiting for the
    GPU, only at logging steps (``trainer.log_every_n_steps``): between them batches are only counted, so that no
    step waits on the GPU.
    """

    def __init__(self, window_size: Annotated[int, Range(2, INT32, integer=True)]):
        super().__init__(batch_size_fn=_sentences, length_fn=target_tokens, window_size=window_size)
        self._module_has_flops = False  # no FLOP count: skip its warning about a missing flops_per_batch

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if RunningStage.TRAINING in self._throughputs:  # its window in clock readings, one a logging step
            every = max(trainer.log_every_n_steps, 1)
            kwargs = {**self.kwargs, "window_size": 1 + math.ceil(self.kwargs["window_size"] / every)}
            self._throughputs[RunningStage.TRAINING] = Throughput(world_size=trainer.world_size, **kwargs)

    def on_train_start(self, trainer: L.Trainer, *args: Any) -> None:
        super().on_train_start(trainer, *args)
        if trainer.is_global_zero:  # the clock's first reading: training's start, nothing counted yet
            self._throughputs[RunningStage.TRAINING].update(time=0.0, batches=0, samples=0, lengths=0)

    @torch.inference_mode()
    def _update(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, iter_num: int) -> None:
        stage = trainer.state.stage
        if stage == RunningStage.TRAINING and not trainer._logger_connector.should_update_logs:
            self._lengths[stage] += target_tokens(batch)  # counted; the clock is read at the next logging step
            self._samples[stage] += _sentences(batch)
            self._batches[stage] += 1
            return
        super()._update(trainer, pl_module, batch, iter_num)


class Deadline(L.Callback):
    """Stops training at a wall-clock deadline, so that a time budget counts start-up and data preparation too
    (Lightning's ``max_time`` counts from the start of fitting): ``after`` (DD:HH:MM:SS) from the launch of this
    process, or ``at`` (seconds since the epoch: a benchmark's clock, started before it); neither: none. Every process
    stops at the first one's decision, as at Lightning's ``Timer``."""

    def __init__(self, after: str | None = None, at: float | None = None):
        from nmt.settings import duration

        if after is not None and at is not None:
            raise ValueError(f"callbacks.deadline.after={after}: give after or at, not both")
        self.after = after
        self.at = launched() + duration(after, "callbacks.deadline.after") if after is not None else at

    def budget(self) -> TimeBudget | None:
        """The seconds left, for a schedule that anneals to the end of the run (``schedule=budgeted``)."""
        return None if self.at is None else TimeBudget(time.time, self.at)

    def on_train_batch_end(self, trainer: L.Trainer, *_: Any) -> None:
        if self.at is not None and not trainer.should_stop:
            trainer.should_stop = bool(trainer.strategy.broadcast(time.time() >= self.at))


class CtrlC(L.Callback):
    """Ctrl-C stops training at the next batch at the latest. Python raises KeyboardInterrupt wherever the main
    thread is; inside a weakref callback or a ``__del__`` (the garbage collector runs them at any point) it prints
    "Exception ignored" and goes on, and training would run on. The signal is remembered and raised again from the
    next batch's end, a place where Lightning catches it (on-exception checkpoint, ``trainer.interrupted``)."""

    pending = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # after Lightning saved the handlers it gives back at the end of fit (an interrupted one too)
        if threading.current_thread() is threading.main_thread():
            self.pending = False
            signal.signal(signal.SIGINT, self._interrupt)

    def _interrupt(self, signum: int, frame: Any) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def _again(self, *_: Any) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    on_train_batch_end = on_validation_batch_end = _again


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, whole or not at all: each checkpoint (best, last, on exception, snapshots)
    is written as ``<name>.part`` and renamed when complete, so Ctrl-C or a full disk during a save leaves no
    file that looks like a checkpoint. Set in ``conf/trainer/default.yaml`` (``plugins``)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any = None) -> None:
        part = f"{path}.part"
        try:
            super().save_checkpoint(checkpoint, part, storage_options)
            os.replace(part, path)
        except OSError as e:  # a full disk: no part left behind, and the line names the folder
            Path(part).unlink(missing_ok=True)
            raise folder_error(e, Path(path).parent) from None


class InterruptCheckpoint(Checkpoint):
    """``checkpoints/on_exception.ckpt`` when fitting raises (Ctrl-C, a crash), removed after a fit that ends well.

    Lightning's ``OnExceptionCheckpoint`` does the same, but its presence makes ``fit(ckpt_path=None)`` look for a
    "last" checkpoint to resume (in its folder and the ``ModelCheckpoint``'s): a fresh run would quietly continue
    whatever an earlier run left there. This one is not an ``OnExceptionCheckpoint``, so a fresh run never loads a
    checkpoint; ``train.py ckpt_path=...`` resumes.
    """

    def __init__(self, dirpath: str | Path, filename: str = "on_exception"):
        super().__init__()
        if not filename:
            raise ValueError("callbacks.interrupted.filename: must not be empty")
        self.dirpath, self.filename = dirpath, filename

    @property
    def ckpt_path(self) -> str:
        return os.path.join(self.dirpath, self.filename + ".ckpt")

    def on_exception(self, trainer: L.Trainer, module: L.LightningModule, exception: BaseException) -> None:
        if trainer.global_step == 0:  # nothing trained yet: the same command starts it again, no file stands in its way
            return
        if (bad := non_finite(module.state_dict())) is not None:  # nothing to resume from: the run says what is
            log.warning("%s not written: the weights are not finite (%s)", self.ckpt_path, bad)
            return
        try:
            trainer.save_checkpoint(self.ckpt_path)
        except OSError as e:  # the disk that failed the run fails this save too: the run's own error is the one said
            log.warning("%s not written: %s", self.ckpt_path, e)

    def teardown(self, trainer: L.Trainer, *_: Any, **__: Any) -> None:
        trainer.strategy.remove_checkpoint(self.ckpt_path)  # a fit that ended well: last.ckpt is newer


EVERY = Range(1, INT32, integer=True, null=True)  # last_every_n_train_steps: updates between saves, or null


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose record of the best checkpoints survives a resume, and whose ``last.ckpt`` is always
    the latest state.

    Lightning (2.6) writes ``last.ckpt`` only when it saves a best one, so a run whose score stopped improving would
    lose every validation since its last best to a kill. Here ``last.ckpt`` is written at every validation (at the
    epoch's end where Lightning saves there), and every ``last_every_n_train_steps`` updates if set (null: at
    validations only); a save at the step of a validation never stands in for that validation's ranking.

    ``train.py ckpt_path=...`` resumes, in the run's own directory (``hydra.run.dir``, as the advice after a stop
    prints it) or in another. Into another, Lightning would forget the best score, so the first validation after the
    resume would count as the best whatever it scored. Here the record is kept wherever its files are (files outside
    this run's directory are never deleted), and entries whose file does not exist are dropped: a checkpoint deleted
    by hand is never reported or tested as the best. Files are written over, never versioned (``last-v1.ckpt``): a
    resume that would move a folder's latest state backwards is refused before it starts.

    Every file is written whole or not at all (:class:`AtomicCheckpointIO`); a resume deletes the
    leftovers of a save cut short (``*.ckpt.part``) in the run's own and the resumed run's folders.

    Each state also keeps the last validation's scores, and a resume starts with them, as the run it continues had
    them: what reads the latest scores before the resumed run's first validation (a plateau schedule at an epoch's
    end, the results of a run resumed past its end) reads those, not nothing.
    """

    _resumed_from: str | None = None
    _scores: dict[str, float] = {}  # the last validation's val/* scores

    def __init__(self, *args: Any, last_every_n_train_steps: Annotated[int, EVERY] | None = None, **kwargs: Any):
        kwargs.setdefault("enable_version_counter", False)  # a resume writes over its own last.ckpt, no last-v1.ckpt
        super().__init__(*args, **kwargs)
        self.last_every_n_train_steps = last_every_n_train_steps
        self._last_saves = 0  # how many times last.ckpt was written: whether Lightning just wrote it
        self._last_step = -1  # the update it was last written at

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict[str, torch.Tensor]) -> None:
        super()._save_last_checkpoint(trainer, monitor_candidates)
        if self.save_last:
            self._last_saves, self._last_step = self._last_saves + 1, trainer.global_step

    def _latest(self, trainer: L.Trainer) -> bool:
        """Whether the latest state may be written now: while fitting, not the sanity check, save_last on."""
        fitting = trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking
        return bool(self.save_last) and fitting and not trainer.fast_dev_run

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any, **kwargs: Any) -> None:
        super().on_train_batch_end(trainer, module, *args, **kwargs)
        n, step = self.last_every_n_train_steps, trainer.global_step
        if n and step and step % n == 0 and step != self._last_step and self._latest(trainer):
            saved = self._last_global_step_saved  # Lightning skips a validation at a step it saved at: not this one
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
            self._last_global_step_saved = saved

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if not trainer.sanity_checking:  # before the saves below: each holds them
            self._scores = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        before = self._last_saves
        super().on_validation_end(trainer, module)
        if self._last_saves == before and not self._should_save_on_train_epoch_end(trainer) and self._latest(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))  # the score did not improve

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        before = self._last_saves
        super().on_train_epoch_end(trainer, module)
        if self._last_saves == before and self._should_save_on_train_epoch_end(trainer) and self._latest(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    @property
    def scores(self) -> dict[str, float]:  # the last validation's val/* scores, as a state saved since holds them
        return dict(self._scores)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "scores": self._scores}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._resumed_from = state_dict.get("dirpath")
        self._scores = dict(state_dict.get("scores") or {})  # none in a state saved before they were kept
        super().load_state_dict({**state_dict, "dirpath": self.dirpath})  # restore the whole record

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        super().on_train_start(trainer, module)
        metrics = trainer.callback_metrics  # the trainer's own dict: what callbacks and schedules read
        metrics.update({k: torch.tensor(v) for k, v in self._scores.items() if k not in metrics})
        if trainer.is_global_zero:
            for folder in {d for d in (self.dirpath, self._resumed_from) if d and os.path.isdir(d)}:
                for part in Path(folder).glob("*.ckpt.part"):
                    log.warning("removing %s: a checkpoint save that was cut short", part)
                    part.unlink(missing_ok=True)
        # rank 0 looks at the files; every rank must then take the same save decisions
        missing = trainer.strategy.broadcast(
            [p for p in [*self.best_k_models, self.last_model_path] if p and not os.path.isfile(p)]
        )
        if not missing:
            return
        self.best_k_models = {path: score for path, score in self.best_k_models.items() if path not in missing}
        self.last_model_path = "" if self.last_model_path in missing else self.last_model_path
        best, worst = (max, min) if self.mode == "max" else (min, max)
        self.best_model_path = best(self.best_k_models, key=self.best_k_models.get) if self.best_k_models else ""
        self.best_model_score = self.best_k_models.get(self.best_model_path)
        if len(self.best_k_models) == self.save_top_k:
            self.kth_best_model_path = worst(self.best_k_models, key=self.best_k_models.get)
            self.kth_value = self.best_k_models[self.kth_best_model_path]
        else:  # not full: the next validation is saved whatever it scores
            self.kth_best_model_path = ""
            self.kth_value = torch.tensor(-torch.inf if self.mode == "max" else torch.inf)


class AlignmentHeatmaps(L.Callback):
    """At every validation, one heatmap per sentence for a fixed set of validation sentences.

    The model translates them with its configured decoding; the cross-attention rows of that
    output are drawn (source pieces across, generated pieces down) as ``alignment/<n>``, with
    the source, reference and hypothesis as text beside it. For a model with decoder
    self-attention (Luong, Transformer) its look-ahead map over the output is logged as ``self_attention/<n>``;
    the map is the attention choice alignments read (``module.alignment``), and a model of several layers or
    heads also gets all of them as one grid of small heatmaps, ``attention_heads/<n>``.
    At the end of training, ``html`` (if set) gets the interactive viewer of every validation's
    alignments, with a slider over the steps.
    """

    def __init__(self, num_sentences: Annotated[int, Range(0, 1000, integer=True)], html: str | None = None):
        self.num_sentences, self.html = num_sentences, html
        self.steps: list[tuple[str, list[dict]]] = []  # (label, viewer sentences) per validation

    def on_validation_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        # at the end, after the module's own epoch end: the attention choice is the one this validation measured
        # (Lightning calls the checkpoint callbacks after the others: each save holds this step)
        if trainer.sanity_checking or not trainer.is_global_zero or self.num_sentences <= 0:
            return
        logger = next((lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)), None)
        dm = trainer.datamodule
        batch = dm.sample_batch("valid", self.num_sentences).to(module.device)
        refs, tok, step = dm.references("valid"), module.tokenizer, trainer.global_step
        was_training = module.training
        module.eval()
        sentences = []
        with torch.inference_mode():
            hyps = module.translate(batch.src, batch.src_len)
            for i, pair in enumerate(batch.idx.tolist()):
                src_ids = batch.src[i, : int(batch.src_len[i])].tolist()
                parts = [(src_ids, hyps[i][:1])]
                choice = module.alignment
                [sentence] = sentence_attention(module.model, tok, refs.src[pair], parts, refs.tgt[pair], choice)
                sentences.append(sentence.to_json())  # kept in the callback's state: plain data in a checkpoint
                if logger is not None:
                    self._log(logger.experiment, i, sentence, step)
        self.steps.append((f"{trainer.global_step} (epoch {trainer.current_epoch})", sentences))
        module.train(was_training)

    @staticmethod
    def _log(writer: Any, i: int, sentence: SentenceAttention, step: int) -> None:
        """TensorBoard: the sentence's cross-attention that alignments read, every layer's and head's as a grid of
        small heatmaps (a model with more than one), its text, and its self-attention where there is one."""
        view = sentence.hypotheses[0]
        c = view.choice
        head = "mean of heads" if c.head is None else f"head {c.head}"
        title = f"hyp: {view.text}  (layer {c.layer}, {head}, {c.readout} readout)"
        fig = heatmap(view.cross, view.src_pieces, view.out_pieces, title=title)
        writer.add_figure(f"alignment/{i}", fig, step)
        if view.heads.shape[0] * view.heads.shape[1] > 1:  # (layers, heads, T + 1, S)
            fig = heatmap_grid(view.heads, view.src_pieces, view.out_pieces, f"hyp: {view.text}", (c.layer, c.head))
            writer.add_figure(f"attention_heads/{i}", fig, step)
        text = f"source: {sentence.source}  \nreference: {sentence.reference}  \nhypothesis: {view.text}"
        writer.add_text(f"alignment/{i}/text", text, step)
        if view.self_map is not None:
            names = dict(x_name="decoder input (English pieces)", y_name="output (English pieces)")
            fig = heatmap(view.self_map, view.in_pieces, view.out_pieces, **names)
            writer.add_figure(f"self_attention/{i}", fig, step)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if self.html and self.steps and trainer.is_global_zero:
            write_report(self.html, self.steps, "Attention alignments of the validation sentences during training")

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}  # a resumed run's viewer starts where the interrupted one stopped

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.steps = list(state_dict.get("steps", []))
