"""Word links from the statistical aligner eflomal (Östling & Tiedemann, 2016), run as a separate program.

eflomal is GPL-3.0 and this project is not: nothing of it is imported. This module writes the words of the
pairs to files, runs eflomal's command-line aligner (``eflomal-align``, installed by ``pip install eflomal``) on
them, reads back both directions' links and symmetrises them (:mod:`nmt.alignment.symmetrisation`). Everything else
in the project works without eflomal installed.

What eflomal does that the caller should know: it lowercases words itself (case never splits a word's counts); it
gives no links for a sentence of 1,024 words or more (such pairs get none here either, and are counted); its
Gibbs sampler is seeded from ``/dev/urandom``, so two runs differ slightly: the links are computed once and cached
with the prepared data, and with ``draws`` above 1 eflomal runs that many times and each direction keeps the links
found in more than half of the runs (a vote that aligns better than any one run: docs/alignment.md). It holds a
block's sentences in memory, about ``BYTES_PER_WORD`` bytes a word plus ``BASE_BYTES`` (measured on Tatoeba, one to
four times its size), so large corpora are aligned in blocks of ``block_pairs`` pairs (each block alone: memory
bounded by the block, time linear in the corpus and in the draws).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS, DIRECTIONS, Links, combined
from nmt.alignment.tokenisation import LINES, Tokens, tokens, words_linked
from nmt.bounds import BIG, Choice, Range, check_fields
from nmt.errors import CorpusError
from nmt.progress import Progress
from nmt.specials import LANGUAGES

PROGRAM = "eflomal-align"
MAX_WORDS = 1023  # eflomal leaves a sentence of 1,024 words or more unlinked
BYTES_PER_WORD, BASE_BYTES = 26, 50 << 20  # eflomal's memory for a block (its words, both sides)


class AlignerError(CorpusError):
    """eflomal is missing, failed, or a block would not fit in memory."""


@dataclass(frozen=True)
class EflomalSettings:
    """``data.aligner``: how eflomal links the pairs when ``data.align=eflomal``. ``symmetrisation`` is one of
    :data:`~nmt.alignment.symmetrisation.COMBINATIONS` (one direction, ``forward`` or ``reverse``, or both symmetrised);
    ``model`` eflomal's (1: IBM1, 2: + HMM, 3: + fertility); ``block_pairs`` the pairs aligned together; ``draws``
    the runs of eflomal whose links are put to the vote (:func:`voted`; time grows with them); ``lines`` how the text
    whose links are wanted is written (one of :data:`~nmt.alignment.tokenisation.LINES`): eflomal reads every side
    in one tokenisation (:mod:`nmt.alignment.tokenisation`) and its links are mapped back to the text's words."""

    symmetrisation: Annotated[str, Choice(COMBINATIONS)] = "grow-diag-final-and"
    model: Annotated[int, Range(1, 3, integer=True)] = 3
    block_pairs: Annotated[int, BIG] = 1_000_000
    draws: Annotated[int, Range(1, 100, integer=True)] = 1  # each costs a full run's time
    lines: Annotated[str, Choice(LINES)] = "tokenised"

    def __post_init__(self) -> None:
        check_fields(self, "data.aligner.")

    @property
    def corpus_lines(self) -> str:
        """How a corpus learnt from besides the text is read: raw text, or its whitespace words as the text's are."""
        return "whitespace" if self.lines == "whitespace" else "raw"

    def combine(self, forward: Links, reverse: Links) -> Links:
        return combined(self.symmetrisation, forward, reverse)


def program() -> str:
    """The path of ``eflomal-align``: beside this Python (its virtual environment), else on PATH."""
    beside = Path(sys.executable).parent / PROGRAM
    found = str(beside) if beside.is_file() else shutil.which(PROGRAM)
    if found is None:
        raise AlignerError(
            f"data.align=eflomal needs eflomal's aligner ({PROGRAM}), which is not installed: "
            "pip install 'nmt-attention[align]' (in a checkout: pip install -r requirements.txt; either builds it with "
            "a C compiler)"
        )
    return found


def available_memory() -> int:
    """Bytes of memory available now (Linux's MemAvailable; elsewhere the physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def align_block(
    src: Sequence[Sequence[str]],
    tgt: Sequence[Sequence[str]],
    model: int,
    smaller: str = "lower data.aligner.block_pairs",
    draws: int = 1,
    first: int = 0,
) -> tuple[list[Links], ...]:
    """Both directions' links ``(French word, English word)`` of one block of pairs, by ``draws`` runs of eflomal
    (each direction :func:`voted`); those of the pairs from ``first`` on (eflomal learns from the pairs before
    them, whose links are not read).

    A pair with an empty side or a side of more than :data:`MAX_WORDS` words gets no links (eflomal sees it empty).
    A block too large for the memory available is refused with ``smaller``'s advice.
    """
    words = sum(map(len, src)) + sum(map(len, tgt))
    need, have = BASE_BYTES + BYTES_PER_WORD * words, available_memory()
    if need > have:
        raise AlignerError(
            f"eflomal would need about {_size(need)} for a block of {len(src):,} pairs ({words:,} words), "
            f"but {_size(have)} are available: {smaller}"
        )
    usable = [0 < len(s) <= MAX_WORDS and 0 < len(t) <= MAX_WORDS for s, t in zip(src, tgt)]
    with tempfile.TemporaryDirectory(prefix="eflomal-") as tmp:
        files = {name: Path(tmp) / name for name in ("src", "tgt", *DIRECTIONS)}
        for name, side in (("src", src), ("tgt", tgt)):
            text = "".join((" ".join(w) if ok else "") + "\n" for w, ok in zip(side, usable))
            files[name].write_text(text, encoding="utf-8")
        paths = ("-s", files["src"], "-t", files["tgt"], "-f", files["forward"], "-r", files["reverse"])
        cmd = [program(), *map(str, paths), "--model", str(model), "--overwrite"]
        runs = []  # per draw, both directions' links
        with Progress(draws, f"eflomal on {len(src):,} pairs, both directions", unit="draws", items=None) as bar:
            for _ in range(draws):
                done = _run(cmd, bar)
                if done.returncode != 0:
                    last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
                    raise AlignerError(f"eflomal failed on a block of {len(src):,} pairs: {last}")
                runs.append([_read(files[d], len(src), first) for d in DIRECTIONS])
                bar.update(1)
    out = (voted([run[d] for run in runs]) for d in range(len(DIRECTIONS)))
    return tuple([links if ok else set() for links, ok in zip(side, usable[first:])] for side in out)


def _run(cmd: list[str], bar: Progress, every: float = 5.0) -> subprocess.CompletedProcess:
    """``cmd`` run to its end, its output kept, ``bar`` showing the time go by while it runs (minutes, on a corpus)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        while True:
            try:
                out, err = proc.communicate(timeout=every)
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:  # retried, nothing lost
                bar.update(0)


def voted(draws: Sequence[Sequence[Links]]) -> list[Links]:
    """Each pair's links found in more than half of ``draws`` (each: every pair's links from one run of eflomal)."""
    if len(draws) == 1:  # one run: its links as they are, without counting a corpus's links again
        return list(draws[0])
    counts = (Counter(itertools.chain(*found)) for found in zip(*draws))
    return [{link for link, n in count.items() if 2 * n > len(draws)} for count in counts]


def align_after(
    corpus: Sequence[tuple[Sequence[str], Sequence[str]]],
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    model: int = 3,
    smaller: str = "give fewer pairs",
    draws: int = 1,
) -> tuple[list[Links], list[Links]]:
    """Both directions' links of ``pairs`` (words), learnt by eflomal (``draws`` runs, voted) with ``corpus``'s pairs
    before them: a statistical aligner learns from the text it aligns, and the more text the better."""
    both = [*corpus, *pairs]
    return align_block([s for s, _ in both], [t for _, t in both], model, smaller, draws, first=len(corpus))


def align_pairs(
    sources: Sequence[str],
    targets: Sequence[str],
    corpus: Sequence[tuple[str, str]] = (),
    aligner: EflomalSettings = EflomalSettings(),
    smaller: str = "give fewer pairs",
    languages: tuple[str, str] = LANGUAGES,
) -> list[Links]:
    """eflomal's links of each (source, target) pair, words as each side's text splits on whitespace, learnt with
    ``corpus``'s pairs before them (:func:`token_links`), symmetrised as ``aligner`` says and mapped back to the
    pairs' words."""
    before = [(s.text, t.text) for s, t in paired_tokens(corpus, languages, aligner.corpus_lines)]
    pairs, forward, reverse = token_links(sources, targets, before, aligner, smaller, languages)
    return [words_linked(aligner.combine(f, r), *pair) for f, r, pair in zip(forward, reverse, pairs)]


def token_links(
    sources: Sequence[str],
    targets: Sequence[str],
    before: Sequence[tuple[Sequence[str], Sequence[str]]] = (),
    aligner: EflomalSettings = EflomalSettings(),
    smaller: str = "give fewer pairs",
    languages: tuple[str, str] = LANGUAGES,
) -> tuple[list[tuple[Tokens, Tokens]], list[Links], list[Links]]:
    """Each (source, target) pair's tokens and both directions' links between them, learnt by eflomal with the
    pairs of ``before`` (tokens, as :func:`paired_tokens` gives them) first (:func:`align_after`): the pairs read in
    the same tokenisation (``aligner.lines`` says how they are written, :mod:`nmt.alignment.tokenisation`;
    ``languages`` are the sides')."""
    pairs = paired_tokens(zip(sources, targets), languages, aligner.lines)
    texts = [(s.text, t.text) for s, t in pairs]
    return pairs, *align_after(before, texts, aligner.model, smaller, aligner.draws)


def paired_tokens(
    pairs: Iterable[tuple[str, str]], languages: tuple[str, str], lines: str
) -> list[tuple[Tokens, Tokens]]:
    """Each (source, target) pair's sides in the aligner's tokenisation (:func:`~nmt.alignment.tokenisation.tokens`),
    the sides of ``languages``, written as ``lines`` says."""
    (src, tgt), out = languages, []
    for s, t in pairs:
        out.append((tokens(s, src, lines), tokens(t, tgt, lines)))
    return out


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _read(path: Path, pairs: int, first: int = 0) -> list[Links]:
    lines = path.read_text(encoding="utf-8").split("\n")[:pairs]
    if len(lines) != pairs:
        raise AlignerError(f"eflomal wrote {len(lines)} lines of links for {pairs} pairs")
    return [parse_links(line) for line in lines[first:]]
