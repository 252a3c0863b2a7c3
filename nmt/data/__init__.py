"""Corpora, from their source to batches: where pairs come from (``sources.py``), their streaming preparation and
the prepared corpus (``prepare.py``, with ``readers.py``, ``sample.py``, ``parallel.py``, ``fields.py``, ``rules.py``
and ``atomic.py``, which writes every file whole), sentencepiece (``tokenizer.py``), memory-mapped corpora
(``encoded.py``), token-budget batching (``batching.py``) into a ``Batch`` (``collate.py``), padded to a bounded set of
shapes where asked (``shapes.py``), rows of several pairs (``joining.py``), the word links of guided training
(``training_links.py``), the training targets a held-out split's references are checked against (``targets.py``),
the download (``download.py``) and the built-in corpus's generator (``toy/``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.alignment,
nmt.arguments.
Start with: sources.py, then prepare.py (what a run prepares, once) batching.py and collate.py (what a step receives).
"""
