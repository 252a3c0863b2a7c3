"""Callbacks: checkpoints that keep the best score across resumes, target tokens/s, attention heatmaps."""

from __future__ import annotations

import os
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.loggers import TensorBoardLogger

from .plotting import heatmap
from .specials import BOS


def _sentences(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["src"].shape[0])


def _target_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["tgt_len"].sum())  # real target tokens, EOS included: what the loss is computed on


class TokenThroughput(ThroughputMonitor):
    """Lightning's ``ThroughputMonitor`` counting sentences and real target tokens.

    Logs ``train/device/items_per_sec`` (target tokens/s of one device; validation time left
    out) and ``train/device/samples_per_sec`` (sentences/s) over the last ``window_size``
    batches, and with several devices ``train/items_per_sec`` and ``train/samples_per_sec``
    for all of them (rank 0's rate times the world size).
    """

    def __init__(self, window_size: int):
        super().__init__(batch_size_fn=_sentences, length_fn=_target_tokens, window_size=window_size)
        self._module_has_flops = False  # no FLOP count: skip its warning about a missing flops_per_batch


class RunCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose record of the best checkpoints survives a resume.

    ``train.py ckpt_path=...`` resumes into a new run directory. Lightning then forgets the best
    score, so the first validation after the resume would count as the best whatever it scored.
    Here the record is kept wherever its files are (files outside this run's directory are never
    deleted), and entries whose file does not exist are dropped: a save cut short by Ctrl-C, or a
    checkpoint deleted by hand, is never reported or tested as the best.
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict({**state_dict, "dirpath": self.dirpath})  # restore the whole record

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        super().on_train_start(trainer, module)
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
    self-attention (Luong) its look-ahead map over the output is logged as ``self_attention/<n>``.
    """

    def __init__(self, num_sentences: int = 4):
        self.num_sentences = num_sentences

    def on_validation_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or self.num_sentences <= 0:
            return
        logger = next((lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)), None)
        if logger is None:
            return
        dm = trainer.datamodule
        batch = {k: v.to(module.device) for k, v in dm.sample_batch("valid", self.num_sentences).items()}
        refs = dm.references("valid")
        tok = module.tokenizer
        was_training = module.training
        module.eval()
        with torch.inference_mode():
            hyps = module.translate(batch["src"], batch["src_len"])
            for i, pair in enumerate(batch["idx"].tolist()):
                hyp = hyps[i][0]
                src_pieces = tok.src_pieces(batch["src"][i, : int(batch["src_len"][i])].tolist())
                out_pieces = tok.output_labels(hyp.tokens)
                hyp_text = tok.decode_tgt([hyp.tokens])[0]
                fig = heatmap(hyp.attention.numpy(), src_pieces, out_pieces, title=f"hyp: {hyp_text}")
                logger.experiment.add_figure(f"alignment/{i}", fig, trainer.global_step)
                text = f"source: {refs.src[pair]}  \nreference: {refs.tgt[pair]}  \nhypothesis: {hyp_text}"
                logger.experiment.add_text(f"alignment/{i}/text", text, trainer.global_step)
                self_map = self_attention(
                    module.model, batch["src"][i : i + 1], batch["src_len"][i : i + 1], hyp.tokens
                )
                if self_map is not None:
                    in_pieces = tok.input_labels(hyp.tokens)
                    names = dict(x_name="decoder input (English pieces)", y_name="output (English pieces)")
                    fig = heatmap(self_map, in_pieces, out_pieces, **names)
                    logger.experiment.add_figure(f"self_attention/{i}", fig, trainer.global_step)
        module.train(was_training)


def self_attention(model, src: torch.Tensor, src_len: torch.Tensor, tokens: list[int]):
    """The decoder's look-ahead self-attention ``(T, T)`` over its own output, or None if it has none."""
    tgt_in = torch.tensor([[BOS, *tokens]], device=src.device)
    _, _, self_w = model(src, src_len, tgt_in)
    if self_w is None:
        return None
    return self_w[0].float().cpu().numpy()
