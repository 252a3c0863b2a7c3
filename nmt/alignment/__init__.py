"""Word alignment arithmetic, free of models and data: which attention map alignments read (``choice.py``), an
attention map turned into word links (``words.py``), Pharaoh links (``links.py``), symmetrisation of two directions
(``symmetrisation.py``), gold links (``gold.py``) and the alignment error rate (``aer.py``), the one tokenisation a
statistical aligner reads (``tokenisation.py``) and eflomal, run as a program (``eflomal.py``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds.
Start with: choice.py (AttentionChoice: layer, head, readout, links), then words.py and aer.py.
"""
