"""The aligner's tokenisation (nmt/alignment/tokenisation.py): raw and tokenised text put into one form, each token
knowing its word, and eflomal's links mapped back to the words of the lines as given."""

from __future__ import annotations

import pytest

from nmt.alignment import eflomal
from nmt.alignment.tokenisation import LINES, tokens, words_linked
from nmt.inference import pair_links


def pairs(t) -> list[tuple[str, int]]:
    return list(zip(t.text, t.word))


def test_raw_french_is_split_and_written_out_as_the_hansards_write_it():
    got = tokens("C'est l'homme qu'il a vu aujourd'hui, peut-être au marché des Halles.", "fr", "raw")
    assert got.text == ("ce est le homme que il a vu aujourd' hui , peut - être à le marché de les halles .".split())
    # each token's word of the line as typed: "C'est" is word 0, "aujourd'hui," word 5, "Halles." word 10
    assert got.word == [0, 0, 1, 1, 2, 2, 3, 4, 5, 5, 5, 6, 6, 6, 7, 7, 8, 9, 9, 10, 10]


@pytest.mark.parametrize(
    "raw, written",
    [
        ("S’il vient, je m'en vais.", "se il vient , je me en vais ."),  # typographic apostrophe, s' and m'
        ("Jusqu'à quand ? Lorsqu'il pleut…", "jusque à quand ? lorsque il pleut …"),
        ("Le prix du pain, des œufs et aux Halles.", "le prix de le pain , de les œufs et à les halles ."),
        ("Est-ce vrai ? « Oui ! »", "est - ce vrai ? « oui ! »"),
        ("Auquel pensez-vous ?", "à lequel pensez - vous ?"),
    ],
)
def test_french_elisions_contractions_hyphens_and_punctuation(raw, written):
    assert tokens(raw, "fr", "raw").text == written.split()


def test_english_raw_text_splits_punctuation_and_clitics():
    got = tokens("The member's motion, Mr. Speaker, is e-mail.", "en", "raw")
    assert got.text == "the member 's motion , mr. speaker , is e - mail .".split()
    assert got.word == [0, 1, 1, 2, 2, 3, 4, 4, 5, 6, 6, 6, 6]


@pytest.mark.parametrize(
    "line, lang",
    [
        ("monsieur le Orateur , ce ne est que un début à le sujet de les taxes .", "fr"),
        ("souvenons - nous , ce est aujourd' hui que il a parlé .", "fr"),
        ("passage of the hon. member 's motion , at 2 p.m . we do n't know .", "en"),
    ],
)
def test_tokenised_text_stays_as_it_is_either_way(line, lang):
    """A line already written as the Hansards write it is its own form (lowercased), read as tokenised or as raw:
    one word, one token."""
    words = line.split()
    for how in ("tokenised", "raw"):
        got = tokens(line, lang, how)
        assert got.text == [w.lower() for w in words], how
        assert got.word == list(range(len(words))), how


def test_tokenised_lines_keep_their_punctuation_but_write_out_what_is_left_whole():
    """``tokenised`` trusts the line's split (``hon.`` stays), but a word still holding an elision, a contraction or
    a hyphen is written out like the corpus."""
    got = tokens("l'homme du peuple , peut-être hon.", "fr", "tokenised")
    assert pairs(got) == [
        ("le", 0), ("homme", 0), ("de", 1), ("le", 1), ("peuple", 2), (",", 3),
        ("peut", 4), ("-", 4), ("être", 4), ("hon.", 5),
    ]  # fmt: skip


def test_whitespace_reads_the_words_as_they_are():
    got = tokens("C'est l'homme.", "fr", "whitespace")
    assert pairs(got) == [("C'est", 0), ("l'homme.", 1)]


def test_an_unknown_way_of_writing_lines_is_refused():
    with pytest.raises(ValueError, match="lines='moses': must be one of tokenised, raw, whitespace"):
        tokens("a b", "fr", "moses")
    with pytest.raises(ValueError, match=r"data.aligner.lines='moses': must be one of " + ", ".join(LINES)):
        eflomal.EflomalSettings(lines="moses")


def test_links_between_tokens_map_back_to_the_words_they_come_from():
    src = tokens("C'est l'homme.", "fr", "raw")  # ce est le homme .
    tgt = tokens("It's the man.", "en", "raw")  # it 's the man .
    links = {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}
    assert words_linked(links, src, tgt) == {(0, 0), (1, 1), (1, 2)}  # C'est-It's, l'homme.-the, l'homme.-man.
    assert words_linked(set(), src, tgt) == set()


def test_eflomal_links_raw_lines_and_a_corpus_in_one_tokenisation(monkeypatch):
    """align_pairs hands eflomal the tokens of the corpus and of the lines, and maps its links back to the lines'
    whitespace words: given token links, the words they come from."""
    seen = {}

    def fake_align_after(corpus, lines, model, smaller, draws):
        seen["corpus"], seen["lines"] = corpus, lines
        one_to_one = [{(k, k) for k in range(min(len(s), len(t)))} for s, t in lines]
        return one_to_one, one_to_one

    monkeypatch.setattr(eflomal, "align_after", fake_align_after)
    corpus = [("C'est l'homme.", "It is the man.")]
    settings = eflomal.EflomalSettings(symmetrisation="intersection", lines="tokenised")
    links = eflomal.align_pairs(["ce est le homme ."], ["it is the man ."], corpus, settings)
    assert seen["corpus"] == [("ce est le homme .".split(), "it is the man .".split())]
    assert seen["lines"] == [("ce est le homme .".split(), "it is the man .".split())]
    assert links == [{(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}]

    raw = eflomal.EflomalSettings(symmetrisation="intersection", lines="raw")
    links = eflomal.align_pairs(["C'est l'homme."], ["It is the man."], corpus, raw)
    assert seen["lines"] == seen["corpus"]  # the same tokens as the tokenised line's
    # tokens ce est le homme . / it is the man . linked one to one: words C'est l'homme. / It is the man.
    assert links == [{(0, 0), (0, 1), (1, 2), (1, 3)}]

    plain = eflomal.EflomalSettings(symmetrisation="intersection", lines="whitespace")
    eflomal.align_pairs(["C'est l'homme."], ["It is the man."], corpus, plain)
    assert seen["corpus"] == [("C'est l'homme.".split(), "It is the man.".split())]


def test_an_english_source_reads_the_french_rules_on_the_target(monkeypatch):
    seen = {}

    def fake_align_after(corpus, lines, *rest):
        seen["lines"] = lines
        return [set()], [set()]

    monkeypatch.setattr(eflomal, "align_after", fake_align_after)
    settings = eflomal.EflomalSettings(lines="raw")
    eflomal.align_pairs(["It's the man."], ["C'est l'homme."], [], settings, "", ("en", "fr"))
    assert seen["lines"] == [("it 's the man .".split(), "ce est le homme .".split())]


def test_a_corpus_is_tokenised_once_and_read_back_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "c.tsv"
    corpus.write_text("C'est l'homme.\tIt's the man.\nAu revoir !\tGoodbye!\n", encoding="utf-8")
    first = pair_links.corpus_tokens(corpus, ("fr", "en"), "raw")
    assert first == [
        ("ce est le homme .".split(), "it 's the man .".split()),
        ("à le revoir !".split(), "goodbye !".split()),
    ]
    assert len(list((tmp_path / "cache" / "aligner").iterdir())) == 1
    turned = pair_links.corpus_tokens(corpus, ("en", "fr"), "raw")  # an English source: the corpus turned round
    assert turned == [(t, s) for s, t in first]
    monkeypatch.setattr(pair_links, "paired_tokens", lambda *a: pytest.fail("tokenised again"))
    assert pair_links.corpus_tokens(corpus, ("fr", "en"), "raw") == first  # read back, not tokenised again
    corpus.write_text("Oui.\tYes.\n", encoding="utf-8")
    monkeypatch.undo()
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    assert pair_links.corpus_tokens(corpus, ("fr", "en"), "raw") == [("oui .".split(), "yes .".split())]  # changed
    (tmp_path / "bad.tsv").write_text("sans anglais\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.tsv:1: .*column"):
        pair_links.corpus_tokens(tmp_path / "bad.tsv", ("fr", "en"), "raw")


# a phrase as typed, and ways a tokenised corpus writes it (the Hansards, the Penn Treebank, the Moses tokenizer)
WRITTEN = {
    "en": [
        ("don't", ["do n't", "don 't", "Do n't", "don't"]),
        ("can't", ["ca n't", "can 't"]),
        ("won't", ["wo n't"]),
        ("isn't", ["is n't"]),
        ("It's", ["it 's", "It 's", "it's"]),
        ("I'm", ["i 'm", "I 'm"]),
        ("they're", ["they 're"]),
        ("we've", ["we 've"]),
        ("you'll", ["you 'll"]),
        ("he'd", ["he 'd"]),
        ("they'd've", ["they 'd 've"]),  # stacked clitics
        ("shouldn't've", ["should n't 've", "shouldn 't 've"]),
        ("I'd've", ["i 'd 've", "I 'd 've"]),
        ("students'", ["students '", "students'"]),
        ("Tom's", ["tom 's"]),
        ("Tom’s", ["tom 's", "Tom ’s"]),
        ('"hello"', ['" hello "']),
        ("'quoted'", ["' quoted '", "'quoted'"]),
        ("'Twas", ["'twas", "' twas", "'Twas"]),  # #82 §7: a word that opens with an elision
        ("'tis", ["'tis", "' tis"]),
        ("'em", ["'em", "' em"]),
        ("'cause", ["'cause", "' cause"]),
        ("e-mail", ["e - mail", "e-mail"]),
        ("well-known", ["well - known"]),
        ("yes,", ["yes ,"]),
        ("the cat", ["the cat"]),
    ],
    "fr": [
        ("l'homme", ["l' homme", "le homme", "l'homme"]),
        ("J'ai", ["j' ai", "je ai"]),
        ("qu'il", ["qu' il", "que il"]),
        ("aujourd'hui", ["aujourd' hui", "aujourd'hui"]),
        ("c'est-à-dire", ["c' est - à - dire", "ce est-à-dire", "c'est-à-dire"]),
        ("« guillemets »", ["« guillemets »"]),
        ("«oui»", ["« oui »"]),
        ('"non"', ['" non "']),
        ("peut-être", ["peut - être", "peut-être"]),
        ("a-t-il", ["a - t - il"]),
        ("jusqu'à", ["jusqu' à", "jusque à"]),
        ("S’il", ["s' il", "se il"]),
        ("presqu'île", ["presqu' île"]),
        ("au marché", ["à le marché", "au marché"]),
        ("des œufs,", ["de les œufs ,", "des œufs ,"]),
    ],
}


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_raw_and_tokenised_forms_of_a_sentence_give_the_same_tokens(lang):
    """Property: a sentence made of any phrases, typed (raw) or written as a tokenised corpus writes it, read as raw or
    as tokenised text, is one sequence of tokens, so that eflomal counts a word once. 300 sentences per language."""
    import random

    rng = random.Random(59)
    for _ in range(300):
        chosen = rng.sample(WRITTEN[lang], rng.randint(1, 5))
        end = rng.choice(["", ".", " ?", "!"])
        raw = " ".join(typed for typed, _ in chosen) + end
        tokenised = " ".join(rng.choice(forms) for _, forms in chosen) + (" " + end.strip() if end else "")
        want = tokens(raw, lang, "raw").text
        assert tokens(tokenised, lang, "tokenised").text == want, (raw, tokenised)
        assert tokens(tokenised, lang, "raw").text == want, (raw, tokenised)


def test_english_negations_are_split_as_the_hansards_split_them():
    """The issue's case, by hand: raw ``don't`` and tokenised ``do n't`` are one token pair, with each token's word."""
    for line, how in (("I don't, can't, won't.", "raw"), ("I do n't , ca n't , wo n't .", "tokenised")):
        assert tokens(line, "en", how).text == "i do n't , ca n't , wo n't .".split(), how
    assert pairs(tokens("I don't know.", "en", "raw")) == [("i", 0), ("do", 1), ("n't", 1), ("know", 2), (".", 2)]
