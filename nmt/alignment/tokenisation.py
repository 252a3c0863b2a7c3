"""The words a statistical aligner reads: every side of every pair put into one tokenisation, each token knowing the
whitespace word of the line it comes from, so that links found between tokens map back to the user's words.

eflomal learns a word's translations by counting it; a word written two ways is two words to it. Corpora write
French and English differently: Tatoeba as typed (``C'est l'homme.``, ``au``, ``Speaker,``, ``peut-être``), the
Hansards and many alignment test sets lowercased and tokenised with elisions and contractions written out
(``ce est le homme .``, ``à le``, ``Speaker ,``, ``peut - être``). So each side is put into the latter form, the
most split one: raw text goes through the Moses tokenizer (``sacremoses``, the tokenizer of Moses, Europarl and
WMT's tokenised data), then every token is lowercased, an elided French word is written out (``l'`` → ``le``,
``qu'`` → ``que``), a French contraction is written out (``au`` → ``à le``, ``des`` → ``de les``), an English negation
is split off as the Hansards and the Penn Treebank split it (``don't`` → ``do n't``, ``can't`` → ``ca n't``, where the
Moses tokenizer writes ``don 't``), and a hyphen inside a word stands apart (``peut - être``). A line written that way
already is left as it is: raw and tokenised forms of one sentence give the same tokens.

How the lines to align are written (``data.aligner.lines``, ``align.py --adapt-lines``), one of :data:`LINES`:

- ``tokenised`` (the default): already tokenised, as the Hansards, Europarl and WMT's tokenised sets are: each
  whitespace word is rewritten alone (lowercase, elisions, contractions, hyphens), its punctuation is left to it,
  but a word still holding an apostrophe (``l'homme``, ``aujourd'hui``, ``don't``, ``students'``) is split as the
  Moses tokenizer splits it in raw text;
- ``raw``: as typed: the Moses tokenizer splits each line, as it splits a corpus put before the lines;
- ``whitespace``: nothing is rewritten, every side is read as its whitespace words (eflomal's own input).

A corpus given to learn from besides the lines is read as raw text (``tokenised`` and ``raw``) or as its
whitespace words (``whitespace``). Links between tokens map back to links between the words they come from
(:func:`words_linked`): a word written out as two tokens is linked wherever either is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from nmt.alignment.symmetrisation import Links

LINES = ("tokenised", "raw", "whitespace")
TOKENISATION = 4  # bump when the tokens of a line change: tokens cached by earlier versions are not read

ELIDED = {  # an elided French word, as the Moses tokenizer splits it off, written out
    "l'": "le",
    "d'": "de",
    "j'": "je",
    "m'": "me",
    "t'": "te",
    "s'": "se",
    "c'": "ce",
    "n'": "ne",
    "qu'": "que",
    "jusqu'": "jusque",
    "lorsqu'": "lorsque",
    "puisqu'": "puisque",
    "quoiqu'": "quoique",
    "quelqu'": "quelque",
    "presqu'": "presque",
}
CONTRACTED = {  # a French contraction of a preposition and an article, written out
    "au": ("à", "le"),
    "aux": ("à", "les"),
    "du": ("de", "le"),
    "des": ("de", "les"),
    "auquel": ("à", "lequel"),
    "auxquels": ("à", "lesquels"),
    "auxquelles": ("à", "lesquelles"),
    "duquel": ("de", "lequel"),
    "desquels": ("de", "lesquels"),
    "desquelles": ("de", "lesquelles"),
}
# what a tokenised text already split off and the Moses tokenizer would split again: English clitics (``member
# 's``, ``do n't``: ``' s``) and French elided words (``aujourd' hui``, ``l' homme``: ``aujourd ' hui``)
SPLIT_OFF = {
    "en": [r"(?<!\S)'(?:s|re|ve|ll|d|m|t)(?!\S)", r"(?<!\S)n't(?!\S)"],
    "fr": [r"(?<!\S)\w+'(?!\S)"],
}
APOSTROPHES = str.maketrans({"’": "'", "ʼ": "'"})
ELISION = re.compile(r"^(\w*?[a-z]')(\w.*)$")  # a word still holding its elided first part (``l'homme``)
HYPHENS = re.compile(r"(?<=\w)(-)(?=\w)")
# English words that open with an elision, without their apostrophe: one token, ``'twas``, typed or tokenised
APHAERESIS = frozenset({"tis", "twas", "twere", "twill", "twould", "em", "cause", "til"})
CLITIC = re.compile(r"(?:n't|'(?:s|re|ve|ll|d|m|t))$")  # an English clitic that ends a (lowercased) token


@dataclass(frozen=True)
class Tokens:
    """One side of a pair as the aligner reads it: ``text``, its tokens, and ``word``, for each token, the index of
    the whitespace word of the line it comes from."""

    text: list[str]
    word: list[int]


def tokens(line: str, lang: str, lines: str) -> Tokens:
    """``line`` (of language ``lang``: ``fr``, ``en``) in the aligner's tokenisation; ``lines`` says how it is
    written (one of :data:`LINES`)."""
    words = line.split()
    if lines == "whitespace":
        return Tokens(words, list(range(len(words))))
    if lines == "raw":
        found = moses(line.translate(APOSTROPHES), lang)
        pieces = list(zip(found, owners(words, [t.replace("@-@", "-") for t in found])))
    elif lines == "tokenised":
        split = [apostrophes_split(w.translate(APOSTROPHES), lang) for w in words]
        pieces = [(piece, k) for k, parts in enumerate(split) for piece in parts]
    else:
        raise ValueError(f"lines={lines!r}: must be one of {', '.join(LINES)}")
    text, word = [], []
    for piece, k in pieces:
        for token in written_out(piece, lang):
            text.append(token)
            word.append(k)
    if lang == "en":
        negations(text)
        text, word = aphaereses(text, word)
    return Tokens(text, word)


def moses(text: str, lang: str) -> list[str]:
    """``text`` split by the Moses tokenizer, what a tokenised text split off already (:data:`SPLIT_OFF`) kept.

    An apostrophe that opens or closes the text (``'quoted'``) is split off as inside it: the Moses tokenizer pads
    the text with spaces, its Python port (sacremoses) does not, and reads it as a part of the word. Its port also
    keeps every occurrence of a kept part, inside words too (``don't`` beside ``can 't``): such a word is split alone.
    """
    kept = SPLIT_OFF.get(lang) or []
    words = text.split()
    if words and not any(re.fullmatch(pattern, words[0]) for pattern in kept):
        words[0] = re.sub(r"^'(?=\S)", "' ", words[0])
    if words and not any(re.fullmatch(pattern, words[-1]) for pattern in kept):
        words[-1] = re.sub(r"(?<=\S)'$", " '", words[-1])
    text, split = " ".join(words), _moses(lang).tokenize
    found = split(text, escape=False, aggressive_dash_splits=True, protected_patterns=kept)
    protected = {m.group() for pattern in kept for m in re.finditer(pattern, text, re.IGNORECASE)}
    if not protected:
        return found
    out = []
    for token in found:
        inside = token not in protected and any(part in token for part in protected)
        out += split(token, escape=False, aggressive_dash_splits=True) if inside else [token]
    return out


def apostrophes_split(word: str, lang: str) -> list[str]:
    """A word of a tokenised line, split as the Moses tokenizer splits raw text where it still holds an apostrophe
    after a letter (``aujourd'hui``, ``don't``, ``students'``, ``'quoted'``), not where it is a part split off already
    (``l'``, ``n't``, ``'s``, ``'clock``: an apostrophe that opens a word is the Moses tokenizer's split): raw and
    tokenised text meet."""
    if not re.search(r"\S'", word) or any(re.fullmatch(pattern, word) for pattern in SPLIT_OFF.get(lang, ())):
        return [word]
    return moses(word, lang)


def negations(text: list[str]) -> None:
    """English tokens with a negation as the Hansards and the Penn Treebank write it, in place: the Moses
    tokenizer's ``don 't``, ``can 't``, ``won 't`` become ``do n't``, ``ca n't``, ``wo n't``."""
    for i in range(1, len(text)):
        if text[i] == "'t" and len(text[i - 1]) > 1 and text[i - 1].endswith("n"):
            text[i - 1], text[i] = text[i - 1][:-1], "n't"


def aphaereses(text: list[str], word: list[int]) -> tuple[list[str], list[int]]:
    """English tokens with a word that opens with an elision (:data:`APHAERESIS`: ``'twas``, ``'em``) as one token,
    with the word of its stem: the Moses tokenizer splits the apostrophe off (``' twas``), a tokenised line keeps
    it whole."""
    out, owner, i = [], [], 0
    while i < len(text):
        if text[i] == "'" and i + 1 < len(text) and text[i + 1] in APHAERESIS:
            out.append("'" + text[i + 1])
            owner.append(word[i + 1])
            i += 2
            continue
        out.append(text[i])
        owner.append(word[i])
        i += 1
    return out, owner


def written_out(token: str, lang: str) -> list[str]:
    """One token in the aligner's form: lowercased, a hyphen inside it apart (Moses writes ``@-@``), in French an
    elision and a contraction written out; one or more tokens."""
    token = token.lower().replace("@-@", "-")
    parts = [p for p in HYPHENS.split(token) if p] if "-" in token[1:-1] else [token]
    if lang == "en":
        return [clitic for part in parts for clitic in clitics_apart(part)]
    if lang != "fr":
        return parts
    out = []
    for part in parts:
        if (m := ELISION.match(part)) and m[1] in ELIDED:  # a word a tokenised text left whole: l'homme
            out += [ELIDED[m[1]], *written_out(m[2], lang)]
        else:
            out += [ELIDED.get(part, part)] if part not in CONTRACTED else list(CONTRACTED[part])
    return out


def clitics_apart(token: str) -> list[str]:
    """An English token with its clitics apart, however many are stacked (``they'd've`` → ``they 'd 've``,
    ``shouldn't've`` → ``should n't 've``), as a tokenised corpus writes them; the Moses tokenizer splits one."""
    out: list[str] = []
    while (m := CLITIC.search(token)) and m.start() > 0:
        out.insert(0, m.group())
        token = token[: m.start()]
    return [token, *out]


def owners(words: Sequence[str], found: Sequence[str]) -> list[int]:
    """For each token ``found`` in the line made of ``words`` (in order, each a part of one word or of several),
    the index of the word it starts in: tokens are matched to the words' characters, whitespace aside; a token
    not found where expected (a tokenizer that changed a character) stays with the word being read."""
    chars = "".join(words)
    word_of = [k for k, w in enumerate(words) for _ in w]  # the word of each character of chars
    out, at = [], 0
    for token in found:
        where = chars.find(token, at, at + len(token) + 8)
        if where >= 0:
            at = where
        out.append(word_of[min(at, len(word_of) - 1)] if word_of else 0)
        if where >= 0:
            at += len(token)
    return out


def words_linked(links: Links, src: Tokens, tgt: Tokens) -> Links:
    """Links between tokens, ``(source token, target token)``, as links between the words they come from."""
    return {(src.word[i], tgt.word[j]) for i, j in links}


@functools.cache
def _moses(lang: str):
    try:
        from sacremoses import MosesTokenizer  # imported when a line is tokenised: nothing else needs it
    except ImportError:
        raise ValueError(
            "eflomal reads words through the Moses tokenizer, which is not installed: pip install "
            "'nmt-attention[align]' (in a checkout: pip install -r requirements.txt)"
        ) from None
    return MosesTokenizer(lang=lang)
