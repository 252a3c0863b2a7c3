"""Words of the built-in corpus: typed lexicon entries, French and English morphology, orthography.

A :class:`Tok` is one word and the alignment units it belongs to; ``make_pair`` turns two
finished token lists into a :class:`Pair` with its sure and possible links (see :mod:`~nmt.data.toy.grammar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from nmt.data.toy import lexicon

FR_VOWELS = set("aeiouyàâäéèêëîïôöœùûü")
H_MUET = {"homme", "hôpital", "hôtel", "histoire", "hiver"}
H_ASPIRE = {"onze"}  # vowel-initial words that take no elision
TENSES = ("present", "past", "future")


class Tok:
    """One word and the units it belongs to (unit id -> is head)."""

    __slots__ = ("text", "links")

    def __init__(self, text: str, unit: int, head: bool = True):
        self.text = text
        self.links = {unit: head}

    def merged(self, other: Tok, text: str) -> Tok:
        tok = Tok(text, 0)
        tok.links = dict(self.links)
        for u, h in other.links.items():
            tok.links[u] = tok.links.get(u, False) or h
        return tok


@dataclass
class Pair:
    fr: str
    en: str
    sure: list[tuple[int, int]]  # (French word, English word), 0-based, whitespace words
    possible: list[tuple[int, int]]  # a superset of ``sure``

    def tsv(self) -> str:
        def fmt(links: list[tuple[int, int]]) -> str:
            return " ".join(f"{i}-{j}" for i, j in links)

        return f"{self.fr}\t{self.en}\t{fmt(self.sure)}\t{fmt(self.possible)}"


# --- lexicon parsing -------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    fr: str
    fr_pl: str
    gender: str
    en: str
    en_pl: str
    animate: bool


@dataclass(frozen=True)
class Adjective:
    forms: tuple[str, str, str, str]  # masc sg, fem sg, masc pl, fem pl
    before_vowel: str  # masc sg form before a vowel (bel, vieil, nouvel)
    en: str
    pre: bool


@dataclass(frozen=True)
class Verb:
    inf: str
    present: tuple[str, ...]  # je tu il nous vous ils
    participle: str
    future_stem: str
    en: str
    en_past: str
    transitive: bool


def _table(text: str) -> list[list[str]]:
    return [line.split("|") for line in text.strip().splitlines()]


def _en_plural(word: str) -> str:
    *rest, last = word.split(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return " ".join([*rest, last])


def _fr_plural(word: str) -> str:
    return word if word.endswith(("s", "x", "z")) else word + "s"


def third_person(base: str) -> str:
    first, *rest = base.split(" ")
    if first.endswith(("s", "x", "z", "ch", "sh", "o")):
        first += "es"
    elif first.endswith("y") and first[-2] not in "aeiou":
        first = first[:-1] + "ies"
    else:
        first += "s"
    return " ".join([first, *rest])


def _conjugate(inf: str, cls: str) -> tuple[tuple[str, ...], str, str]:
    if "/" in cls:  # irregular: "forms x6/participle/future stem"
        forms, participle, stem = cls.split("/")
        return tuple(forms.split()), participle, stem
    stem = inf[:-2]
    if cls == "er":
        nous = stem + ("e" if stem.endswith("g") else "") + "ons"
        nous = nous[:-4] + "çons" if stem.endswith("c") else nous
        return (stem + "e", stem + "es", stem + "e", nous, stem + "ez", stem + "ent"), stem + "é", inf
    if cls == "ir":
        return (
            (stem + "is", stem + "is", stem + "it", stem + "issons", stem + "issez", stem + "issent"),
            stem + "i",
            inf,
        )
    if cls == "re":
        return (stem + "s", stem + "s", stem, stem + "ons", stem + "ez", stem + "ent"), stem + "u", inf[:-1]
    raise ValueError(f"unknown verb class {cls!r} for {inf!r}")


@cache
def load_lexicon() -> dict:
    """Parse ``lexicon.py`` into typed entries (cached)."""
    nouns = []
    for fr, gender, en, *flags in _table(lexicon.NOUNS):
        fr_sg, _, fr_pl = fr.partition(":")
        en_sg, _, en_pl = en.partition(":")
        nouns.append(Noun(fr_sg, fr_pl or _fr_plural(fr_sg), gender, en_sg, en_pl or _en_plural(en_sg), "a" in flags))
    adjectives = []
    for fr, en, pos in _table(lexicon.ADJECTIVES):
        given = fr.split(":")
        m = given[0]
        f = given[1] if len(given) > 1 else (m if m.endswith("e") else m + "e")
        mp = given[2] if len(given) > 2 else _fr_plural(m)
        fp = given[3] if len(given) > 3 else f + "s"
        bv = given[4] if len(given) > 4 else m
        adjectives.append(Adjective((m, f, mp, fp), bv, en, pos == "pre"))
    verbs = []
    for inf, en, cls, kind in _table(lexicon.VERBS):
        base, _, past = en.partition(":")
        present, participle, stem = _conjugate(inf, cls)
        verbs.append(Verb(inf, present, participle, stem, base, past, kind == "t"))
    return {
        "nouns": nouns,
        "animate": [n for n in nouns if n.animate],
        "adjectives": adjectives,
        "transitive": [v for v in verbs if v.transitive],
        "intransitive": [v for v in verbs if not v.transitive],
        "prepositions": [(fr.split(), en.split(), int(h)) for fr, en, h in _table(lexicon.PREPOSITIONS)],
        "numbers": _table(lexicon.NUMBERS),
        "names": _table(lexicon.NAMES),
    }


def fr_starts_with_vowel(word: str) -> bool:
    w = word.lower()
    return (w[:1] in FR_VOWELS and w not in H_ASPIRE) or w in H_MUET


# --- orthography -----------------------------------------------------------------------

ELIDE = {"je": "j'", "me": "m'", "te": "t'", "ne": "n'", "de": "d'", "que": "qu'", "le": "l'", "la": "l'"}
CONTRACT = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des", ("de", "des"): "de"}


def _merge_pass(toks: list[Tok], rule) -> list[Tok]:
    out: list[Tok] = []
    for tok in toks:
        if out and (text := rule(out[-1].text, tok.text)) is not None:
            out[-1] = out[-1].merged(tok, text)
        else:
            out.append(tok)
    return out


def _attach(toks: list[Tok]) -> list[Tok]:
    # punctuation marked with \0 sticks to the previous word
    return _merge_pass(toks, lambda a, b: a + b[1:] if b.startswith("\0") else None)


def finish_french(toks: list[Tok]) -> list[Tok]:
    toks = _merge_pass(toks, lambda a, b: "l'" + b if a in ("le", "la") and fr_starts_with_vowel(b) else None)
    toks = _merge_pass(toks, lambda a, b: CONTRACT.get((a, b)))
    toks = _merge_pass(toks, lambda a, b: ELIDE[a] + b if a in ELIDE and fr_starts_with_vowel(b) else None)
    toks = _attach(toks)
    toks[0].text = toks[0].text[0].upper() + toks[0].text[1:]
    return toks


def finish_english(toks: list[Tok]) -> list[Tok]:
    for a, b in zip(toks, toks[1:]):
        if a.text == "a" and b.text[:1].lower() in "aeiou":
            a.text = "an"
    toks = _attach(toks)
    toks[0].text = toks[0].text[0].upper() + toks[0].text[1:]
    return toks


def make_pair(fr: list[Tok], en: list[Tok]) -> Pair:
    sure, possible = [], []
    for i, f in enumerate(fr):
        for j, e in enumerate(en):
            units = f.links.keys() & e.links.keys()
            if units:
                possible.append((i, j))
                if any(f.links[u] and e.links[u] for u in units):
                    sure.append((i, j))
    return Pair(" ".join(t.text for t in fr), " ".join(t.text for t in en), sure, possible)
