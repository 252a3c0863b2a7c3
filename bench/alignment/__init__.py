"""Word alignment: every attention choice's AER beside eflomal (``alignment``, with ``alignment_reading``), over
eflomal's draws (``alignment_draws``, ``eflomal_draws``), every path to links in one run (``aligner_paths``), the
orthography (``alignment_orthography``) and what guided training costs in BLEU (``guided_bleu``). Figures:
docs/alignment.md and docs/results/alignment.md."""
