"""TranslationModule: wires a Seq2Seq model to training with Lightning.

It tells one story: the loss (``Seq2Seq.loss``), the optimiser and its schedule, and evaluation
(loss, perplexity, BLEU and chrF with sacrebleu, attention AER where the corpus has gold links).
It also owns the checkpoint format: hyper-parameters and both sentencepiece models are inside,
and :meth:`TranslationModule.from_checkpoint` is the one loader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import sacrebleu
import torch
import torch.distributed as dist
from torch import Tensor

from .alignment import AERCounts, attention_links, parse_links
from .data.tokenizer import Tokenizer
from .search import SearchOptions, translate_batch
from .seq2seq import Seq2Seq, build_model

CHECKPOINT_FORMAT = 2  # 2: each model's settings hold only the keys it uses


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint of this project; the message names the file."""


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
    aer: AERCounts = field(default_factory=AERCounts)
    aer_skipped: int = 0  # pairs whose pieces do not form the gold links' words


class TranslationModule(L.LightningModule):
    """``model``, ``optim``, ``loss`` and ``decoding`` are the sections of the same name in ``conf/``."""

    def __init__(
        self,
        *,
        model: dict,
        src_vocab_size: int,
        tgt_vocab_size: int,
        optim: dict,
        loss: dict,
        decoding: dict,
        tokenizer: Tokenizer | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["tokenizer"])
        self.model: Seq2Seq = build_model(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **model)
        self.optim = optim
        self.label_smoothing = loss["label_smoothing"]
        self.search = SearchOptions(**decoding)
        self.tokenizer = tokenizer
        self._eval = Evaluation()

    @classmethod
    def from_config(cls, cfg: Any, tokenizer: Tokenizer) -> TranslationModule:
        """The module that ``train.py``'s composed config describes, for the data's ``tokenizer``."""
        from omegaconf import OmegaConf

        sections = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in ("model", "optim", "loss", "decoding")}
        return cls(
            **sections,
            src_vocab_size=tokenizer.src_vocab_size,
            tgt_vocab_size=tokenizer.tgt_vocab_size,
            tokenizer=tokenizer,
        )

    # --- checkpoints ----------------------------------------------------------------------

    @staticmethod
    def read_checkpoint(path: str | Path) -> dict:
        """A checkpoint file's contents, checked to be one of this project's, in the current format."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"{path}: checkpoint not found")
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unpickling failure means "not ours"
            reason = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
            raise CheckpointError(f"{path}: not a checkpoint of this project ({type(e).__name__}: {reason})") from None
        return _checked(ckpt, path)

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str | torch.device = "cpu") -> TranslationModule:
        """The trained module of a checkpoint written by ``train.py``, in eval mode on ``device``."""
        ckpt = cls.read_checkpoint(path)
        try:
            tokenizer = Tokenizer.from_state_dict(ckpt["nmt"]["tokenizer"])
        except Exception as e:  # noqa: BLE001 - sentencepiece raises RuntimeError or its own errors on bad bytes
            raise CheckpointError(f"{path}: its sentencepiece models are unreadable ({_first_line(e)})") from None
        try:
            module = cls(**ckpt["hyper_parameters"], tokenizer=tokenizer)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: its model settings are invalid ({_first_line(e)})") from None
        if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (
            module.model.encoder.embedding.num_embeddings,
            module.model.output.out_features,
        ):
            raise CheckpointError(f"{path}: its sentencepiece vocabularies do not match the model's sizes")
        try:
            module.load_state_dict(ckpt["state_dict"])
        except RuntimeError as e:
            raise CheckpointError(f"{path}: its weights do not fit its model settings ({_first_line(e)})") from None
        return module.to(device).eval()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["nmt"] = {"format": CHECKPOINT_FORMAT, "tokenizer": self.tokenizer.state_dict()}

    def check_resumable(self, checkpoint: dict, source: str | Path = "the checkpoint") -> None:
        """Raise a CheckpointError unless training can go on from ``checkpoint`` with this module and data."""
        saved = checkpoint["nmt"]["tokenizer"]
        if self.tokenizer is not None and self.tokenizer.state_dict() != saved:
            raise CheckpointError(
                f"{source}: trained with other sentencepiece models than this data config gives: "
                "resume with the same data settings"
            )
        own = {k: v.shape for k, v in self.state_dict().items()}
        theirs = {k: v.shape for k, v in checkpoint["state_dict"].items()}
        if own != theirs:
            key = next(k for k in sorted(own.keys() | theirs.keys()) if own.get(k) != theirs.get(k))
            saved, here = (tuple(d[key]) if key in d else "absent" for d in (theirs, own))
            raise CheckpointError(
                f"{source}: its weights do not fit these model settings ({key}: {saved} saved, {here} here): "
                "resume with the model settings it was trained with"
            )

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        checkpoint.update(_checked(checkpoint, "the checkpoint"))
        self.check_resumable(checkpoint)
        self.tokenizer = Tokenizer.from_state_dict(checkpoint["nmt"]["tokenizer"])

    # --- training -------------------------------------------------------------------------

    def _loss(
        self, batch: dict[str, Tensor], need_weights: bool = False
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        b = batch
        return self.model.loss(b["src"], b["src_len"], b["tgt_in"], b["tgt_out"], self.label_smoothing, need_weights)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, nll, _, _ = self._loss(batch)
        finite = self.trainer.strategy.reduce_boolean_decision(bool(torch.isfinite(loss)), all=True)
        if not finite:
            raise FloatingPointError(
                f"training loss is {loss.item()} at step {self.global_step} (epoch {self.current_epoch}): stopping; "
                "lower optim.lr, raise trainer.gradient_clip_val or use precision=32-true, "
                "then resume from the last checkpoint"
            )
        bs = batch["src"].shape[0]
        self.log("train/loss", loss, prog_bar=True, batch_size=bs)
        self.log("train/ppl", torch.exp(nll.detach()), batch_size=bs)
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        grads = [p.grad.detach() for p in self.parameters() if p.grad is not None]
        self.log(
            "train/grad_norm", torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        )  # before clipping

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
            sched = torch.optim.lr_scheduler.LambdaLR(opt, fn)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
        if o["schedule"] != "plateau":
            raise ValueError(f"optim.schedule must be constant, inverse_sqrt or plateau, not {o['schedule']!r}")
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="max", factor=o["plateau_factor"], patience=o["plateau_patience"]
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val/bleu", "interval": "epoch"}}

    # --- evaluation -----------------------------------------------------------------------

    def translate(self, src: Tensor, src_len: Tensor) -> list[list]:
        """The configured search (``decoding``) over a batch."""
        return translate_batch(self.model, src, src_len, self.search)

    def _eval_step(self, batch: dict[str, Tensor], split: str) -> None:
        refs = self.trainer.datamodule.references(split)
        gold = refs.sure is not None
        _, nll, ntok, cross = self._loss(batch, need_weights=gold)
        e = self._eval
        e.nll += float(nll) * int(ntok)
        e.tokens += int(ntok)
        idx = batch["idx"].tolist()
        decoded = self.tokenizer.decode_tgt([h[0].tokens for h in self.translate(batch["src"], batch["src_len"])])
        e.hyps.update(zip(idx, decoded))
        if gold:  # attention of the reference (teacher forcing) against the gold word links
            tok = self.tokenizer
            for row, i in enumerate(idx):
                s_len, t_len = int(batch["src_len"][row]), int(batch["tgt_len"][row]) - 1
                src_pieces = tok.src_pieces(batch["src"][row, :s_len].tolist())
                tgt_pieces = tok.tgt_pieces(batch["tgt_out"][row, :t_len].tolist())
                words = len(refs.src[i].split()), len(refs.tgt[i].split())
                links = attention_links(cross[row], src_pieces, tgt_pieces, *words)
                if links is None:
                    e.aer_skipped += 1
                else:
                    e.aer.add(links, parse_links(refs.sure[i]), parse_links(refs.possible[i]))

    def _eval_end(self, split: str, prefix: str) -> None:
        e, self._eval = self._eval, Evaluation()
        hyps: dict[int, str] = {}
        for part in gather_objects(e.hyps):
            hyps.update(part)
        sums = torch.tensor([e.nll, e.tokens, e.aer_skipped], dtype=torch.float64, device=self.device)
        aer = e.aer.as_tensor().to(self.device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
            dist.all_reduce(aer)
        refs = self.trainer.datamodule.references(split)
        order = sorted(hyps)
        out, ref = [hyps[i] for i in order], [[refs.tgt[i] for i in order]]
        nll = float(sums[0] / sums[1].clamp(min=1))
        metrics = {
            f"{prefix}/loss": nll,
            f"{prefix}/ppl": math.exp(min(nll, 50)),
            f"{prefix}/bleu": sacrebleu.corpus_bleu(out, ref).score,
            f"{prefix}/chrf": sacrebleu.corpus_chrf(out, ref).score,
            f"{prefix}/sentences": float(len(hyps)),  # all ranks' shares: the whole split
        }
        if refs.sure is not None:
            metrics[f"{prefix}/aer"] = AERCounts.aer(aer.cpu())
            metrics[f"{prefix}/aer_skipped"] = float(
                sums[2]
            )  # pairs left out of the AER (pieces do not form the words)
        # computed from every rank's share (gathered above): the same on all ranks, so syncing changes nothing
        self.log_dict(metrics, prog_bar=prefix == "val", sync_dist=True)

    def on_validation_epoch_start(self) -> None:
        self._eval = Evaluation()

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "valid")

    def on_validation_epoch_end(self) -> None:
        self._eval_end("valid", "val")

    def on_test_epoch_start(self) -> None:
        self._eval = Evaluation()

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_end("test", "test")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:160]}" if text else type(e).__name__


def _upgrade(hp: dict) -> dict:
    """Format 1 kept every model key for both models; drop those the model never read."""
    model = dict(hp["model"])
    unused = {"bahdanau": ("heads", "dec_layers"), "luong": ("attn_hidden",)}.get(model.get("name"), ())
    return {**hp, "model": {k: v for k, v in model.items() if k not in unused}}


def _checked(ckpt: Any, source: str | Path) -> dict:
    """``ckpt`` if it is one of this project's checkpoints (older formats upgraded), else a CheckpointError."""
    if (
        not isinstance(ckpt, dict)
        or not isinstance(ckpt.get("nmt"), dict)
        or not isinstance(ckpt.get("hyper_parameters"), dict)
    ):
        raise CheckpointError(
            f"{source}: not a checkpoint of this project (no model settings and sentencepiece models inside)"
        )
    nmt, hp = ckpt["nmt"], ckpt["hyper_parameters"]
    fmt = nmt.get("format")
    if fmt not in (1, CHECKPOINT_FORMAT):
        raise CheckpointError(
            f"{source}: checkpoint format {fmt!r} is not one this version reads (1 or {CHECKPOINT_FORMAT})"
        )
    tok = nmt.get("tokenizer")
    if not isinstance(tok, dict) or not all(isinstance(tok.get(k), bytes) for k in ("src", "tgt")):
        raise CheckpointError(f"{source}: its sentencepiece models are missing or not bytes")
    if not isinstance(hp.get("model"), dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise CheckpointError(f"{source}: its model settings or weights are missing")
    if fmt == 1:
        ckpt = {**ckpt, "hyper_parameters": _upgrade(hp), "nmt": {**nmt, "format": CHECKPOINT_FORMAT}}
    return ckpt
