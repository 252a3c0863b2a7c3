"""Translating text with a trained model: the Python API behind ``translate.py``.

from nmt.inference.translator import translate
translate("runs/.../best.ckpt", ["Le chat dort."], beam_size=5)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import Tensor

from nmt.alignment.choice import DEFAULT_CHOICE, AttentionChoice, attention_map
from nmt.alignment.words import part_links
from nmt.data.batching import cut_batches
from nmt.data.collate import pad
from nmt.data.readers import normalize
from nmt.data.tokenizer import Tokenizer
from nmt.inference.engine import InferenceEngine, as_engine
from nmt.inference.search import Decodable, Hypothesis, SearchOptions, length_penalty, max_lengths
from nmt.progress import Progress
from nmt.specials import WORD_START

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batching:
    """How ``Translator`` groups and cuts its input (``translate.py``'s defaults)."""

    batch_size: int = 4000  # per batch: source tokens x beam ("tokens") or sentences
    batch_type: str = "tokens"
    max_src_len: int = 256  # longer lines (in subwords) are split or truncated
    long_lines: str = "split"

    def __post_init__(self):
        if self.batch_type not in ("sentences", "tokens"):
            raise ValueError(f"batch type must be sentences or tokens, not {self.batch_type!r}")
        if self.long_lines not in ("split", "truncate"):
            raise ValueError(f"long lines must be split or truncate, not {self.long_lines!r}")


@dataclass
class Translation:
    """One input line's n-best translations, and per part of its source (one unless split) that part's n-best.

    A line translated in parts has as many rows as its part with the fewest hypotheses: row k
    joins the k-th best of every part, and its score is the sum of theirs.
    """

    source: str
    texts: list[str] = field(default_factory=list)  # n-best, best first
    scores: list[float] = field(default_factory=list)
    parts: list[tuple[list[int], list[Hypothesis]]] = field(default_factory=list)  # (source ids, n-best)

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
    """Batched translation that returns results in input order whatever the internal batching; word links read
    the attention ``alignment`` chooses (checked against the model's layers and heads). ``model``: an engine, or a
    PyTorch model that :class:`~nmt.inference.engine.PyTorchEngine` runs; ``searches``: it translates (False: it only
    reads given translations, ``force``, so its output budget need not fit the model's positions)."""

    def __init__(
        self,
        model: InferenceEngine | Decodable,
        tokenizer: Tokenizer,
        search: SearchOptions | None = None,
        batching: Batching | None = None,
        alignment: AttentionChoice = DEFAULT_CHOICE,
        searches: bool = True,
    ):
        self.engine, self.tok = as_engine(model), tokenizer
        self.search, self.batching = search or SearchOptions(), batching or Batching()
        self.alignment = alignment.check(*self.engine.attention_layout, name="alignment ")
        self.searches = searches
        self.check_positions(searches)

    def check_positions(self, searching: bool = True) -> None:
        """A ValueError, naming the limit and the options that change it, unless every line the batching lets
        through fits the positions the model has (an export's tables, learned ones), and, ``searching``, its longest
        output too (forced readings take the given translation, cut as the source is)."""
        limit, m = self.engine.position_limit, self.batching.max_src_len
        if limit is None:
            return
        more = "its exported position tables" if not self.engine.every_map else "its learned max_positions"
        s, fits = self.search, limit - 1
        while searching and fits > 0 and int(max_lengths(torch.tensor([fits]), s.max_len_a, s.max_len_b)) > limit:
            fits -= 1  # the longest line whose output budget fits too
        budget = f"--max-len-a {s.max_len_a:g} --max-len-b {s.max_len_b}"
        if fits < 1:
            raise ValueError(f"{budget}: even a one-piece line may take more than the {limit} positions the model has "
                             f"({more}): lower them")  # fmt: skip
        if m > fits:
            output = f", its output by {budget} included" if fits < limit - 1 else ""
            raise ValueError(
                f"--max-src-len {m}: the model takes at most {limit} positions ({more}): give --max-src-len {fits} or "
                f"less{output}; longer lines are split or truncated as --long-lines says"
            )

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def _batches(self, items: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
        """Length-sorted batches; a token budget counts search rows (sentences x beam) x source length."""
        items = sorted(items, key=lambda x: len(x[1]))
        b = self.batching
        if b.batch_type == "tokens":
            bounds = cut_batches([self.search.beam_size * len(ids) for _, ids in items], b.batch_size)
        else:
            bounds = cut_batches([1] * len(items), float("inf"), b.batch_size)
        return [items[start:end] for start, end in bounds]

    def translate(self, sentences: list[str], progress: bool = False) -> list[Translation]:
        """Each line's n-best; with ``progress``, lines done and sentences/s on stderr."""
        if not self.searches:
            self.check_positions(searching=True)
        results = [Translation(s) for s in sentences]
        items: list[tuple[int, list[int]]] = []  # (chunk key, source ids)
        owners: list[int] = []
        max_len = self.batching.max_src_len
        for i, s in enumerate(sentences):
            ids = self.tok.encode_src([text])[0] if (text := normalize(s)) else []
            if not ids:  # empty, or only characters sentencepiece drops (zero-width, BOM, controls): no translation
                continue
            if len(ids) > max_len:
                if self.batching.long_lines == "truncate":
                    log.warning("line %d: %d subwords, truncated to %d", i + 1, len(ids), max_len)
                    chunks = [ids[:max_len]]
                else:
                    chunks = split_ids(ids, self.tok.src_pieces(ids), max_len)
                    log.warning("line %d: %d subwords, translated in %d parts", i + 1, len(ids), len(chunks))
            else:
                chunks = [ids]
            for chunk in chunks:
                items.append((len(owners), chunk))
                owners.append(i)
        outputs: dict[int, list[Hypothesis]] = {}
        with Progress(len(items), "translating", unit=" sentences", items=None, every=10, enabled=progress) as bar:
            for batch in self._batches(items):
                src = pad([ids for _, ids in batch]).to(self.device)
                lens = torch.tensor([len(ids) for _, ids in batch], device=self.device)
                for (key, ids), h in zip(batch, self.engine.translate_batch(src, lens, self.search)):
                    outputs[key] = self._full_context(ids, h) if self.alignment.context == "full" else h
                bar.update(len(batch), len(batch))
        by_owner: dict[int, list[int]] = {}
        for key, owner in enumerate(owners):
            by_owner.setdefault(owner, []).append(key)
        for owner, keys in by_owner.items():
            res = results[owner]
            res.parts = [(items[k][1], outputs[k]) for k in keys]
            for rank in range(min(len(hyps) for _, hyps in res.parts)):
                row = [hyps[rank] for _, hyps in res.parts]
                res.texts.append(" ".join(self.tok.decode_tgt([h.tokens for h in row])))
                res.scores.append(sum(h.score for h in row))
        return results

    def _read(self, ids: list[int], tokens: list[int]) -> tuple[Tensor, Tensor, Tensor | None]:
        """``ids`` re-read with the output ``tokens`` (``Seq2Seq.read``), in the decoder pass the choice reads."""
        src, src_len = torch.tensor([ids], device=self.device), torch.tensor([len(ids)], device=self.device)
        return self.engine.read(src, src_len, tokens, full_context=self.alignment.context == "full")

    def _full_context(self, ids: list[int], hyps: list[Hypothesis]) -> list[Hypothesis]:
        """The hypotheses with the attention of the pass that sees their whole output (``full`` context)."""
        return [replace(h, attention=self._read(ids, h.tokens)[1].cpu()) for h in hyps]

    def links(self, result: Translation) -> set[tuple[int, int]]:
        """The hard word links of a line's best translation (Pharaoh pairs), words numbered across its parts."""
        tok, parts = self.tok, result.parts
        return part_links(
            [
                (tok.src_pieces(ids), tok.tgt_pieces(h[0].tokens), attention_map(h[0].attention, self.alignment))
                for ids, h in parts
            ],
            self.alignment.links,
        )

    def pair_ids(self, sentences: list[str], targets: list[str]) -> list[tuple[list[int], list[int]]]:
        """Each (source, translation) pair's pieces, as a forced reading takes them."""
        out = []
        for s, t in zip(sentences, targets):
            src_text, tgt_text = normalize(s), normalize(t)
            ids = self.tok.encode_src([src_text])[0] if src_text else []
            out.append((ids, self.tok.encode_tgt([tgt_text])[0] if tgt_text else []))
        return out

    def long_pairs(self, sentences: list[str], targets: list[str]) -> list[tuple[int, int, int]]:
        """``(index, source pieces, translation pieces)`` of each pair longer than ``max_src_len`` on a side, which
        a forced reading cannot split (which part of the translation goes with which part of the source?)."""
        return self._long(self.pair_ids(sentences, targets))

    def _long(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[int, int, int]]:
        m = self.batching.max_src_len
        return [(k, len(ids), len(tokens)) for k, (ids, tokens) in enumerate(pairs) if max(len(ids), len(tokens)) > m]

    def long_pair_advice(self, pair: tuple[int, int, int], where: str) -> str:
        """One line for a pair :meth:`long_pairs` found, at ``where`` (``line 3``, ``src[2]``), saying what to do."""
        _, s, t = pair
        m, limit = self.batching.max_src_len, self.engine.position_limit
        most = "" if limit is None else f" (up to {limit - 1}: the positions the model has)"
        return (
            f"{where}: a pair of {s} and {t} pieces, more than --max-src-len {m} on a side: a pair is aligned whole, "
            f"never split; raise --max-src-len{most}, or give --long-lines truncate to align its first {m} pieces"
        )

    def force(self, sentences: list[str], targets: list[str]) -> list[Translation]:
        """Read each source with its given translation instead of searching (forced decoding): the attention and
        score of that translation, e.g. to align a corpus. Sources or targets with no piece (empty, or only
        characters sentencepiece drops) give empty results. A side longer than ``max_src_len`` pieces is cut to it
        (``long_lines="truncate"``) or refused in one line, before anything is read (``"split"``)."""
        results = [Translation(s) for s in sentences]
        lp = lambda n: length_penalty(n, self.search.alpha)  # noqa: E731
        m = self.batching.max_src_len
        pairs = self.pair_ids(sentences, targets)
        if self.batching.long_lines == "split" and (long := self._long(pairs)):
            raise ValueError(self.long_pair_advice(long[0], f"line {long[0][0] + 1}"))
        for k, (res, (ids, tokens)) in enumerate(zip(results, pairs)):
            if max(len(ids), len(tokens)) > m:
                log.warning("line %d: a pair of %d and %d pieces, each side cut to %d", k + 1, len(ids), len(tokens), m)
                ids, tokens = ids[:m], tokens[:m]
            if not ids or not tokens:  # as for an empty line: nothing to align
                continue
            logp, cross, _ = self._read(ids, tokens)
            hyp = Hypothesis(tokens, float(logp.sum()) / lp(len(tokens) + 1), cross.cpu())
            res.parts, res.texts, res.scores = [(ids, [hyp])], [normalize(targets[k])], [hyp.score]
        return results


def translate(ckpt: str | Path, sentences: list[str], device: str = "cpu", **options) -> list[str]:
    """Translate ``sentences`` with the checkpoint ``ckpt``; one output string per input, in order.

    ``options`` are fields of :class:`SearchOptions` and :class:`Batching`.
    """
    from nmt.checkpoint import load_checkpoint

    loaded = load_checkpoint(ckpt, device)
    search = {k: v for k, v in options.items() if k in SearchOptions.__dataclass_fields__}
    batching = Batching(**{k: v for k, v in options.items() if k not in search})
    translator = Translator(loaded.model, loaded.tokenizer, replace(SearchOptions(), **search), batching)
    return [t.text for t in translator.translate(sentences)]
