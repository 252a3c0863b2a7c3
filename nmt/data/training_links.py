"""Word links of the training pairs, for guided alignment (``loss.align_weight``).

Links come from a Pharaoh file parallel to the training corpus (``data.align``: line n holds ``i-j``
pairs, French word i and English word j, 0-based, for line n of the corpus), from the statistical aligner eflomal
(``data.align=eflomal``: :func:`eflomal_links` computes them once for the prepared pairs and caches them beside
the encoded arrays, keyed by the aligner's settings), or from the built-in corpus's own gold links. Training pairs
are found by their line in the input (kept at preparation), so the pairs that preparation dropped or held out
simply go unread. A file that does not match its
corpus (line count, a malformed link, a word index beyond the sentence) is refused with its file and line.

For a batch, :meth:`TrainingLinks.targets` spreads each pair's word links over its pieces: a target
piece of English word j gets a distribution over the source pieces of the French words linked to j
(uniform); pieces of unlinked words, the end of sentence and padding get none.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from nmt.alignment.eflomal import EflomalSettings, align_block, paired_tokens
from nmt.alignment.links import pharaoh
from nmt.alignment.tokenisation import TOKENISATION, words_linked
from nmt.alignment.words import words_of
from nmt.data import atomic
from nmt.data.encoded import EncodedCorpus
from nmt.data.readers import CorpusError, Pairs
from nmt.data.tokenizer import Tokenizer
from nmt.progress import Progress
from nmt.specials import LANGUAGES, WORD_START

log = logging.getLogger(__name__)

VERSION = 1  # bump when the cached links' format changes
# eflomal's links that guide a model adapting to the pairs it aligns: 7 runs voted (docs/alignment.md)
def word_starts(tok: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """For each source and target piece id: does the piece start a whitespace word?"""
    return tuple(
        np.array([p.startswith(WORD_START) for p in pieces(range(size))], dtype=bool)
        for pieces, size in ((tok.src_pieces, tok.src_vocab_size), (tok.tgt_pieces, tok.tgt_vocab_size))
    )

EFLOMAL = "eflomal"  # data.align: links from the statistical aligner, computed at preparation


def words_of_pieces(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The word index of every piece (as :func:`nmt.alignment.words.piece_words`: the first piece opens word 0)."""
    flags = starts[ids]
    if len(flags):
        flags[0] = True
    return np.cumsum(flags) - 1


@dataclass
class TrainingLinks:
    """Per training pair, its links as flat ``(source word, target word)`` arrays: pair k's are
    ``src[offsets[k]:offsets[k + 1]]`` and ``tgt[...]``; plus the word-start tables of both vocabularies."""

    offsets: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    starts: tuple[np.ndarray, np.ndarray]

    @classmethod
    def read(
        cls,
        path: str | Path,
        corpus: EncodedCorpus,
        tok: Tokenizer,
        column: int | None = None,
        lines: int | None = None,
        by_pair: bool = False,
        transpose: bool = False,
    ) -> TrainingLinks:
        """The links of ``corpus``'s pairs from ``path``: a Pharaoh file, or with ``column`` that column of a TSV
        file; ``lines``, when given, is the line count the file must have (the training input's). Line n of the
        file is the pair on line n of the input, or with ``by_pair`` the corpus's pair n (1-based). With
        ``transpose`` the file names each pair the other way round (the input's, where preparation turned it)."""
        if corpus.lines is None and not by_pair:
            raise CorpusError(f"{corpus.directory}: prepared without line numbers; prepare the corpus again")
        path = Path(path)
        text = link_lines(path, " (data.align)")
        if lines is not None and len(text) != lines:
            raise CorpusError(
                f"{path} has {len(text)} lines but the training corpus has {lines}: "
                "a link file must be parallel to it, line for line"
            )
        starts = word_starts(tok)
        offsets, src, tgt = [0], [], []
        numbers = range(1, len(corpus) + 1) if by_pair else corpus.lines.tolist()
        for k, line in enumerate(numbers):
            if line > len(text):
                raise CorpusError(f"{path} has {len(text)} lines; the training corpus has a pair on line {line}")
            raw = text[line - 1] if column is None else text[line - 1].split("\t")[column]
            pair = (corpus.src(k), corpus.tgt(k))
            words = tuple(int(words_of_pieces(ids, st)[-1]) + 1 for ids, st in zip(pair, starts))
            for i, j in parse_line_links(raw, path, line, words[::-1] if transpose else words):
                src.append(j if transpose else i)
                tgt.append(i if transpose else j)
            offsets.append(len(src))
        return cls(np.array(offsets, np.int64), np.array(src, np.int64), np.array(tgt, np.int64), starts)

    def targets(
        self, indices: np.ndarray, src: list[np.ndarray], tgt: list[np.ndarray], shape: tuple, rows: list[slice]
    ) -> Tensor:
        """``(B, T, S)`` link distributions of a batch of pairs ``indices`` with pieces ``src``/``tgt`` (after
        any resegmentation) in ``rows`` (each row one pair, or several joined: their blocks one after the other on
        the diagonal); ``shape`` is the padded ``(B, T, S)`` of the batch (T counts the end of sentence)."""
        out = torch.zeros(shape)
        for b, row in enumerate(rows):
            t0 = s0 = 0
            for k, s, t in zip(indices[row].tolist(), src[row], tgt[row]):
                out[b, t0 : t0 + len(t), s0 : s0 + len(s)] = torch.from_numpy(self.pair_targets(k, s, t))
                t0, s0 = t0 + len(t), s0 + len(s)
        return out

    def pair_targets(self, k: int, s: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``(target pieces, source pieces)``: each target piece's link distribution in pair ``k`` (zero rows where
        a piece's word has no link)."""
        pieces = np.zeros((len(t), len(s)), dtype=np.float32)
        a, z = self.offsets[k], self.offsets[k + 1]
        if a == z or not len(s) or not len(t):
            return pieces
        sw, tw = words_of_pieces(np.asarray(s), self.starts[0]), words_of_pieces(np.asarray(t), self.starts[1])
        linked = np.zeros((tw[-1] + 1, sw[-1] + 1), dtype=np.float32)  # (target words, source words)
        src_w, tgt_w = self.src[a:z], self.tgt[a:z]
        fits = (src_w <= sw[-1]) & (tgt_w <= tw[-1])  # resegmented pieces may form other words
        linked[tgt_w[fits], src_w[fits]] = 1.0
        pieces = linked[tw][:, sw]  # (target pieces, source pieces)
        total = pieces.sum(1, keepdims=True)
        return np.divide(pieces, total, where=total > 0, out=pieces)


def count_lines(path: str | Path) -> int:
    """Lines of a file (a last line without a line end counts), read in chunks."""
    count, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def link_lines(path: Path, setting: str = "") -> list[str]:
    """The lines of a link file (the last line's newline optional)."""
    if not path.is_file():
        raise CorpusError(f"{path}: link file not found{setting}")
    text = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if text and text[-1] == "":
        text.pop()
    return text


def parse_line_links(raw: str, path: Path, line: int, words: tuple[int, int]) -> list[tuple[int, int]]:
    """The links of one line, checked against the pair's word counts (source, target)."""
    out = []
    for link in raw.split():
        i, sep, j = link.partition("-")
        if not (sep and i.isdigit() and j.isdigit()):
            raise CorpusError(f"{path}:{line}: {link!r} is not a link i-j (French word i, English word j, from 0)")
        i, j = int(i), int(j)
        if i >= words[0] or j >= words[1]:
            raise CorpusError(
                f"{path}:{line}: link {link} names French word {i} and English word {j}, "
                f"but the pair has {words[0]} French and {words[1]} English words"
            )
        out.append((i, j))
    return out


def links_dir(prepared: Path, aligner: EflomalSettings) -> Path:
    """Where eflomal's links of a prepared corpus are cached: beside its arrays, named by the aligner's settings."""
    settings = asdict(aligner) | {"version": VERSION, "tokenisation": TOKENISATION}  # links of other tokens: redone
    key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()
    return prepared / f"links-{key[:12]}"


def eflomal_links(
    prepared: Path, tok: Tokenizer, aligner: EflomalSettings, lock: Path, languages: tuple[str, str] = LANGUAGES
) -> Path:
    """The folder of eflomal's links for the training and validation pairs of the corpus prepared in ``prepared``
    (``train.links``, ``valid.links``: line k holds pair k's links), computed first unless cached.

    Training pairs are split into words as the model sees them (the pieces' words), validation pairs as their text
    is (its whitespace words, as gold links number them); eflomal reads them in one tokenisation (``aligner.lines``:
    how the corpus is written; ``languages``: its (source, target)) and its links are mapped back to those words.
    Concurrent callers wait on ``lock`` and align once.
    """
    out = links_dir(prepared, aligner)
    if out.is_dir():
        return out
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if out.is_dir():
            return out
        atomic.remove_leftovers(prepared, out.name)
        train = EncodedCorpus.load(prepared / "train")
        valid = Pairs(**json.loads((prepared / "valid.json").read_text(encoding="utf-8")))
        sizes = {"train": len(train), "valid": len(valid)}
        pairs = ((" ".join(s), " ".join(t)) for s, t in training_words(train, tok))
        start, written, counts = time.monotonic(), 0, {"links": 0, "unlinked": 0}
        bar = Progress(sum(sizes.values()), "aligning (eflomal)", unit="pairs", items=None)
        with atomic.folder(out) as tmp, bar, contextlib.ExitStack() as stack:
            files = [stack.enter_context(open(tmp / f"{split}.links", "w", encoding="utf-8")) for split in sizes]
            for block in _blocks(itertools.chain(pairs, zip(valid.src, valid.tgt)), aligner.block_pairs):
                read = paired_tokens(block, languages, aligner.lines)
                sides = [s.text for s, _ in read], [t.text for _, t in read]
                forward, reverse = align_block(*sides, aligner.model, draws=aligner.draws)
                for f, r, pair in zip(forward, reverse, read):
                    links = words_linked(aligner.combine(f, r), *pair)
                    counts["links"] += len(links)
                    counts["unlinked"] += not links  # pairs with no link at all (a side of 1,024 words or more too)
                    files[written >= sizes["train"]].write(pharaoh(links) + "\n")
                    written += 1
                bar.update(len(block))
            stack.close()
            stats = sizes | counts | {"aligner": asdict(aligner), "seconds": round(time.monotonic() - start, 1)}
            (tmp / "stats.json").write_text(json.dumps(stats, indent=1))
        log.info("eflomal's links (%s) in %s: %s", aligner.symmetrisation, out, stats)
    return out


def training_words(corpus: EncodedCorpus, tok: Tokenizer) -> Iterator[tuple[list[str], list[str]]]:
    """Each pair's words as the model sees them: the words its pieces form."""
    for k in range(len(corpus)):
        yield words_of(tok.src_pieces(corpus.src(k).tolist())), words_of(tok.tgt_pieces(corpus.tgt(k).tolist()))


def _blocks(items: Iterator, size: int) -> Iterator[list]:
    block = []
    for item in items:
        block.append(item)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block
