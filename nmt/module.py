"""TranslationModule: wires a Seq2Seq model to training with Lightning.

Loss, optimiser and schedule, metrics (loss, perplexity, tokens/s, gradient norm, BLEU and
chrF with sacrebleu, attention AER on corpora with gold alignments), and self-contained
checkpoints (hyper-parameters and sentencepiece models inside).
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

import lightning as L
import sacrebleu
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from .alignment import AERCounts, attention_links, parse_links
from .data.tokenizer import PAD, Tokenizer
from .search import translate_batch
from .seq2seq import Seq2Seq, build_model

CHECKPOINT_FORMAT = 1


def _in_compute_dtype(hidden: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The output layer's inputs in the dtype its products run in: autocast's when on (as ``F.linear``), else ``hidden``'s."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    return hidden.to(dtype), weight.to(dtype), bias.to(dtype)


def _log_probs(hidden: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Output layer (inputs already in the compute dtype) then log-softmax in float32: ``(N, R)`` -> ``(N, V)``."""
    with torch.autocast(hidden.device.type, enabled=False):
        logits = torch.addmm(bias, hidden, weight.t())
    return F.log_softmax(logits.float(), dim=-1)


def _smoothed(logp: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Mean label-smoothed loss and mean NLL from log-probabilities ``(N, V)``."""
    nll = -logp.gather(1, target.unsqueeze(1)).mean()
    return (1 - smoothing) * nll - smoothing * logp.mean(), nll


class _OutputLayerLoss(torch.autograd.Function):
    """Output layer and label-smoothed cross-entropy in one function.

    The ``(N, V)`` log-probabilities are the largest tensor of a training step, and every pass
    over them costs time on a CPU. Here the forward turns them in place into the gradient
    ``softmax - (1-e) onehot - e/V`` and multiplies it out at once (the three products of the
    output layer's backward), so nothing ``(N, V)``-sized is kept for the backward pass and
    autograd's extra passes (zero fills, scatter, expand, division) never happen.
    """

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
        h, w, b = _in_compute_dtype(hidden, weight, bias)
        logp = _log_probs(h, w, b)  # (N, V)
        loss, nll = _smoothed(logp, target, smoothing)
        N, V = logp.shape
        grad = logp.exp_().sub_(smoothing / V)  # (N, V): d(N * loss)/d logits
        grad[torch.arange(N, device=grad.device), target] -= 1 - smoothing
        with torch.autocast(hidden.device.type, enabled=False):
            grad = grad.to(h.dtype)
            ctx.save_for_backward(grad @ w, grad.t() @ h, grad.sum(0))  # (N, R), (V, R), (V,)
        ctx.n, ctx.dtypes = N, (hidden.dtype, weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        scale = grad_loss / ctx.n
        return *(g.mul(scale).to(dtype) for g, dtype in zip(ctx.saved_tensors, ctx.dtypes)), None, None


def output_layer_loss(hidden: Tensor, weight: Tensor, bias: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Mean label-smoothed loss and mean NLL (no gradient) of the output layer ``hidden @ weight.T + bias``.

    ``hidden (N, R)`` holds real target positions only, ``target (N,)`` their ids.
    """
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad or bias.requires_grad):
        return _OutputLayerLoss.apply(hidden, weight, bias, target, smoothing)
    return _smoothed(_log_probs(*_in_compute_dtype(hidden, weight, bias)), target, smoothing)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list with one item without distributed training)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class TranslationModule(L.LightningModule):
    def __init__(
        self,
        model: dict,
        src_vocab_size: int,
        tgt_vocab_size: int,
        optim: dict | None = None,
        loss: dict | None = None,
        decoding: dict | None = None,
        tokenizer: Tokenizer | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["tokenizer"])
        self.model: Seq2Seq = build_model(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, pad_id=PAD, **model)
        defaults = dict(name="adam", lr=1e-3, betas=(0.9, 0.98), weight_decay=0.0, schedule="inverse_sqrt", warmup_steps=200)
        self.optim = defaults | dict(plateau_factor=0.5, plateau_patience=2) | (optim or {})
        self.smoothing = (loss or {}).get("label_smoothing", 0.1)
        self.decoding = dict(beam_size=1, alpha=0.6, max_len_a=1.5, max_len_b=10) | (decoding or {})
        self.tokenizer = tokenizer
        self._eval: dict[str, Any] = {}
        self._tokens_seen = 0
        self._clock: deque[tuple[float, int, float]] = deque(maxlen=21)  # (time, tokens seen, time paused) per step
        self._paused = 0.0  # seconds spent validating

    # --- checkpoints ----------------------------------------------------------------------

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["nmt"] = {"format": CHECKPOINT_FORMAT, "tokenizer": self.tokenizer.state_dict()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "nmt" not in checkpoint:
            raise ValueError("not a checkpoint of this project (no sentencepiece models inside)")
        saved = checkpoint["nmt"]["tokenizer"]
        if self.tokenizer is not None and self.tokenizer.state_dict() != saved:
            raise ValueError("the checkpoint was trained with other sentencepiece models than this data config gives: resume with the same data settings")
        self.tokenizer = Tokenizer.from_state_dict(saved)

    # --- training -------------------------------------------------------------------------

    def _loss(self, batch: dict[str, Tensor], need_weights: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Loss, NLL and token count over real target tokens; the output layer never sees padding."""
        model = self.model
        state = model.encode(batch["src"], batch["src_len"])
        features, cross, _ = model.decode(state, batch["tgt_in"], need_weights=need_weights)
        real = batch["tgt_out"] != PAD  # (B, T)
        hidden = model.decoder.readout(features[real])  # (N, R), N = real target tokens
        loss, nll = output_layer_loss(hidden, model.output.weight, model.output.bias, batch["tgt_out"][real], self.smoothing)
        return loss, nll, real.sum(), cross

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, nll, ntok, _ = self._loss(batch)
        finite = self.trainer.strategy.reduce_boolean_decision(bool(torch.isfinite(loss)), all=True)
        if not finite:
            raise FloatingPointError(
                f"training loss is {loss.item()} at step {self.global_step} (epoch {self.current_epoch}): stopping; "
                "lower optim.lr, raise trainer.gradient_clip_val or use precision=32-true, then resume from the last checkpoint"
            )
        self._tokens_seen += int(ntok)
        bs = batch["src"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=bs)
        self.log("train/ppl", torch.exp(nll.detach()), batch_size=bs)
        # target tokens/s over the last log interval, validation time excluded
        now = time.perf_counter()
        self._clock.append((now, self._tokens_seen, self._paused))
        if len(self._clock) > 1:
            (t0, n0, p0), (t1, n1, p1) = self._clock[0], self._clock[-1]
            rate = (n1 - n0) / max(t1 - t0 - (p1 - p0), 1e-9)
            self.log("train/tgt_tokens_per_s", float(rate), prog_bar=True, sync_dist=True, reduce_fx="sum", batch_size=bs)
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        grads = [p.grad.detach() for p in self.parameters() if p.grad is not None]
        self.log("train/grad_norm", torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))  # before clipping

    def configure_optimizers(self) -> Any:
        o = self.optim
        cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(o["name"])
        if cls is None:
            raise ValueError(f"optim.name must be adam or adamw, not {o['name']!r}")
        # fused: one kernel over all parameters instead of a loop of small ones (CPU and CUDA)
        fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in self.parameters())
        opt = cls(self.parameters(), lr=o["lr"], betas=tuple(o["betas"]), weight_decay=o["weight_decay"], fused=fused)
        if o["schedule"] == "constant":
            return opt
        if o["schedule"] == "inverse_sqrt":
            warmup = max(1, o["warmup_steps"])
            fn = lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))  # noqa: E731
            return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.LambdaLR(opt, fn), "interval": "step"}}
        if o["schedule"] == "plateau":
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=o["plateau_factor"], patience=o["plateau_patience"])
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val/bleu", "interval": "epoch"}}
        raise ValueError(f"optim.schedule must be constant, inverse_sqrt or plateau, not {o['schedule']!r}")

    # --- evaluation -----------------------------------------------------------------------

    def translate(self, src: Tensor, src_len: Tensor, **overrides) -> list[list]:
        kw = self.decoding | overrides
        return translate_batch(self.model, src, src_len, kw.pop("beam_size"), kw.pop("nbest", 1), **kw)

    def _eval_start(self) -> None:
        self._eval = {"hyps": {}, "nll": 0.0, "tokens": 0, "aer": AERCounts()}

    def _eval_step(self, batch: dict[str, Tensor], split: str) -> None:
        texts = self.trainer.datamodule.texts[split]
        gold = texts.sure is not None
        _, nll, ntok, cross = self._loss(batch, need_weights=gold)
        self._eval["nll"] += float(nll) * int(ntok)
        self._eval["tokens"] += int(ntok)
        idx = batch["idx"].tolist()
        hyps = self.translate(batch["src"], batch["src_len"])
        decoded = self.tokenizer.decode_tgt([h[0].tokens for h in hyps])
        self._eval["hyps"].update(zip(idx, decoded))
        if gold:  # attention of the reference (teacher forcing) against the gold word links
            tok = self.tokenizer
            for row, i in enumerate(idx):
                s_len, t_len = int(batch["src_len"][row]), int(batch["tgt_len"][row]) - 1
                links = attention_links(cross[row], tok.src_pieces(batch["src"][row, :s_len].tolist()), tok.tgt_pieces(batch["tgt_out"][row, :t_len].tolist()))
                if links is not None:
                    self._eval["aer"].add(links, parse_links(texts.sure[i]), parse_links(texts.possible[i]))

    def _eval_end(self, split: str, prefix: str) -> None:
        e = self._eval
        hyps: dict[int, str] = {}
        for part in gather_objects(e["hyps"]):
            hyps.update(part)
        sums = torch.tensor([e["nll"], e["tokens"]], dtype=torch.float64, device=self.device)
        aer = e["aer"].as_tensor().to(self.device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
            dist.all_reduce(aer)
        refs = self.trainer.datamodule.texts[split].tgt
        order = sorted(hyps)
        bleu = sacrebleu.corpus_bleu([hyps[i] for i in order], [[refs[i] for i in order]])
        chrf = sacrebleu.corpus_chrf([hyps[i] for i in order], [[refs[i] for i in order]])
        nll = float(sums[0] / sums[1].clamp(min=1))
        metrics = {f"{prefix}/loss": nll, f"{prefix}/ppl": math.exp(min(nll, 50)), f"{prefix}/bleu": bleu.score, f"{prefix}/chrf": chrf.score}
        metrics[f"{prefix}/sentences"] = float(len(hyps))  # all ranks' shares: the whole split
        if self.trainer.datamodule.texts[split].sure is not None:
            metrics[f"{prefix}/aer"] = AERCounts.aer(aer.cpu())
        # computed from every rank's share (gathered above): the same on all ranks, so syncing changes nothing
        self.log_dict(metrics, prog_bar=prefix == "val", sync_dist=True)
        self._eval = {}

    def on_validation_epoch_start(self) -> None:
        self._eval_start()
        self._eval["started"] = time.perf_counter()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "valid")

    def on_validation_epoch_end(self) -> None:
        started = self._eval["started"]
        self._eval_end("valid", "val")
        self._paused += time.perf_counter() - started

    def on_test_epoch_start(self) -> None:
        self._eval_start()

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_end("test", "test")
