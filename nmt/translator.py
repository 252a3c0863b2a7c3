"""Translating text with a trained checkpoint: the Python API behind ``translate.py``.

from nmt.translator import translate
translate("runs/.../best.ckpt", ["Le chat dort."], beam_size=5)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .alignment import WORD_START
from .data.readers import normalize
from .data.tokenizer import PAD, Tokenizer
from .module import CHECKPOINT_FORMAT, TranslationModule
from .search import Hypothesis, translate_batch

log = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A path that is not a usable checkpoint of this project."""


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> TranslationModule:
    """The trained module of a checkpoint written by ``train.py`` (hyper-parameters and subwords inside)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise CheckpointError(f"{path}: not a checkpoint of this project ({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    if not isinstance(ckpt, dict) or "nmt" not in ckpt or "hyper_parameters" not in ckpt:
        raise CheckpointError(f"{path}: not a checkpoint of this project (no model settings and sentencepiece models inside)")
    if ckpt["nmt"].get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {ckpt['nmt'].get('format')} is not the supported {CHECKPOINT_FORMAT}")
    hp = dict(ckpt["hyper_parameters"])
    module = TranslationModule(**hp, tokenizer=Tokenizer.from_state_dict(ckpt["nmt"]["tokenizer"]))
    module.load_state_dict(ckpt["state_dict"])
    return module.to(device).eval()


@dataclass
class Translation:
    source: str
    hypotheses: list[Hypothesis] = field(default_factory=list)  # n-best, best first (split lines: best of each part)
    texts: list[str] = field(default_factory=list)  # n-best texts
    chunks: list[tuple[list[int], Hypothesis]] = field(default_factory=list)  # (source ids, best hypothesis) per chunk

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


def split_ids(ids: list[int], pieces: list[str], max_len: int) -> list[list[int]]:
    """Cut a long source into chunks of at most ``max_len`` pieces, at word starts where possible."""
    chunks, start = [], 0
    while len(ids) - start > max_len:
        end = start + max_len
        cut = next((i for i in range(end, start, -1) if pieces[i].startswith(WORD_START)), end)
        chunks.append(ids[start:cut])
        start = cut
    chunks.append(ids[start:])
    return chunks


class Translator:
    """Batched translation that returns results in input order whatever the internal batching."""

    def __init__(
        self,
        module: TranslationModule,
        beam_size: int = 5,
        nbest: int = 1,
        alpha: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        batch_size: int = 4000,
        batch_type: str = "tokens",
        max_src_len: int = 256,
        long_lines: str = "split",
    ):
        if not 1 <= nbest <= beam_size:
            raise ValueError(f"--nbest ({nbest}) must be between 1 and the beam size ({beam_size})")
        if batch_type not in ("sentences", "tokens"):
            raise ValueError(f"batch type must be sentences or tokens, not {batch_type!r}")
        if long_lines not in ("split", "truncate"):
            raise ValueError(f"long lines must be split or truncate, not {long_lines!r}")
        self.module, self.tok = module, module.tokenizer
        self.search = dict(beam_size=beam_size, nbest=nbest, alpha=alpha, max_len_a=max_len_a, max_len_b=max_len_b)
        self.batch_size, self.batch_type = batch_size, batch_type
        self.max_src_len, self.long_lines = max_src_len, long_lines

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    def _batches(self, items: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
        """Length-sorted batches; a token budget counts search rows (sentences x beam) x source length."""
        items = sorted(items, key=lambda x: len(x[1]))
        batches, cur = [], []
        for item in items:  # sorted: the new item is the batch's longest
            per_sentence = self.search["beam_size"] * len(item[1]) if self.batch_type == "tokens" else 1
            if cur and (len(cur) + 1) * per_sentence > self.batch_size:
                batches.append(cur)
                cur = []
            cur.append(item)
        return batches + ([cur] if cur else [])

    def translate(self, sentences: list[str]) -> list[Translation]:
        results = [Translation(s) for s in sentences]
        items: list[tuple[int, list[int]]] = []  # (chunk key, source ids)
        owners: list[int] = []
        for i, s in enumerate(sentences):
            text = normalize(s)
            if not text:
                continue
            ids = self.tok.encode_src([text])[0]
            if len(ids) > self.max_src_len:
                if self.long_lines == "truncate":
                    log.warning("line %d: %d subwords, truncated to %d", i + 1, len(ids), self.max_src_len)
                    chunks = [ids[: self.max_src_len]]
                else:
                    chunks = split_ids(ids, self.tok.src_pieces(ids), self.max_src_len)
                    log.warning("line %d: %d subwords, translated in %d parts", i + 1, len(ids), len(chunks))
            else:
                chunks = [ids]
            for chunk in chunks:
                items.append((len(owners), chunk))
                owners.append(i)
        outputs: dict[int, list[Hypothesis]] = {}
        for batch in self._batches(items):
            lens = torch.tensor([len(ids) for _, ids in batch])
            src = torch.full((len(batch), int(lens.max())), PAD, dtype=torch.long)
            for row, (_, ids) in enumerate(batch):
                src[row, : len(ids)] = torch.tensor(ids)
            hyps = translate_batch(self.module.model, src.to(self.device), lens.to(self.device), **self.search)
            for (key, _), h in zip(batch, hyps):
                outputs[key] = h
        by_owner: dict[int, list[int]] = {}
        for key, owner in enumerate(owners):
            by_owner.setdefault(owner, []).append(key)
        for owner, keys in by_owner.items():
            res = results[owner]
            res.chunks = [(items[k][1], outputs[k][0]) for k in keys]
            if len(keys) == 1:
                res.hypotheses = outputs[keys[0]]
                res.texts = self.tok.decode_tgt([h.tokens for h in res.hypotheses])
            else:  # a split line: the best translation of each part, joined
                res.hypotheses = [outputs[k][0] for k in keys]
                res.texts = [" ".join(self.tok.decode_tgt([h.tokens for h in res.hypotheses]))]
        return results


def translate(ckpt: str | Path, sentences: list[str], device: str = "cpu", **options) -> list[str]:
    """Translate ``sentences`` with the checkpoint ``ckpt``; one output string per input, in order."""
    return [t.text for t in Translator(load_checkpoint(ckpt, device), **options).translate(sentences)]
