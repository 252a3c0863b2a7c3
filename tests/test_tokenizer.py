"""Sentencepiece wrappers: word-by-word BPE encoding gives sentencepiece's own ids."""

from itertools import chain

import pytest
import sentencepiece as spm

from nmt.data.tokenizer import encode_flat, train_model, word_local

WORDS = "le chat noir mange la souris grise , l' oiseau chante très fort dans l' arbre .".split()

# every character up to U+30FF (Latin, combining marks, spaces, compatibility forms such as ¨ ´ ½ ﬁ, CJK
# punctuation), the presentation and full-width forms, and a spread of the rest of Unicode
CHARS = [
    chr(c)
    for c in (*range(1, 0x3100), *range(0xFB00, 0x10000), *range(0x10000, 0x110000, 97))
    if not 0xD800 <= c < 0xE000
]


def texts() -> list[str]:
    out = [" ".join(f"a{c} {c}b {c} {c}{c} é{c}" for c in CHARS[i : i + 20]) for i in range(0, len(CHARS), 20)]
    out += ["", " ", "  le  chat ", "le\tchat\u00a0noir", "l'oiseau", "\u200b", "a \u0301b ´ ¨c"]
    return out + [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(i % 9)) for i in range(200)]


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_flat_encoding_is_sentencepiece_encoding(model_type):
    train = [" ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(3 + i % 6)) for i in range(300)]
    train += ["".join(CHARS[i : i + 40 : 10]) for i in range(0, 4000, 40)]  # some of the characters, not all
    model = train_model(train, model_type, 600, 1.0, 1)
    sp = spm.SentencePieceProcessor(model_proto=model)
    assert word_local(model) == (model_type == "bpe")
    data = texts()
    ids = sp.encode(data)
    for by_words in (False, True) if model_type == "bpe" else (False,):
        flat, lens = encode_flat(sp, data, by_words)
        assert lens.tolist() == [len(x) for x in ids] and flat.tolist() == list(chain.from_iterable(ids))
    assert [len(x) for x in encode_flat(sp, [], True)] == [0, 0]


@pytest.mark.parametrize(
    "options, local",
    [
        ({}, True),  # sentencepiece's BPE defaults: pieces never cross a word
        ({"split_by_whitespace": False}, False),  # pieces may span words
        ({"treat_whitespace_as_suffix": True}, False),  # the boundary mark ends words: not word by word at the start
        ({"user_defined_symbols": ["chat rouge", "<x>"]}, False),  # symbols matched over the whole text
        ({"model_type": "unigram"}, False),
        ({"remove_extra_whitespaces": False}, False),
    ],
)
def test_word_local_only_for_bpe_models_whose_pieces_stay_within_words(options, local):
    import io

    model = io.BytesIO()
    kwargs = dict(model_type="bpe", vocab_size=60, hard_vocab_limit=False, minloglevel=2) | options
    sentences = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(1 + i % 9)) for i in range(300)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, **kwargs)
    assert word_local(model.getvalue()) is local


@pytest.mark.parametrize("joint", [False, True])
def test_a_vocabulary_smaller_than_the_corpus_characters_is_one_line_whose_advice_works(tmp_path, joint):
    """#82 §3: sentencepiece's error at the bottom of data.prepare.spm.vocab_size's range, as one line naming the
    key and what both sides need (the target side here has more characters than the source)."""
    import re

    from nmt.data.tokenizer import train_tokenizer

    src = [" ".join(WORDS[(i * 5 + k) % len(WORDS)] for k in range(3 + i % 6)) for i in range(100)]
    tgt = [line + " xyzw qk" for line in src]
    with pytest.raises(ValueError) as e:
        train_tokenizer(src, tgt, tmp_path, vocab_size=8, joint=joint)
    line = str(e.value)
    need = int(re.search(r"add data.prepare.spm.vocab_size=(\d+) or more", line).group(1))
    assert line.startswith("data.prepare.spm.vocab_size=8: too small for this corpus") and "\n" not in line
    chars = {c for text in (tgt if not joint else src + tgt) for c in text.replace(" ", "▁")} | {"▁"}
    assert need == len(chars) + 4  # the target's characters (each side's most), the 4 special pieces
    assert not list(tmp_path.iterdir())  # nothing kept
    tok = train_tokenizer(src, tgt, tmp_path, vocab_size=need, joint=joint)  # the advice followed
    assert tok.tgt_vocab_size >= need - 1
