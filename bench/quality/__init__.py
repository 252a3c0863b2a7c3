"""Model quality: test BLEU/chrF after a wall-clock budget (``quality``), dev BLEU against training minutes
(``curve``), the long runs (``converged``), the toy corpus (``toy_quality``), what a run records of its settings
(``recorded_settings``) and which records an experiment no longer composes to (``records``). Figures:
docs/results/models.md."""
