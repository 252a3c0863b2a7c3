"""The built-in corpus's generator (``data=toy``): a grammar (:mod:`~nmt.data.toy.grammar`) over a lexicon
(:mod:`~nmt.data.toy.lexicon`, :mod:`~nmt.data.toy.nouns`) with French and English morphology
(:mod:`~nmt.data.toy.morphology`), generating sentence pairs with gold word alignments."""
