"""TranslationModule: wires a Seq2Seq model to training with Lightning.

It tells one story: the loss (``Seq2Seq.loss``), the optimiser and its schedule (built from their
``conf/optim`` and ``conf/schedule`` entries), and evaluation (loss, perplexity, BLEU and chrF with
sacrebleu, attention AER where the corpus has gold links). What goes into a checkpoint, and every
check on one, is :mod:`nmt.checkpoint`'s.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.loggers import TensorBoardLogger
from torch import Tensor

from nmt import checkpoint
from nmt.alignment.aer import AERGrid, aer_grid
from nmt.alignment.choice import READOUTS, AttentionChoice, attention_map
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.data.collate import Batch
from nmt.data.tokenizer import Tokenizer
from nmt.hardware import Kernels
from nmt.inference.search import SearchOptions, translate_batch
from nmt.models.loss import guided_alignment_loss
from nmt.models.precision import CastWeights
from nmt.models.seq2seq import Seq2Seq, build_model
from nmt.scores import corpus_scores
from nmt.training.compiled import Compilation, CompiledLoss
from nmt.training.graphs import GraphedLoss
from nmt.training.schedules import run_budgets
from nmt.views.plotting import aer_grid_figure

log = logging.getLogger(__name__)

# the general advice of a checkpoint that does not fit (train.py replaces it with the settings to give, where it can)
RESUME_MODEL_HINT = "resume with the model settings it was trained with"
RESUME_DATA_HINT = "resume with the same data settings"


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list with one item without distributed training)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


@dataclass
class Evaluation:
    """What one pass over a held-out split adds up."""

    hyps: dict[int, str] = field(default_factory=dict)  # pair index -> detokenised best hypothesis
    nll: float = 0.0  # summed over tokens
    tokens: int = 0
    aer: AERGrid = field(default_factory=AERGrid)  # every attention choice against the gold links


class TranslationModule(L.LightningModule):
    """``model``, ``optim``, ``schedule``, ``loss`` and ``decoding`` are the sections of the same name in ``conf/``."""

    def __init__(
        self,
        *,
        model: dict,
        src_vocab_size: int,
        tgt_vocab_size: int,
        optim: dict,
        schedule: dict,
        loss: dict,
        decoding: dict,
        tokenizer: Tokenizer | None = None,
        compile: dict | None = None,  # noqa: A002 - the config section's name
        kernels: dict | None = None,
        languages: tuple[str, str] = checkpoint.LANGUAGES,  # (source, target), recorded for translate.py
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["tokenizer"])
        self.model: Seq2Seq = build_model(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **model)
        self.optim, self.schedule = optim, schedule
        for key, part in (("optim", optim), ("schedule.scheduler", schedule.get("scheduler"))):
            if part is not None:
                _resolvable(key, part)
        self.label_smoothing = loss["label_smoothing"]
        # guided alignment: one attention (a layer's head, or its heads' mean) pulled towards the word links
        self.align_weight = loss.get("align_weight", 0.0)
        # ... in the decoder pass that sees the whole target (Garg et al., 2019) where asked: guidance, validation's
        # AER and the recorded choice all read that pass
        context = "full" if loss.get("align_full_context") else "causal"
        self.align_choice = AttentionChoice(loss.get("align_layer", -1), loss.get("align_head"), context=context)
        if self.align_weight > 0:
            self.align_choice.check(*self.model.attention_layout, name="loss.align_")
        if context == "full" and not self.model.full_context:
            raise ValueError(
                f"loss.align_full_context=true: model={model.get('name') or 'this model'} has no decoder pass that "
                "sees the whole target; use model=transformer, or loss.align_full_context=false"
            )
        self.search = SearchOptions(**decoding)
        self.compilation = Compilation(**(compile or {}))
        self.kernels = Kernels.of(kernels)  # attention backends and float32 products, applied from setup to teardown
        self._kernels_applied = contextlib.ExitStack()
        self._finite: Tensor | None = None  # whether every training loss since the last check was finite (on device)
        self._step_metrics: dict[str, Tensor] = {}  # the last training step's loss and perplexity, on the device
        self.logged: dict[str, float] = {}  # the last logging step's metrics, read from the device (on the host)
        # the training step's loss, compiled where asked (validation and decoding run eager); with compile.graphs the
        # static-shape loss, captured as a CUDA graph per batch shape from the first step on a GPU (setup)
        self._train_loss = CompiledLoss(self.model.loss, self.compilation.dynamic) if self.compilation.enabled else None
        self._graphed: GraphedLoss | None = None
        self._cast: CastWeights | None = None  # mixed precision: the linear layers' weights cast once a step (setup)
        self.tokenizer = tokenizer
        self._eval = Evaluation()
        # what alignments read: the choice of lowest AER at the last validation with gold links (recorded in
        # checkpoints), else the last layer's head mean
        self.alignment, self.alignment_record = AttentionChoice(), None

    @classmethod
    def from_config(cls, cfg: Any, tokenizer: Tokenizer) -> TranslationModule:
        """The module that ``train.py``'s composed config describes, for the data's ``tokenizer``."""
        from omegaconf import OmegaConf

        sections = ("model", "optim", "schedule", "loss", "decoding", "compile", "kernels")
        return cls(
            **{k: OmegaConf.to_container(cfg[k], resolve=True) for k in sections},
            src_vocab_size=tokenizer.src_vocab_size,
            tgt_vocab_size=tokenizer.tgt_vocab_size,
            tokenizer=tokenizer,
            languages=checkpoint.languages(bool(OmegaConf.select(cfg, "data.prepare.reverse", default=False))),
        )

    # --- checkpoints (the format is nmt.checkpoint's) -------------------------------------

    def on_save_checkpoint(self, ckpt: dict) -> None:
        """Every checkpoint (best, last, on exception, averaged, snapshots) passes here: none is written from weights
        that are not finite, which no resume or translation could use."""
        if (bad := checkpoint.non_finite(ckpt["state_dict"])) is not None:
            raise FloatingPointError(f"the weights are not finite at step {self.global_step} ({bad})")
        ckpt["nmt"] = checkpoint.nmt_section(self.tokenizer.state_dict(), self.alignment_record)

    def check_resumable(self, ckpt: dict, source: str | Path = "the checkpoint") -> checkpoint.Checkpoint:
        """``ckpt`` as a Checkpoint; a CheckpointError unless training can go on from it with this module and data."""
        saved = checkpoint.Checkpoint.of(ckpt, source)
        if self.tokenizer is not None:
            own, hint = self.tokenizer.state_dict(), RESUME_DATA_HINT
            checkpoint.check_vocabularies(source, saved.tokenizer_state, "this data config", own, hint)
        checkpoint.check_fits(source, saved.weights, "these model settings", self.state_dict(), RESUME_MODEL_HINT)
        return saved

    def on_load_checkpoint(self, ckpt: dict) -> None:
        ckpt.update(checkpoint.checked(ckpt, "the checkpoint"))
        saved = self.check_resumable(ckpt)
        self.tokenizer = checkpoint.tokenizer(saved.tokenizer_state, "the checkpoint")
        self.alignment_record, self.alignment = saved.alignment_record, saved.alignment

    # --- how it computes -------------------------------------------------------------------

    def setup(self, stage: str) -> None:
        """``kernels`` from here on: training's forward and backward, validation, test and the callbacks' decoding;
        and for fitting, what the training step needs (:meth:`prepare_training_step`)."""
        self._kernels_applied.close()
        self._kernels_applied.enter_context(self.kernels.applied())
        if stage == "fit":
            self.prepare_training_step(str(self.trainer.precision), self.trainer.strategy.root_device)

    def prepare_training_step(self, precision: str, device: torch.device) -> None:
        """What a training step in ``precision`` on ``device`` (where the model is moved after ``setup``) uses beyond
        the model: under mixed precision the linear layers' weights cast once a step (not compiled: Inductor fuses
        casts itself); with ``compile.graphs`` the static-shape loss, captured as CUDA graphs on a GPU (on a CPU it
        runs eager). Called by :meth:`setup`, and by a benchmark's own loop."""
        if self._cast is None and precision.endswith("-mixed") and not self.compilation.enabled:
            self._cast = CastWeights(self.model, self.model.applied_once)
        if self.compilation.graphs and self._graphed is None:
            capture = device.type == "cuda"
            self._graphed = GraphedLoss(self.model, self.label_smoothing, capture=capture, cast=self._cast)

    def teardown(self, stage: str) -> None:
        self._kernels_applied.close()

    # --- training -------------------------------------------------------------------------

    def _loss(
        self, batch: Batch, need_weights: bool = False, train: bool = False
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        b, fn = batch, (self._train_loss if train and self._train_loss is not None else self.model.loss)
        if train and self._graphed is not None:  # no guided alignment here (refused by check_graphs)
            return *self._graphed(b.src, b.src_len, b.tgt_in, b.tgt_out), None
        full = self.align_choice.context == "full"
        host = {} if b.host is None else {"host_len": b.host.src, "tgt_tokens": b.host.tgt_tokens}
        with self._cast.applied() if train and self._cast is not None else contextlib.nullcontext():
            return fn(b.src, b.src_len, b.tgt_in, b.tgt_out, self.label_smoothing, need_weights, full, **host)

    def training_loss(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """The loss a training step minimises, the translation loss plus ``loss.align_weight`` times the guided
        alignment loss of the guided attention; and the step's metrics (perplexity, the guided loss), detached."""
        guided = self.align_weight > 0
        loss, nll, _, cross = self._loss(batch, need_weights=guided, train=True)
        step = {"train/ppl": torch.exp(nll.detach())}
        if guided:
            align = guided_alignment_loss(attention_map(cross, self.align_choice), batch.align)
            step["train/align_loss"] = align.detach()
            loss = loss + self.align_weight * align
        return loss, step

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor:
        loss, step = self.training_loss(batch)
        finite = torch.isfinite(loss.detach())  # read on the host only at logging steps: a read is a host sync
        self._finite = finite if self._finite is None else self._finite & finite
        step["train/loss"] = loss.detach()  # read at logging steps only, the progress bar's figure included
        self._step_metrics = step
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """At logging steps (``trainer.log_every_n_steps``): the step's metrics and the gradient norm before clipping,
        read from the device in one transfer, and the finite-loss check (:meth:`_check_finite`); nothing is read
        between them. Written to the loggers as numbers (``self.log`` would put each on the device and read it back)."""
        if (self.global_step + 1) % max(self.trainer.log_every_n_steps, 1):
            return
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        metrics = {**self._step_metrics, "train/grad_norm": torch.nn.utils.get_total_norm(grads)}
        finite = self._finite if self._finite is not None else torch.ones((), dtype=torch.bool, device=self.device)
        *values, all_finite = torch.stack([*(v.float() for v in metrics.values()), finite.float()]).tolist()
        self._check_finite(all_finite == 1.0)
        self.logged = dict(zip(metrics, values))  # what the progress bar shows until the next logging step
        self.trainer._logger_connector.log_metrics(dict(self.logged))  # as Lightning's own callbacks log

    def _check_finite(self, finite: bool | None = None) -> None:
        """Raise a FloatingPointError, on every rank alike, if a training loss since the last check was not finite
        (``finite``: that, already read; None: read it now): checked every ``trainer.log_every_n_steps`` updates and
        before every validation (which may save a checkpoint), so that no checkpoint holds weights that such a step
        wrote."""
        if finite is None:
            if self._finite is None:
                return
            finite = bool(self._finite)
        self._finite = None
        if not self.trainer.strategy.reduce_boolean_decision(finite, all=True):
            raise FloatingPointError(
                f"training loss is not finite at step {self.global_step} or shortly before (epoch {self.current_epoch})"
            )  # train.py adds what to do (nmt.training.run.fit)

    def on_train_end(self) -> None:
        self._check_finite()
        done = self._train_loss
        if done is not None and self.trainer.is_global_zero:
            state = "failed, trained eager" if done.failed else f"{done.graphs} graph(s) compiled"
            log.info("compile: %s, in steps that took %.1f s", state, done.seconds)

    def configure_optimizers(self) -> Any:
        from hydra.utils import instantiate

        # fused: one kernel over all parameters instead of a loop of small ones (CPU and CUDA), with the gradients
        # clipped by configure_gradient_clipping; only a loss scaler (16-mixed), which a fused step unscales inside,
        # needs the multi-tensor (foreach) step
        trainer = self._trainer
        scaled = trainer is not None and str(trainer.precision).startswith("16") and bool(trainer.gradient_clip_val)
        params = list(self.parameters())
        fused = not scaled and all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
        opt = instantiate(self.optim, _convert_="all")(params, fused=fused, foreach=not fused)
        if self.schedule.get("scheduler") is None:
            return opt
        factory = instantiate(self.schedule["scheduler"], _convert_="all")
        if "budgets" in inspect.signature(factory).parameters:  # a schedule that anneals to the end of the run
            strategy = trainer.strategy if trainer is not None else None
            agree = (lambda x: strategy.broadcast(x, src=0)) if strategy is not None else (lambda x: x)
            factory = functools.partial(factory, budgets=run_budgets(trainer) if trainer else [], agree=agree)
        scheduler = factory(opt)
        extra = {k: v for k, v in self.schedule.items() if k in ("interval", "monitor", "frequency")}
        # strict=False: a plateau schedule steps once there is a score to judge (validating every N epochs)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": scheduler, **extra, "strict": False}}

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:  # fmt: skip
        """Lightning's clipping, except for a fused optimiser: Lightning's mixed-precision plugin refuses to clip for
        one, having a loss scaler in mind (a fused step unscales inside), which bf16 has not (16-mixed's optimiser is
        not fused: :meth:`configure_optimizers`). Clipped by the total norm with torch's multi-tensor kernels."""
        fused = optimizer.defaults.get("fused") and gradient_clip_algorithm in (None, "norm")
        if fused and gradient_clip_val:  # the optimiser's list: self.parameters() would walk every module each step
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val, foreach=True)
        else:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    # --- evaluation -----------------------------------------------------------------------

    def translate(self, src: Tensor, src_len: Tensor) -> list[list]:
        """The configured search (``decoding``) over a batch, in float32 whatever the training precision: the
        translations that validation scores are those ``translate.py`` gives with the checkpoint's float32 weights."""
        with torch.autocast(src.device.type, enabled=False):
            return translate_batch(self.model, src, src_len, self.search)

    def _eval_step(self, batch: Batch, split: str) -> None:
        refs = self.trainer.datamodule.references(split)
        gold = refs.sure is not None
        _, nll, ntok, cross = self._loss(batch, need_weights=gold)
        e = self._eval
        e.nll += float(nll) * int(ntok)
        e.tokens += int(ntok)
        idx = batch.idx.tolist()
        decoded = self.tokenizer.decode_tgt([h[0].tokens for h in self.translate(batch.src, batch.src_len)])
        e.hyps.update(zip(idx, decoded))
        if gold:  # attention of the reference (teacher forcing) against the gold word links, for every choice
            tok = self.tokenizer
            for row, i in enumerate(idx):
                s_len, t_len = int(batch.src_len[row]), int(batch.tgt_len[row]) - 1
                src_pieces = tok.src_pieces(batch.src[row, :s_len].tolist())
                tgt_pieces = tok.tgt_pieces(batch.tgt_out[row, :t_len].tolist())
                words = len(refs.src[i].split()), len(refs.tgt[i].split())
                sure, possible = parse_links(refs.sure[i]), parse_links(refs.possible[i])
                weights = cross[row, ..., : t_len + 1, :s_len].float().cpu()  # (layers, heads, T + 1, S)
                e.aer.add(aer_grid(weights, src_pieces, tgt_pieces, sure, possible, words))

    def _eval_end(self, split: str, prefix: str) -> None:
        e, self._eval = self._eval, Evaluation()
        hyps: dict[int, str] = {}
        for part in gather_objects(e.hyps):
            hyps.update(part)
        sums = torch.tensor([e.nll, e.tokens], dtype=torch.float64, device=self.device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
        aer = AERGrid.merged(gather_objects(e.aer))  # every rank's share
        refs = self.trainer.datamodule.references(split)
        order = sorted(hyps)
        bleu, chrf = corpus_scores([hyps[i] for i in order], [refs.tgt[i] for i in order])
        nll = float(sums[0] / sums[1].clamp(min=1))
        metrics = {
            f"{prefix}/loss": nll,
            f"{prefix}/ppl": math.exp(min(nll, 50)),
            f"{prefix}/bleu": bleu,
            f"{prefix}/chrf": chrf,
            f"{prefix}/sentences": float(len(hyps)),  # all ranks' shares: the whole split
        }
        if refs.sure is not None:
            metrics[f"{prefix}/aer_skipped"] = float(aer.skipped)  # pairs left out (pieces do not form the words)
            if aer.counts is not None:
                metrics |= self._alignment_metrics(prefix, aer)
        # computed from every rank's share (gathered above): the same on all ranks, so syncing changes nothing
        self.log_dict(metrics, sync_dist=True)  # TensorBoard and the log: the progress bar shows training (BAR)

    def _alignment_metrics(self, prefix: str, grid: AERGrid) -> dict[str, float]:
        """AER of every attention choice ``(readouts, layers, heads + 1, links)``: on validation ``val/aer`` is the
        best, which becomes the choice alignments read; on test ``test/aer`` is that choice's. Each readout's and
        each way of reading links' best, and the grid of the chosen links as a TensorBoard heatmap."""
        aer = grid.aers()
        heads = aer.shape[2] - 1
        if prefix == "val":
            choice, best = grid.best()
            self.alignment = replace(choice, context=self.align_choice.context)  # the pass validation read
            self.alignment_record = {**self.alignment.as_dict(), "aer": best, "step": self.global_step}
        c = self.alignment
        k = COMBINATIONS.index(c.links)
        chosen = aer[READOUTS.index(c.readout), c.layer, heads if c.head is None else c.head, k]
        out = {f"{prefix}/aer": float(chosen)}
        out |= {f"{prefix}/aer_{r}": float(aer[i].nan_to_num(2.0).min()) for i, r in enumerate(READOUTS)}
        out |= {f"{prefix}/aer_links_{n}": float(aer[..., i].nan_to_num(2.0).min()) for i, n in enumerate(COMBINATIONS)}
        for lg in self.loggers:
            if isinstance(lg, TensorBoardLogger):
                fig = aer_grid_figure(aer[..., k].cpu().numpy(), READOUTS, c)
                lg.experiment.add_figure(f"{prefix}/aer_grid", fig, self.global_step)
        return out

    def on_validation_epoch_start(self) -> None:
        self._check_finite()
        self._eval = Evaluation()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "valid")

    def on_validation_epoch_end(self) -> None:
        self._eval_end("valid", "val")

    def on_test_epoch_start(self) -> None:
        self._eval = Evaluation()

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_end("test", "test")


def _resolvable(key: str, part: dict) -> None:
    """Raise a ValueError naming ``key`` unless its ``_target_`` names something that can be imported."""
    from hydra.utils import get_object

    target = part.get("_target_") if isinstance(part, dict) else None
    try:
        get_object(target)
    except Exception as e:  # noqa: BLE001 - Hydra wraps import errors in its own
        raise ValueError(f"{key}._target_={target!r}: cannot be imported ({checkpoint.first_line(e)})") from None
