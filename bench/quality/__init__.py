"""Model quality: test BLEU/chrF after a wall-clock budget (``quality``), dev BLEU against training minutes
(``curve``), the long runs (``converged``), the toy corpus (``toy_quality``), what a run records of its settings
(``recorded_settings``), which records an experiment no longer composes to and which a reference page may show
(``records``), and the translations a record keeps to be scored again (``hypotheses``). Figures:
docs/results/models.md; the A/B chains: docs/lab/."""
