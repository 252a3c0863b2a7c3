"""The built-in French–English corpus: a grammar over :mod:`~nmt.data.toy.lexicon` with gold word alignments.

Every sentence is built from *units* (a noun, its article, a negation, a verb with its
auxiliary ...). A word belongs to one or more units (``l'arbre`` to the article and the
noun, ``n'a`` to the negation and the verb); a French and an English word are aligned when
they share a unit. The link is *sure* when both are heads of the unit (``pas``/``not``,
``mangé``/``ate``) and *possible* otherwise (``a``/``ate``), as in Och & Ney's AER.

Covered: gender and number agreement of articles and adjectives, post-nominal adjectives
(crossing links), ``ne ... pas`` and ``pas de``, subject and object pronouns, present,
passé composé (with participle agreement after a preceding object pronoun) and future,
the copula, possessives, demonstratives, numbers, prepositions (with ``au``/``du``
contractions), time adverbials, yes/no and wh-questions, and coordinated clauses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from nmt.data.toy import lexicon
from nmt.data.toy.morphology import (
    TENSES,
    Noun,
    Pair,
    Tok,
    Verb,
    finish_english,
    finish_french,
    fr_starts_with_vowel,
    load_lexicon,
    make_pair,
    third_person,
)


@dataclass
class Subject:
    fr: list[Tok]
    en: list[Tok]
    person: int
    plural: bool
    gender: str
    pronoun: bool


class Grammar:
    """Draws sentence pairs from a seeded random generator."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.lex = load_lexicon()
        self._unit = 0

    def unit(self) -> int:
        self._unit += 1
        return self._unit

    def words(self, fr: list[str], en: list[str], fr_head: int | None = 0) -> tuple[list[Tok], list[Tok]]:
        """One unit: French words (one head) and English words (all heads)."""
        u = self.unit()
        return [Tok(w, u, i == fr_head) for i, w in enumerate(fr)], [Tok(w, u) for w in en]

    # noun phrases

    def noun_phrase(self, nouns: list[Noun], negated_object: bool = False) -> Subject:
        r = self.rng
        noun = r.choice(nouns)
        plural = r.random() < 0.35
        pre = post = None
        x = r.random()
        if x < 0.40:
            adj = r.choice(self.lex["adjectives"])
            pre, post = (adj, None) if adj.pre else (None, adj)
        elif x < 0.48:
            pre = r.choice([a for a in self.lex["adjectives"] if a.pre])
            post = r.choice([a for a in self.lex["adjectives"] if not a.pre])
        g = noun.gender
        slot = (0 if g == "m" else 1) + (2 if plural else 0)
        fr_noun = noun.fr_pl if plural else noun.fr
        # the French word right after the determiner decides elision and mon/ma, ce/cet
        first = fr_noun
        pre_fr = None
        if pre is not None:
            pre_fr = pre.forms[slot]
            if slot == 0 and fr_starts_with_vowel(fr_noun):
                pre_fr = pre.before_vowel
            first = pre_fr
        vowel = fr_starts_with_vowel(first)

        det_kind = r.choices(["def", "indef", "poss", "dem", "num"], [40, 25, 15, 10, 10 if plural else 0])[0]
        if det_kind == "def":
            det_fr, det_en = ["les" if plural else ("le" if g == "m" else "la")], ["the"]
        elif det_kind == "indef":
            det_fr = ["des" if plural else ("un" if g == "m" else "une")]
            det_en = [] if plural else ["a"]
            if negated_object:
                det_fr = ["de"]
        elif det_kind == "poss":
            forms, en = r.choice(lexicon.POSSESSIVES)
            fr = forms[2] if plural else forms[0 if g == "m" or vowel else 1]
            det_fr, det_en = [fr], [en]
        elif det_kind == "dem":
            fr = "ces" if plural else ("cette" if g == "f" else ("cet" if vowel else "ce"))
            det_fr, det_en = [fr], ["these" if plural else "this"]
        else:
            fr, en = r.choice(self.lex["numbers"])
            det_fr, det_en = [fr], [en]

        d_fr, d_en = self.words(det_fr, det_en)
        n_fr, n_en = self.words([fr_noun], (noun.en_pl if plural else noun.en).split())
        fr_toks, en_toks = list(d_fr), list(d_en)
        pre_toks = self.words([pre_fr], [pre.en]) if pre else ([], [])
        post_toks = self.words([post.forms[slot]], [post.en]) if post else ([], [])
        fr_toks += pre_toks[0] + n_fr + post_toks[0]
        en_toks += pre_toks[1] + post_toks[1] + n_en
        return Subject(fr_toks, en_toks, 3, plural, g, False)

    def name(self) -> Subject:
        name, gender = self.rng.choice(self.lex["names"])
        fr, en = self.words([name], [name])
        return Subject(fr, en, 3, False, gender, False)

    def subject(self, animate: bool = True) -> Subject:
        x = self.rng.random()
        if x < 0.45:
            fr, en, person, plural, gender = self.rng.choice(lexicon.PRONOUNS)
            gender = gender or self.rng.choice("mf")
            f, e = self.words([fr], [en])
            return Subject(f, e, person, plural, gender, True)
        if x < 0.55:
            return self.name()
        return self.noun_phrase(self.lex["animate"] if animate else self.lex["nouns"])

    def object_np(self, negated: bool) -> Subject:
        return self.name() if self.rng.random() < 0.08 else self.noun_phrase(self.lex["nouns"], negated)

    def prep_phrase(self) -> tuple[list[Tok], list[Tok]]:
        fr, en, head = self.rng.choice(self.lex["prepositions"])
        p_fr, p_en = self.words(fr, en, head)
        np = self.object_np(False)
        return p_fr + np.fr, p_en + np.en

    def time_phrase(self, tense: str) -> tuple[list[Tok], list[Tok]]:
        fr, en = self.rng.choice(lexicon.TIMES[tense]).split("|")
        fr_words, en_words = fr.split(), en.split()
        if len(fr_words) == len(en_words):  # word for word (hier soir / last night)
            toks = [self.words([f], [e]) for f, e in zip(fr_words, en_words)]
            return [t for f, _ in toks for t in f], [t for _, e in toks for t in e]
        if len(fr_words) == 3:  # la semaine dernière / last week: crossing
            la, semaine, adj = fr_words
            d_fr, _ = self.words([la], [])
            n_fr, n_en = self.words([semaine], [en_words[1]])
            a_fr, a_en = self.words([adj], [en_words[0]])
            return d_fr + n_fr + a_fr, a_en + n_en
        return self.words(fr_words, en_words, len(fr_words) - 1)

    # verbs

    def english_verb(
        self, verb: Verb, subj: Subject, tense: str, negated: bool, question: bool
    ) -> tuple[list[str], list[str]]:
        """English auxiliary words and main-verb words."""
        third = subj.person == 3 and not subj.plural
        base = verb.en.split()
        if tense == "future":
            return ["will"], base
        if negated or question:
            aux = {"present": "does" if third else "do", "past": "did"}[tense]
            return [aux], base
        if tense == "past":
            return [], verb.en_past.split()
        return [], (third_person(verb.en) if third else verb.en).split()

    def french_verb(self, verb: Verb, subj: Subject, tense: str, agree: str = "") -> tuple[list[str], str]:
        """French auxiliary words and the main verb form (participle agreement ``agree``)."""
        idx = (subj.person - 1) + (3 if subj.plural else 0)
        if tense == "present":
            return [], verb.present[idx]
        if tense == "future":
            return [], verb.future_stem + ("ai", "as", "a", "ons", "ez", "ont")[idx]
        avoir = ("ai", "as", "a", "avons", "avez", "ont")[idx]
        participle = verb.participle
        if "f" in agree:
            participle += "e"
        if "p" in agree and not participle.endswith("s"):
            participle += "s"
        return [avoir], participle

    def clause(self, question: bool = False) -> tuple[list[Tok], list[Tok], bool]:
        """A clause; returns French, English (English in question order if asked) and whether it is a copula."""
        r = self.rng
        tense = r.choice(TENSES)
        negated = not question and r.random() < 0.3
        kind = r.choices(["trans", "objpron", "intrans", "copula"], [45, 10, 22, 23])[0]
        subj = self.subject(animate=kind != "copula")

        if kind == "copula":
            return (*self.copula(subj, tense, negated, question), True)

        verb = r.choice(self.lex["transitive" if kind != "intrans" else "intransitive"])
        obj_fr: list[Tok] = []
        obj_en: list[Tok] = []
        pron_fr: list[Tok] = []
        pron_en: list[Tok] = []
        agree = ""
        if kind == "trans":
            obj = self.object_np(negated)
            obj_fr, obj_en = obj.fr, obj.en
        elif kind == "objpron":
            choices = [p for p in lexicon.OBJECT_PRONOUNS if (p[2], p[3]) != (subj.person, subj.plural)]
            fr, en, _, plural = r.choice(choices)
            pron_fr, pron_en = self.words([fr], [en])
            agree = r.choice("mf") + ("p" if plural else "")
            agree = agree.replace("m", "")

        aux_fr, main_fr = self.french_verb(verb, subj, tense, agree)
        aux_en, main_en = self.english_verb(verb, subj, tense, negated, question)
        u = self.unit()
        v_aux_fr = [Tok(w, u, False) for w in aux_fr]
        v_main_fr = [Tok(main_fr, u)]
        v_aux_en = [Tok(w, u, False) for w in aux_en]
        v_main_en = [Tok(w, u) for w in main_en]

        fr = list(subj.fr)
        if negated:
            n = self.unit()
            neg_en = [Tok("not", n)]
            fr += [Tok("ne", n, False)] + pron_fr + (v_aux_fr or v_main_fr) + [Tok("pas", n)]
            fr += v_main_fr if v_aux_fr else []
        else:
            neg_en = []
            fr += pron_fr + v_aux_fr + v_main_fr
        fr += obj_fr
        if question:
            en = v_aux_en + subj.en + v_main_en
        else:
            en = subj.en + v_aux_en + neg_en + v_main_en
        en += pron_en + obj_en

        if r.random() < 0.35:
            p_fr, p_en = self.prep_phrase()
            fr += p_fr
            en += p_en
        if r.random() < 0.25:
            t_fr, t_en = self.time_phrase(tense)
            fr += t_fr
            en += t_en
        return fr, en, False

    def copula(self, subj: Subject, tense: str, negated: bool, question: bool) -> tuple[list[Tok], list[Tok]]:
        idx = (subj.person - 1) + (3 if subj.plural else 0)
        etre = {
            "present": ("suis", "es", "est", "sommes", "êtes", "sont"),
            "past": ("étais", "étais", "était", "étions", "étiez", "étaient"),
            "future": ("serai", "seras", "sera", "serons", "serez", "seront"),
        }[tense][idx]
        if tense == "future":
            be = ["will", "be"]
        else:
            present = (
                "am"
                if (subj.person, subj.plural) == (1, False)
                else ("is" if subj.person == 3 and not subj.plural else "are")
            )
            past = "was" if not subj.plural and subj.person != 2 else "were"
            be = [present if tense == "present" else past]
        u = self.unit()
        v_fr = Tok(etre, u)
        v_en = [Tok(w, u) for w in be]
        adj = self.rng.choice(self.lex["adjectives"])
        slot = (0 if subj.gender == "m" else 1) + (2 if subj.plural else 0)
        a_fr, a_en = self.words([adj.forms[slot]], [adj.en])
        fr = list(subj.fr)
        if negated:
            n = self.unit()
            fr += [Tok("ne", n, False), v_fr, Tok("pas", n)]
            en = subj.en + v_en[:1] + [Tok("not", n)] + v_en[1:]
        else:
            fr += [v_fr]
            en = (v_en[:1] + subj.en + v_en[1:]) if question else subj.en + v_en
        fr += a_fr
        en += a_en
        if not question and self.rng.random() < 0.25:
            t_fr, t_en = self.time_phrase(tense)
            fr += t_fr
            en += t_en
        return fr, en

    # sentences

    def sentence(self) -> tuple[list[Tok], list[Tok]]:
        r = self.rng
        x = r.random()
        if x < 0.15:  # yes/no question
            q = self.unit()
            fr_c, en_c, copula = self.clause(question=True)
            self._link_question_aux(en_c, q, copula)
            p_fr, p_en = self.punct("?", "?", fr_space=True)
            return [Tok("est-ce", q), Tok("que", q, False)] + fr_c + p_fr, en_c + p_en
        if x < 0.25:  # wh-question
            wh_fr, wh_en = r.choice(lexicon.WH_WORDS).split("|")
            w_fr, w_en = self.words([wh_fr], [wh_en])
            q = self.unit()
            fr_c, en_c, copula = self.clause(question=True)
            self._link_question_aux(en_c, q, copula)
            fr = w_fr + [Tok("est-ce", q), Tok("que", q, False)] + fr_c
            p_fr, p_en = self.punct("?", "?", fr_space=True)
            return fr + p_fr, w_en + en_c + p_en
        fr, en, _ = self.clause()
        if x < 0.45:  # two coordinated clauses
            c_fr, c_en = r.choice(lexicon.CONJUNCTIONS).split("|")
            k_fr, k_en = self.words(c_fr.split(), c_en.split())
            fr2, en2, _ = self.clause()
            fr, en = fr + k_fr + fr2, en + k_en + en2
        p_fr, p_en = self.punct(".", ".")
        return fr + p_fr, en + p_en

    def _link_question_aux(self, en: list[Tok], q: int, copula: bool) -> None:
        # do/does/did/will of a question also mark the question (est-ce que), as possible links
        if not copula:
            en[0].links[q] = False

    def punct(self, fr: str, en: str, fr_space: bool = False) -> tuple[list[Tok], list[Tok]]:
        # possible links only: glued to a word, a sure link would give that word two
        u = self.unit()
        return [Tok(fr if fr_space else "\0" + fr, u, False)], [Tok("\0" + en, u)]

    def pair(self, min_words: int = 3, max_words: int = 25) -> Pair:
        """Draw sentence pairs until one fits the length limits."""
        while True:
            fr, en = self.sentence()
            fr, en = finish_french(fr), finish_english(en)
            if min_words <= len(fr) <= max_words and min_words <= len(en) <= max_words:
                return make_pair(fr, en)
