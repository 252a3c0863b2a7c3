"""The commands: each one's ``main()`` (``train``, ``translate``, ``align``, ``serve``, ``export``, ``average``;
the top-level scripts and the ``nmt-*`` commands call them), the options they share with their ranges
(``options.py``) and the attention files and viewer page written beside an output (``view_files.py``). Each command's
``NEEDS`` table says what each of its options needs.

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.models,
nmt.alignment, nmt.arguments, nmt.data, nmt.config_keys, nmt.checkpoint, nmt.ct2_export, nmt.inference, nmt.views,
nmt.settings, nmt.serving, nmt.training.
Start with: translate.py (one command, from its options to its output), then options.py.
"""
