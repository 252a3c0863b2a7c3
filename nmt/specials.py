"""Special token ids, the same in every vocabulary this project trains (sentencepiece is told them)."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
WORD_START = "\u2581"  # sentencepiece's word-boundary mark: a piece that starts a whitespace word
