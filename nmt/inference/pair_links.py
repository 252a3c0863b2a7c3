"""The links that guide adapting models to given pairs (``align.py --adapt-links``): a Pharaoh file of the pairs,
or the statistical aligner eflomal's, learnt from the pairs with a corpus before them (:data:`GUIDE`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from nmt.alignment.eflomal import EflomalSettings, paired_tokens, token_links
from nmt.alignment.tokenisation import TOKENISATION, words_linked
from nmt.data import atomic
from nmt.data.readers import read_tsv
from nmt.data.training_links import link_lines, parse_line_links
from nmt.errors import CorpusError
from nmt.progress import Progress
from nmt.specials import LANGUAGES

# eflomal as it guides adapting: both directions' intersection, seven draws voted
GUIDE = EflomalSettings(symmetrisation="intersection", draws=7)


def pair_links(
    given: str,
    sources: list[str],
    targets: list[str],
    corpus: str | None = None,
    aligner: EflomalSettings = GUIDE,
    languages: tuple[str, str] = LANGUAGES,
) -> list[set]:
    """``align.py --adapt-links``: the links of each (source, target) pair from a Pharaoh file, or with
    ``eflomal`` the statistical aligner's as ``aligner`` says (by default :data:`GUIDE`: both directions'
    intersection, seven draws voted, the pairs read as tokenised text), learnt from the pairs with ``corpus``'s
    (:func:`corpus_tokens`) before them, and mapped back to the pairs' words."""
    if given != "eflomal":
        return read_pair_links(given, sources, targets)
    before = corpus_tokens(corpus, languages, aligner.corpus_lines) if corpus is not None else []
    pairs, forward, reverse = token_links(sources, targets, before, aligner, "give a smaller --adapt-corpus", languages)
    return [words_linked(aligner.combine(f, r), *pair) for f, r, pair in zip(forward, reverse, pairs)]


def corpus_tokens(path: str | Path, languages: tuple[str, str], lines: str) -> list[tuple[list[str], list[str]]]:
    """The pairs of a TSV corpus (French and English in its first two columns, turned round where ``languages`` are
    the other way) in the aligner's tokenisation, read as ``lines`` says (:func:`~nmt.alignment.eflomal.paired_tokens`).
    Tokenising a corpus takes a while (the Moses tokenizer reads about 10,000 lines a second), so the tokens are
    cached in :func:`user_cache`, named by the file's content and how it was read."""
    if not Path(path).is_file():
        read_tsv(path)  # its one-line error
    key = hashlib.sha1(Path(path).read_bytes() + json.dumps([languages, lines, TOKENISATION]).encode()).hexdigest()
    cached = user_cache() / "aligner" / f"{key[:16]}.tsv"
    if cached.is_file():  # only a file that read_tsv took is cached
        return [(s.split(), t.split()) for s, t in (row.split("\t") for row in cached.read_text("utf-8").splitlines())]
    pairs = read_tsv(path)  # a malformed file: its one-line error
    turned = languages != LANGUAGES
    with Progress(len(pairs.src), f"tokenising {path} for the aligner (cached after)", unit="pairs", items=None) as bar:
        both = bar.iterate(zip(pairs.tgt, pairs.src) if turned else zip(pairs.src, pairs.tgt))
        out = [(s.text, t.text) for s, t in paired_tokens(both, languages, lines)]
    with contextlib.suppress(OSError):  # a cache that cannot be written is not a reason to fail
        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(cached, "".join(f"{' '.join(s)}\t{' '.join(t)}\n" for s, t in out))
    return out


def user_cache() -> Path:
    """Where what is worth keeping between commands is cached: ``$NMT_CACHE``, else ``~/.cache/nmt-attention``."""
    return Path(os.environ.get("NMT_CACHE") or Path.home() / ".cache" / "nmt-attention")


def read_pair_links(path: str | Path, sources: list[str], targets: list[str]) -> list[set[tuple[int, int]]]:
    """The links of each (source, target) pair from a Pharaoh file, line n for pair n, words numbered as each side's
    text splits on whitespace (as ``align.py`` numbers them); a file that does not fit the pairs is
    refused with its file and line."""
    path = Path(path)
    text = link_lines(path)
    if len(text) != len(sources):
        raise CorpusError(f"{path} has {len(text)} lines but there are {len(sources)} pairs: one line of links a pair")
    return [
        set(parse_line_links(raw, path, n, (len(s.split()), len(t.split()))))
        for n, (raw, s, t) in enumerate(zip(text, sources, targets), 1)
    ]
