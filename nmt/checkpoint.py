"""The checkpoint format: what a checkpoint holds, reading it back (older formats upgraded), and every check on it.

A checkpoint is the dict Lightning saves (``state_dict``, ``hyper_parameters`` and training state)
plus an ``nmt`` section with the format number and both sentencepiece models, so one file
translates on its own. Translating, ensembles and averaging read checkpoints here; nothing here
imports Lightning. Every defect of a file gives a :class:`CheckpointError` whose one line names it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.alignment.choice import AttentionChoice
from nmt.data.tokenizer import Tokenizer
from nmt.models.seq2seq import Seq2Seq, build_model
from nmt.specials import LANGUAGES

FORMAT = 4  # 2: each model's settings hold only its keys; 3: the model's parts chosen by _target_; 4: nmt/ in folders
# Where each class and function a checkpoint of format 3 or older may name (a ``_target_`` in its settings) lives now,
# and where each module moved since lives (format 4 names none of them; a setting of an older one that did reads)
MOVED = {
    "nmt.encoder.": "nmt.models.encoder.",
    "nmt.decoders.": "nmt.models.decoders.",
    "nmt.transformer.": "nmt.models.transformer.",
    "nmt.seq2seq.": "nmt.models.seq2seq.",
    "nmt.callbacks.": "nmt.training.callbacks.",
    "nmt.schedules.": "nmt.training.schedules.",
    "nmt.module.": "nmt.training.module.",
    "nmt.data.eflomal.": "nmt.alignment.eflomal.",
    "nmt.ct2.export.": "nmt.ct2_export.",
    "nmt.ct2.engine.": "nmt.inference.ct2.",
    "nmt.data.words.": "nmt.data.toy.morphology.",
    "nmt.data.lexicon.": "nmt.data.toy.lexicon.",
    "nmt.data.prepared.": "nmt.data.prepare.",
}
PREFIX = "model."  # the LightningModule holds the Seq2Seq as ``model``


def languages(reverse: bool = False) -> tuple[str, str]:
    """A model's (source, target) languages: French to English, or the other way (``data.prepare.reverse``)."""
    return LANGUAGES[::-1] if reverse else LANGUAGES


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint of this project; the message names the file."""


def nmt_section(tokenizer_state: dict, alignment: dict | None = None) -> dict:
    """What this project adds to Lightning's checkpoint: the format, both sentencepiece models (``Tokenizer``'s
    ``state_dict``) and, where it was measured, the attention choice of lowest validation AER
    (:class:`~nmt.alignment.choice.AttentionChoice` fields, its ``aer`` and ``step``)."""
    section = {"format": FORMAT, "tokenizer": tokenizer_state}
    return section | ({"alignment": alignment} if alignment else {})


def alignment(ckpt: Mapping) -> AttentionChoice:
    """The attention choice a checkpoint's alignments read: the one training measured best, else the default."""
    record = ckpt["nmt"].get("alignment")
    if not isinstance(record, dict):
        return AttentionChoice()
    fields = ("layer", "head", "readout", "links", "context")
    return AttentionChoice(**{k: record[k] for k in fields if k in record})


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint of ``train.py`` (or ``average.py``) holds, read from Lightning's keys here and nowhere else:
    the run's ``settings`` (``model``, ``optim``, ``decoding``, ...), its sentencepiece models, the attention
    ``alignment`` reads (the recorded choice, with its ``aer`` and ``step`` in ``alignment_record``), the training
    ``step`` and ``epoch``, the ``best_score`` of the monitored validation metric (``monitor``), the ``weights`` it
    translates with (the LightningModule's keys: ``model.`` + the Seq2Seq's), and ``averaged_from``."""

    path: Path
    settings: dict
    tokenizer_state: dict
    alignment: AttentionChoice
    alignment_record: dict | None
    step: int | None
    epoch: int | None
    best_score: float | None
    monitor: str | None
    weights: dict
    averaged_from: list[str] | None = None
    lightning_version: str = ""

    @classmethod
    def of(cls, ckpt: Mapping, path: str | Path, plain: bool = False) -> Checkpoint:
        """The checkpoint ``ckpt`` (as :func:`read` gives it); with ``plain``, an EMA run's un-averaged weights."""
        monitor = best = None
        for name, state in ckpt.get("callbacks", {}).items():
            if "Checkpoint" in name and isinstance(state, dict) and state.get("monitor"):
                monitor, score = state["monitor"], state.get("best_model_score")
                best = float(score) if score is not None else None
        record = ckpt["nmt"].get("alignment")
        return cls(
            path=Path(path),
            settings=ckpt["hyper_parameters"],
            tokenizer_state=ckpt["nmt"]["tokenizer"],
            alignment=alignment(ckpt),
            alignment_record=record if isinstance(record, dict) else None,
            step=ckpt.get("global_step"),
            epoch=ckpt.get("epoch"),
            best_score=best,
            monitor=monitor,
            weights=weights(ckpt, plain),
            averaged_from=ckpt["nmt"].get("averaged_from"),
            lightning_version=ckpt.get("pytorch-lightning_version", ""),
        )

    @property
    def model_settings(self) -> dict:
        return self.settings["model"]

    @property
    def languages(self) -> tuple[str, str]:
        """(source, target): what it translates (checkpoints from before the setting: French to English)."""
        return tuple(self.settings.get("languages") or LANGUAGES)


def read(path: str | Path) -> dict:
    """A checkpoint file's contents, checked to be one of this project's, in the current format."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise CheckpointError(f"{path}: not a checkpoint of this project ({first_line(e)})") from None
    return checked(ckpt, path)


def checked(ckpt: Any, source: str | Path) -> dict:
    """``ckpt`` if it is one of this project's checkpoints (older formats upgraded), else a CheckpointError."""
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("nmt"), dict):
        raise CheckpointError(
            f"{source}: not a checkpoint of this project (no model settings and sentencepiece models inside)"
        )
    nmt, hp = ckpt["nmt"], ckpt.get("hyper_parameters")
    if not isinstance(hp, dict):
        raise CheckpointError(
            f"{source}: not a checkpoint of this project (no model settings and sentencepiece models inside)"
        )
    fmt = nmt.get("format")
    if fmt not in (1, 2, 3, FORMAT):
        raise CheckpointError(f"{source}: checkpoint format {fmt!r} is not one this version reads (1 to {FORMAT})")
    tok = nmt.get("tokenizer")
    if not isinstance(tok, dict) or not all(isinstance(tok.get(k), bytes) for k in ("src", "tgt")):
        raise CheckpointError(f"{source}: its sentencepiece models are missing or not bytes")
    if not isinstance(hp.get("model"), dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise CheckpointError(f"{source}: its model settings or weights are missing")
    if fmt != FORMAT:
        settings = moved({**hp, "model": _flat_sizes(hp["model"])})
        ckpt = {**ckpt, "hyper_parameters": settings, "nmt": {**nmt, "format": FORMAT}}
    return ckpt


def moved(settings: Any) -> Any:
    """``settings`` with every module path of a class or function that has moved since (:data:`MOVED`) renamed."""
    if isinstance(settings, dict):
        return {k: moved(v) for k, v in settings.items()}
    if isinstance(settings, list):
        return [moved(v) for v in settings]
    if isinstance(settings, str):
        old = next((old for old in MOVED if settings.startswith(old)), None)
        return settings if old is None else MOVED[old] + settings.removeprefix(old)
    return settings


def _flat_sizes(model: dict) -> dict:
    """Formats 1 and 2 named the sizes flat (``enc_hidden``, ``dec_hidden``, ...) and the model by ``name``."""
    m = dict(model)
    if m.get("name") not in ("bahdanau", "luong") or "encoder" in m:
        return m
    get = lambda k: m.pop(k, None)  # noqa: E731
    encoder = {"_target_": "nmt.encoder.Encoder", "hidden_size": get("enc_hidden"), "num_layers": get("enc_layers")}
    hidden, attn, layers, heads = get("dec_hidden"), get("attn_hidden"), get("dec_layers"), get("heads")
    if m["name"] == "bahdanau":
        decoder = {"_target_": "nmt.decoders.BahdanauDecoder", "hidden_size": hidden, "attn_hidden": attn}
    else:
        decoder = {"_target_": "nmt.decoders.LuongDecoder", "hidden_size": hidden, "num_layers": layers, "heads": heads}
    return {**m, "encoder": encoder, "decoder": decoder}


def weights(ckpt: Mapping, plain: bool = False) -> dict:
    """A checkpoint's weights: those it translates with, or with ``plain`` the un-averaged ones an EMA run keeps."""
    return ckpt.get("current_model_state", ckpt["state_dict"]) if plain else ckpt["state_dict"]


def tokenizer(state: Mapping, source: str | Path) -> Tokenizer:
    """The sentencepiece models of a checkpoint (its ``tokenizer_state``)."""
    try:
        return Tokenizer.from_state_dict(state)
    except Exception as e:  # noqa: BLE001 - sentencepiece raises RuntimeError or its own errors on bad bytes
        raise CheckpointError(f"{source}: its sentencepiece models are unreadable ({first_line(e)})") from None


@dataclass
class Loaded:
    """A checkpoint's model (eval mode), its sentencepiece models and what else the checkpoint holds."""

    model: Seq2Seq
    tokenizer: Tokenizer
    checkpoint: Checkpoint

    @property
    def path(self) -> Path:
        return self.checkpoint.path


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu", plain: bool = False) -> Loaded:
    """The trained model of a checkpoint written by ``train.py`` (or ``average.py``), on ``device``.

    With ``plain``, an EMA run's un-averaged weights (:func:`weights`).
    """
    saved = Checkpoint.of(read(path), path, plain)
    tok = tokenizer(saved.tokenizer_state, path)
    try:
        vocab = dict(src_vocab_size=tok.src_vocab_size, tgt_vocab_size=tok.tgt_vocab_size)
        model = build_model(**vocab, **saved.model_settings)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: its model settings are invalid ({first_line(e)})") from None
    own = {PREFIX + k: v for k, v in model.state_dict().items()}  # the LightningModule's keys: "model." + the Seq2Seq's
    check_fits(path, saved.weights, "its model settings", own)
    model.load_state_dict({k.removeprefix(PREFIX): v for k, v in saved.weights.items()})
    return Loaded(model.to(device).eval(), tok, saved)


def averaged(first: Checkpoint, weights: dict, step: int, sources: list[str]) -> dict:
    """A checkpoint file's contents for averaged ``weights``: ``first``'s settings and sentencepiece models, the
    largest ``step``, the ``sources`` named; no optimiser state (it translates and fine-tunes, it does not resume)."""
    section = nmt_section(first.tokenizer_state, first.alignment_record) | {"averaged_from": sources}
    return {
        "state_dict": weights,
        "hyper_parameters": first.settings,
        "nmt": section,
        "global_step": step,
        "epoch": first.epoch or 0,
        "pytorch-lightning_version": first.lightning_version,  # Lightning's test() reads it
    }


def check_vocabularies(source: str | Path, saved: Mapping, reference: str | Path, own: Mapping, hint: str) -> None:
    """Raise a CheckpointError unless the sentencepiece models ``saved`` (of ``source``) equal ``own``
    (of ``reference``), naming the side that differs."""
    for side, key in (("target", "tgt"), ("source", "src")):
        if saved[key] != own[key]:
            raise CheckpointError(f"{source}: another {side} vocabulary than {reference}: {hint}")


def check_fits(source: str | Path, saved: Mapping, reference: str, own: Mapping, hint: str = "") -> None:
    """Raise a CheckpointError naming the first weight whose shape in ``saved`` (of ``source``) differs from
    ``own`` (what ``reference`` describes)."""
    theirs, mine = ({k: tuple(v.shape) for k, v in d.items()} for d in (saved, own))
    if theirs == mine:
        return
    key = next(k for k in sorted(theirs.keys() | mine.keys()) if theirs.get(k) != mine.get(k))
    was, expected = (d.get(key, "absent") for d in (theirs, mine))
    raise CheckpointError(
        f"{source}: its weights do not fit {reference} ({key}: {was} saved, {expected} expected)"
        + (f": {hint}" if hint else "")
    )


def write(path: str | Path, ckpt: dict) -> Path:
    """Save ``ckpt`` to ``path`` whole or not at all (a temporary file renamed), the folder checked first."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path}: is a folder; give a file name for the checkpoint")
    if not path.parent.is_dir():
        raise CheckpointError(f"{path}: cannot write: folder {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        torch.save(ckpt, tmp)
        tmp.replace(path)
    except OSError as e:
        raise OSError(f"{path}: cannot write the checkpoint in {path.parent} ({e.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def non_finite(weights: Mapping[str, Any]) -> str | None:
    """The name of the first floating-point tensor of ``weights`` that holds a NaN or an infinity, else None. One
    read from the device where all are finite (a checkpoint's save reads its weights anyway)."""
    floats = {k: v for k, v in weights.items() if isinstance(v, torch.Tensor) and v.is_floating_point()}
    if not floats or bool(torch.stack([torch.isfinite(v).all() for v in floats.values()]).all()):
        return None
    return next(k for k, v in floats.items() if not bool(torch.isfinite(v).all()))


def is_training_state(ckpt: Mapping) -> bool:
    """Whether ``ckpt`` holds what a resume needs besides the weights: the optimiser's state and the loops'."""
    return bool(ckpt.get("optimizer_states")) and isinstance(ckpt.get("loops"), dict)


def step_of(path: str | Path) -> int | None:
    """The training step a checkpoint file was saved at, read without loading its tensors (None: unreadable)."""
    try:
        step = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step")
    except Exception:  # noqa: BLE001 - a damaged or foreign file has no step to compare
        return None
    return step if isinstance(step, int) else None


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:160]}" if text else type(e).__name__
