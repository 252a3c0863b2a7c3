"""A CTranslate2 model directory (written by ``export.py``) behind ``Translator``: ``translate.py --ckpt DIR`` and
``serve.py --ckpt DIR`` translate on the engine with every option of the PyTorch path.

The engine searches on its own (:meth:`Engine.translate_batch`); its hypotheses are scored as ours are (the
log-probability over the GNMT length penalty: the engine's own penalty is ``length ** alpha``, so it searches
without one and its ``beam_size`` finished hypotheses are re-ranked), cut at the same output budget (a hypothesis
the budget stops is read again with its end of sentence, as our search forces it), with the attention of the
exported choice: one layer's chosen head (moved first at export) or its head mean, ``(1, 1, T + 1, S)``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from nmt.alignment.choice import AttentionChoice
from nmt.checkpoint import LANGUAGES
from nmt.commands import named_as_started
from nmt.ct2_export import META
from nmt.data.tokenizer import Tokenizer
from nmt.inference.search import Hypothesis, SearchOptions, length_penalty, max_lengths
from nmt.models.attention import AttentionLayout
from nmt.specials import EOS

log = logging.getLogger(__name__)
PARTS = ("encoder", "decoder")

COMPUTE_TYPES = (
    *("default", "auto", "float32", "float16", "bfloat16"),
    *("int8", "int8_float32", "int8_float16", "int8_bfloat16"),
)


def is_export(path: str | Path) -> bool:
    """Whether ``path`` is a model directory ``export.py`` wrote (rather than a checkpoint file)."""
    return Path(path).is_dir() and (Path(path) / META).is_file()


@dataclass(frozen=True)
class EngineInfo:
    """What ``nmt.json`` says of an exported model: the attention it returns and where it came from."""

    path: Path
    alignment: AttentionChoice  # the exported choice, as the checkpoint numbered its layer and head
    alignment_record: dict | None
    checkpoint: str
    step: int | None
    parameters: int
    settings: dict
    quantization: str
    positions: int  # what its position tables hold: its longest line and output, end of sentence included

    @property
    def languages(self) -> tuple[str, str]:
        """(source, target), as the checkpoint recorded them (exports from before the setting: French to English)."""
        return tuple(self.settings.get("languages") or LANGUAGES)

    @classmethod
    def read(cls, path: str | Path) -> EngineInfo:
        path = Path(path)
        try:
            meta = json.loads((path / META).read_text(encoding="utf-8"))
            return cls(
                path,
                AttentionChoice(**meta["alignment"]),
                meta.get("alignment_record"),
                meta["checkpoint"],
                meta.get("step"),
                meta["parameters"],
                meta["settings"],
                meta["quantization"],
                meta.get("positions") or min(meta["settings"]["model"][p]["max_positions"] for p in PARTS),
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path / META}: not an export of this project ({type(e).__name__}: {e})") from None


class CT2Engine:
    """An exported Transformer on CTranslate2, with what ``Translator`` needs of a model: ``translate_batch``
    (the whole search), ``read`` (forced decoding) and ``attention_layout`` (the one exported map)."""

    attention_layout = AttentionLayout(1, 1)
    every_map = False  # only the exported layer's head (or head mean)
    device = torch.device("cpu")  # where sources are handed over; the engine itself may run on a GPU
    module = None  # nothing here that adaptation could train

    def __init__(self, translator, tokenizer: Tokenizer, info: EngineInfo, replicas: int = 1):
        self.translator, self.tok, self.info, self.replicas = translator, tokenizer, info, replicas
        self.src_vocab = [tokenizer.src.id_to_piece(i) for i in range(tokenizer.src_vocab_size)]
        self.tgt_vocab = [tokenizer.tgt.id_to_piece(i) for i in range(tokenizer.tgt_vocab_size)]
        self.tgt_ids = {p: i for i, p in enumerate(self.tgt_vocab)}
        self.eos = self.tgt_vocab[EOS]
        self.position_limit = info.positions

    def resolve(self, wanted: AttentionChoice, name: str = "--align-") -> AttentionChoice:
        """How to read the engine's one map for ``wanted`` (layer 0, head 0, the readout and links ``wanted``): the
        exported layer and head, or a ValueError; another layer or head needs another export."""
        exported = self.info.alignment
        if wanted.context == "full":
            log.warning("%s: the engine runs no full-context pass; its attention is read as it translates", exported)
            wanted = replace(wanted, context="causal")
        decoder = self.info.settings["model"]["decoder"]
        layers = decoder["num_layers"]
        wanted.check(layers, decoder["heads"], name=name)
        if (wanted.layer % layers, wanted.head) != (exported.layer % layers, exported.head):
            got = "mean of heads" if wanted.head is None else f"head {wanted.head}"
            raise ValueError(
                named_as_started(
                    f"{name}layer/head: {self.info.path} returns only the attention it was exported with "
                    f"({exported}); for layer {wanted.layer}, {got}: export.py --align-layer {wanted.layer} "
                    f"--align-head {'mean' if wanted.head is None else wanted.head}, or translate the checkpoint"
                )
            )
        return AttentionChoice(0, 0, wanted.readout, wanted.links)

    def _pieces(self, src: Tensor, src_len: Tensor) -> list[list[str]]:
        return [[self.src_vocab[i] for i in row[: int(n)].tolist()] for row, n in zip(src, src_len)]

    def translate_batch(self, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
        """Up to ``nbest`` hypotheses per sentence, best first, as :func:`nmt.inference.search.translate_batch` gives
        them. The engine takes one output budget per call: each budget's sentences go as one batch, all submitted at
        once so that the engine's replicas (``--threads``) translate them side by side."""
        budget = max_lengths(src_len, options.max_len_a, options.max_len_b).tolist()
        pieces, out = self._pieces(src, src_len), [[] for _ in budget]
        pending = []
        for b in sorted(set(budget)):
            rows = [i for i, n in enumerate(budget) if n == b]
            pending.append((rows, self._submit([pieces[i] for i in rows], b, options.beam_size) if b > 1 else None))
        for rows, futures in pending:
            for k, i in enumerate(rows):
                if futures is None:  # a budget of one token: only the end of sentence fits
                    out[i] = [self._forced(pieces[i], [], options.alpha)]
                    continue
                out[i] = self._best(pieces[i], futures[k].result(), options)
        return out

    def _submit(self, pieces: list[list[str]], budget: int, beam_size: int) -> list:
        """The engine's search of ``pieces`` (asynchronous results): its ``beam_size`` finished hypotheses, without
        the engine's length penalty (``length ** alpha``, not ours: they are re-ranked with the GNMT one)."""
        return self.translator.translate_batch(
            pieces,
            beam_size=beam_size,
            num_hypotheses=beam_size,
            length_penalty=0.0,
            max_decoding_length=budget - 1,  # our budget counts the end of sentence
            min_decoding_length=0,  # as ours, the end of sentence may come first (else renormalised away)
            # <pad> and <s>, which our search never outputs, are not suppressed: the engine would renormalise the
            # other tokens' probabilities and every score move; a trained model gives them next to none
            max_input_length=0,  # Translator already cut long lines
            return_scores=True,
            return_attention=True,
            return_end_token=True,
            asynchronous=True,
            max_batch_size=-(-len(pieces) // self.replicas),  # one share per replica
        )

    def _best(self, src: list[str], result, options: SearchOptions) -> list[Hypothesis]:
        """The ``nbest`` of one sentence's finished hypotheses by our score; attention is read only for those kept."""
        ended, cut = [], []
        for toks, raw, att in zip(result.hypotheses, result.scores, result.attention):
            if toks and toks[-1] == self.eos:  # ended by the model: tokens + EOS, its score over our penalty
                ended.append((raw / length_penalty(len(toks), options.alpha), toks[:-1], att))
            else:  # stopped by the budget: ours forces the end of sentence there
                cut.append(self._forced(src, [self.tgt_ids[t] for t in toks], options.alpha))
        ended = sorted(ended, key=lambda e: -e[0])[: options.nbest]
        kept = [
            Hypothesis([self.tgt_ids[t] for t in toks], score, torch.tensor(att)[None, None])  # (1, 1, T + 1, S)
            for score, toks, att in ended
        ]
        return sorted(kept + cut, key=lambda h: -h.score)[: options.nbest]

    def _forced(self, src: list[str], tokens: list[int], alpha: float) -> Hypothesis:
        logp, cross = self._read(src, tokens)
        return Hypothesis(tokens, float(logp.sum()) / length_penalty(len(tokens) + 1, alpha), cross)

    def _read(self, src: list[str], tokens: list[int]) -> tuple[Tensor, Tensor]:
        target = [self.tgt_vocab[t] for t in tokens]
        # log-probs of the tokens and the end of sentence, the source read whole (the engine would cut it at 1,024)
        scored = self.translator.score_batch([src], [target], max_input_length=0)[0]
        forced = self.translator.translate_batch(
            [src],
            target_prefix=[[*target, self.eos]],
            beam_size=1,
            max_decoding_length=len(target) + 1,
            max_input_length=0,
            return_attention=True,
            return_end_token=True,  # the end of sentence's row too
        )[0]
        rows = torch.tensor(forced.attention[0], dtype=torch.float32)[: len(target) + 1]  # (T + 1, S)
        return torch.tensor(scored.log_probs), rows[None, None]

    def read(
        self, src: Tensor, src_len: Tensor, tokens: list[int], full_context: bool = False
    ) -> tuple[Tensor, Tensor, None]:
        """As ``Seq2Seq.read``: log-probs of ``tokens`` + EOS ``(T + 1,)``, the exported attention
        ``(1, 1, T + 1, S)``; no self-attention (the engine does not return it), no full-context pass (:meth:`resolve`
        reads the attention as it translates instead)."""
        logp, cross = self._read(self._pieces(src, src_len)[0], tokens)
        return logp, cross, None


def ct2_device(device: torch.device) -> tuple[str, int]:
    """CTranslate2's device and index for a torch device (checked by :func:`nmt.hardware.device`)."""
    import ctranslate2

    if device.type == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        raise ValueError("--device=cuda: this ctranslate2 sees no GPU (its CPU-only build, or no CUDA driver)")
    return device.type, device.index or 0


def load_engine(path: str | Path, device: torch.device, threads: int = 0, compute_type: str = "default") -> CT2Engine:
    """The exported model in ``path`` on ``device``; on a CPU, ``threads`` replicas of one thread each (0: one per
    core this process may use)."""
    try:
        import ctranslate2
    except ImportError:
        raise ValueError(f"{path}: an exported model needs ctranslate2: pip install 'nmt-attention[ct2]'") from None
    info = EngineInfo.read(path)
    if compute_type not in COMPUTE_TYPES:
        raise ValueError(f"--compute-type={compute_type!r}: must be one of {', '.join(COMPUTE_TYPES)}")
    kind, index = ct2_device(device)
    try:
        # on a CPU, --threads replicas each translate a batch on one thread: one batch on two threads was slower
        # here (bench/serving/engine.py's threading rows)
        replicas = (threads or len(os.sched_getaffinity(0))) if kind == "cpu" else 1
        translator = ctranslate2.Translator(
            str(path),
            device=kind,
            device_index=index,
            compute_type=compute_type,
            inter_threads=replicas,
            intra_threads=1 if kind == "cpu" else threads,
        )
        tok = Tokenizer.load(path)
    except (RuntimeError, ValueError, OSError) as e:
        raise ValueError(f"{path}: cannot load the exported model ({str(e).splitlines()[0][:160]})") from None
    return CT2Engine(translator, tok, info, replicas)


def engine_info(found: CT2Engine) -> dict[str, Any]:
    """``GET /model`` for an exported model: as for a checkpoint, with the engine, its quantisation and compute type
    (the attention is the one exported map)."""
    info, tok = found.info, found.tok
    return {
        "kind": info.settings["model"].get("name"),
        "engine": "ctranslate2",
        "quantization": info.quantization,
        "compute_type": found.translator.compute_type,
        "parameters": info.parameters,
        "attention": {"layers": 1, "heads": 1, "exported": info.alignment.as_dict()},
        "vocabulary": {"source": tok.src_vocab_size, "target": tok.tgt_vocab_size},
        "languages": dict(zip(("source", "target"), info.languages)),
        "checkpoints": [
            {
                "file": info.path.name,
                "model": info.settings["model"],
                "step": info.step,
                "exported_from": Path(info.checkpoint).name,
                "alignment": info.alignment_record,
            }
        ],
    }


def check_members(paths: Sequence[str | Path]) -> bool:
    """Whether ``--ckpt`` names an exported model (one only: the engine runs no ensemble)."""
    engines = [p for p in paths if is_export(p)]
    if engines and len(paths) > 1:
        raise ValueError(f"--ckpt {engines[0]}: an exported model translates alone; ensembles run on PyTorch only")
    return bool(engines)
