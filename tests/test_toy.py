import re

from nmt.data.toy import grammar as toy
from nmt.data.toy import morphology as words


def test_deterministic_in_seed():
    a, b, c = generate(50, seed=3), generate(50, seed=3), generate(50, seed=4)
    assert [p.tsv() for p in a] == [p.tsv() for p in b]
    assert [p.fr for p in a] != [p.fr for p in c]


def test_alignments_index_valid_words_and_lengths_in_range():
    for p in generate(500, seed=1):
        n_fr, n_en = len(p.fr.split()), len(p.en.split())
        assert 3 <= n_fr <= 25 and 3 <= n_en <= 25
        assert set(p.sure) <= set(p.possible)
        for i, j in p.possible:
            assert 0 <= i < n_fr and 0 <= j < n_en
        # every English word has at most one sure link: attention can reach AER 0
        sure_targets = [j for _, j in p.sure]
        assert len(sure_targets) == len(set(sure_targets))


def test_post_nominal_adjectives_give_crossing_links():
    crossing = 0
    for p in generate(300, seed=2):
        links = sorted(p.sure)
        crossing += any(i1 < i2 and j1 > j2 for i1, j1 in links for i2, j2 in links)
    assert crossing > 50


def test_noun_phrase_alignment_example():
    # find "la/le ... <noun> <colour>" and check the English order is "the <colour> <noun>"
    for p in generate(2000, seed=5):
        fr, en = p.fr.split(), p.en.split()
        for i in range(len(fr) - 2):
            if fr[i] == "la" and fr[i + 2] == "rouge":
                links = dict(p.sure)
                j_det, j_noun, j_adj = links[i], links[i + 1], links[i + 2]
                assert en[j_det] == "the" and j_adj == j_det + 1 and j_noun == j_det + 2
                return
    raise AssertionError("no 'la <noun> rouge' found")


def test_grammar_features_appear():
    pairs = generate(3000, seed=1)
    fr = "\n".join(p.fr for p in pairs)
    en = "\n".join(p.en for p in pairs)
    checks = {
        "ne ... pas": re.search(r"\bn(e |')\S+ pas\b", fr),
        "does not": "does not" in en,
        "did not (passé composé)": "did not" in en and re.search(r"\bn'(ai|as|a|avons|avez|ont) pas \w+é\b", fr),
        "future": "will" in en and re.search(r"\w+(erai|eras|era|erons|erez|eront)\b", fr),
        "pas de": re.search(r"\bpas d(e |')", fr),
        "possessives": re.search(r"\b(mon|ma|mes|notre|nos|leur|leurs)\b", fr) and " my " in en,
        "plural agreement": re.search(r"\bles \w+s \w+s\b", fr),
        "feminine adjective": re.search(r"\bune \w+ \w+e\b", fr),
        "contractions": re.search(r"\b(au|aux|du)\b", fr),
        "elision": re.search(r"\b[ljmtnd]'\w", fr),
        "numbers": re.search(r"\b(deux|trois|quatre|cinq|douze|vingt)\b", fr)
        and re.search(r"\b(two|three|four|five|twelve|twenty)\b", en),
        "yes/no questions": "Est-ce que" in fr and re.search(r"^(Do|Does|Did|Will|Is|Are|Was|Were) ", en, re.M),
        "wh-questions": re.search(r"^(Pourquoi|Quand|Où) est-ce", fr, re.M)
        and re.search(r"^(Why|When|Where) ", en, re.M),
        "object pronouns": re.search(r"\b(me|te|les|m'|t')\w* ?\w+ ", fr) and re.search(r"\b(them|me|us)\b", en),
        "prepositions": re.search(r"\b(dans|sur|sous|devant|avec)\b", fr),
        "coordination": re.search(r"\b(et|mais|parce que)\b", fr),
    }
    missing = [k for k, v in checks.items() if not v]
    assert not missing, missing


def test_lexicon_size_and_variety():
    counts = lemma_counts()
    assert counts["fr"] >= 400 and counts["en"] >= 400
    pairs = generate(5000, seed=9)
    assert len({p.fr for p in pairs}) > 4900  # far more distinct sentences than any run sees


def generate(n: int, seed: int) -> list:
    """``n`` sentence pairs of the built-in corpus, deterministic in ``seed``."""
    g = toy.Grammar(seed)
    return [g.pair(3, 25) for _ in range(n)]


def lemma_counts() -> dict[str, int]:
    """Distinct lemmas per language (what the corpus documentation quotes)."""
    lex = words.load_lexicon()
    fr: set[str] = set()
    en: set[str] = set()
    fr |= {n.fr for n in lex["nouns"]}
    en |= {n.en for n in lex["nouns"]}
    fr |= {a.forms[0] for a in lex["adjectives"]}
    en |= {a.en for a in lex["adjectives"]}
    for v in lex["transitive"] + lex["intransitive"]:
        fr.add(v.inf)
        en.add(v.en)
    for fr_words, en_words, _ in lex["prepositions"]:
        fr.add(" ".join(fr_words))
        en.add(" ".join(en_words))
    for table in (lex["numbers"], [[n, n] for n, _ in lex["names"]]):
        fr |= {row[0] for row in table}
        en |= {row[1] for row in table}
    closed = [
        [(p[0], p[1]) for p in words.lexicon.PRONOUNS],
        [(p[0], p[1]) for p in words.lexicon.OBJECT_PRONOUNS],
        [(p[0][0], p[1]) for p in words.lexicon.POSSESSIVES],
        [tuple(x.split("|")) for x in words.lexicon.CONJUNCTIONS + words.lexicon.WH_WORDS],
        [tuple(x.split("|")) for xs in words.lexicon.TIMES.values() for x in xs],
        [("le", "the"), ("un", "a"), ("ce", "this"), ("ne", "not"), ("être", "be"), ("avoir", "have")],
    ]
    for table in closed:
        fr |= {a for a, _ in table}
        en |= {b for _, b in table}
    return {"fr": len(fr), "en": len(en)}
