"""Training, the only place Lightning is imported: a run as ``train.py`` configures it (``run.py``), the
LightningModule (``module.py``), the DataModule (``datamodule.py``), callbacks and the atomic checkpoint writer
(``callbacks.py``), learning-rate schedules (``schedules.py``), precision and the CPU's attention kernel, measured at
start (``precision_auto.py``), ``torch.compile`` of the step (``compiled.py``), its CUDA graphs (``graphs.py``),
distributed runs (``distributed.py``), the console: its log and progress bar (``console.py``), a run's
``results.json`` (``results.py``), its folders (``run_dir.py``) and what ends it: epochs, updates or a time budget
(``stopping.py``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds, nmt.models,
nmt.alignment, nmt.arguments, nmt.data, nmt.config_keys, nmt.checkpoint, nmt.ct2_export, nmt.inference, nmt.views,
nmt.settings, nmt.serving.
Start with: run.py (prepare, fit, test, report), then module.py.
"""
