"""Special token ids, the same in every vocabulary this project trains (sentencepiece is told them); the languages."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
WORD_START = "\u2581"  # sentencepiece's word-boundary mark: a piece that starts a whitespace word
LANGUAGES = ("fr", "en")  # (source, target) of a model trained as the corpus gives its pairs (French, English)
