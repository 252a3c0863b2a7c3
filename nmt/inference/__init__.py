"""Translating with a trained model, whichever engine runs it: the engine protocol and the PyTorch engine
(``engine.py``), the CTranslate2 engine (``ct2.py``), the one loader of what ``--ckpt`` names (``loading.py``), greedy
and beam search (``search.py``), ``Translator`` (``translator.py``), ensembles (``ensemble.py``), checkpoint averaging
(``averaging.py``) and the aligner behind ``align.py`` (``aligner.py``, with ``adaptation.py`` and ``pair_links.py``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.models,
nmt.alignment, nmt.arguments, nmt.data, nmt.config_keys, nmt.checkpoint, nmt.ct2_export.
Start with: loading.py (a checkpoint, an ensemble or an export as a TranslationModel), then translator.py and
search.py.
"""
