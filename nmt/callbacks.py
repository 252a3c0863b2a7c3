"""Callbacks: per-sentence attention heatmaps and sample translations in TensorBoard."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.loggers import TensorBoardLogger

from .data.batching import BatchDataset
from .data.tokenizer import BOS
from .plotting import heatmap


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
        n = min(self.num_sentences, len(dm.corpora["valid"]))
        batch = BatchDataset(dm.corpora["valid"])[list(range(n))]
        batch = {k: v.to(module.device) for k, v in batch.items()}
        tok = module.tokenizer
        was_training = module.training
        module.eval()
        with torch.inference_mode():
            hyps = module.translate(batch["src"], batch["src_len"])
            for i in range(n):
                hyp = hyps[i][0]
                src_pieces = tok.src_pieces(batch["src"][i, : int(batch["src_len"][i])].tolist())
                out_pieces = tok.tgt_pieces(hyp.tokens) + ["</s>"]
                text = dm.texts["valid"]
                hyp_text = tok.decode_tgt([hyp.tokens])[0]
                fig = heatmap(hyp.attention.numpy(), src_pieces, out_pieces, title=f"hyp: {hyp_text}")
                logger.experiment.add_figure(f"alignment/{i}", fig, trainer.global_step)
                logger.experiment.add_text(
                    f"alignment/{i}/text", f"source: {text.src[i]}  \nreference: {text.tgt[i]}  \nhypothesis: {hyp_text}", trainer.global_step
                )
                self_map = self_attention(module.model, batch["src"][i : i + 1], batch["src_len"][i : i + 1], hyp.tokens)
                if self_map is not None:
                    in_pieces = ["<s>"] + tok.tgt_pieces(hyp.tokens)
                    fig = heatmap(self_map, in_pieces, out_pieces, x_name="decoder input (English pieces)", y_name="output (English pieces)")
                    logger.experiment.add_figure(f"self_attention/{i}", fig, trainer.global_step)
        module.train(was_training)


def self_attention(model, src: torch.Tensor, src_len: torch.Tensor, tokens: list[int]):
    """The decoder's look-ahead self-attention ``(T, T)`` over its own output, or None if it has none."""
    tgt_in = torch.tensor([[BOS, *tokens]], device=src.device)
    _, _, self_w = model(src, src_len, tgt_in)
    if self_w is None:
        return None
    return self_w[0].float().cpu().numpy()
