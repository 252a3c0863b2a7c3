"""The attention of a translation, shown: one type for it (``translation_attention.py``), heatmaps
(``plotting.py``) and the interactive viewer page (``viewer.py``, ``templates/alignments.html``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.models,
nmt.alignment, nmt.arguments, nmt.data, nmt.config_keys, nmt.checkpoint, nmt.ct2_export, nmt.inference.
Start with: translation_attention.py, then viewer.py.
"""
