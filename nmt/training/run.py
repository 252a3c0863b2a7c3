"""A training run as ``train.py`` configures it: prepare the data, fit, average, test, and say where the results
are. Everything is built from the Hydra configuration by ``_target_``."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import hydra
from omegaconf import DictConfig

log = logging.getLogger("train")


def train(cfg: DictConfig) -> float | None:
    import lightning as L
    from hydra.utils import instantiate

    from nmt import checkpoint
    from nmt.errors import interrupted
    from nmt.hardware import bound_onednn_cache, check_trainer
    from nmt.settings import check_config
    from nmt.training import distributed
    from nmt.training.callbacks import CtrlC
    from nmt.training.compiled import Compilation
    from nmt.training.console import one_console
    from nmt.training.module import TranslationModule

    one_console()
    check_config(cfg)
    check_trainer(cfg.trainer)  # before any data is prepared
    bound_onednn_cache(cfg.get("onednn_cache"))  # before the first bf16 product on a CPU
    L.seed_everything(cfg.seed, workers=True)
    out = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    padding = Compilation(**cfg.compile).padding  # a compiled step sees lengths rounded up: fewer shapes
    datamodule = instantiate(cfg.data, links=cfg.loss.align_weight > 0, pad_multiple=padding)  # links: guided
    try:
        datamodule.prepare_data()  # under a lock: safe when every DDP rank runs this
    except KeyboardInterrupt:  # the workers are stopped and nothing half-written is kept
        interrupted("during data preparation; nothing half-done was kept: run the same command again")
    datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    if cfg.ckpt_path:  # a bad or unfitting file fails here with one line, not inside Lightning
        module.check_resumable(checkpoint.read(cfg.ckpt_path), cfg.ckpt_path)
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c] + [CtrlC()]
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=instantiate(cfg.logger))
    n_params = sum(p.numel() for p in module.parameters())
    if trainer.is_global_zero:
        log.info("%s model, %s parameters, run directory %s", cfg.model.name, f"{n_params:,}", out)
    fit(trainer, module, datamodule, cfg.ckpt_path, out)
    results = conclude(trainer, module, datamodule, cfg, out)
    distributed.leave()
    return results.valid.get("bleu")  # what a Hydra sweep optimises


def fit(trainer, module, datamodule, ckpt_path: str | None, out: Path) -> None:
    """``trainer.fit``; Ctrl-C and a node that stops end in one line that says how to resume."""
    from nmt.errors import interrupted
    from nmt.training import distributed

    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    except SystemExit:  # Lightning's answer to Ctrl-C, after the on-exception checkpoint is written
        if trainer.interrupted and trainer.is_global_zero:
            interrupted(f"resume with  {resume_command(out / 'checkpoints' / 'on_exception.ckpt')}")
        raise
    except Exception as e:  # a node that stopped: the run cannot go on without it
        if trainer.world_size > 1 and (lost := distributed.lost_node(e, out, trainer.is_global_zero)):
            raise lost from None
        raise


def conclude(trainer, module, datamodule, cfg: DictConfig, out: Path):
    """After fitting: the last checkpoint saved, the best averaged where asked, the test split scored, and the
    run's results written into its directory and its log (:class:`~nmt.training.results.RunResults`)."""
    from nmt.inference.averaging import average_best
    from nmt.training.results import RunResults

    valid = RunResults.scores(trainer.callback_metrics, "val")  # the last validation's
    results = RunResults(str(out), cfg.model.name, trainer.global_step, valid)
    ckpt_cb = trainer.checkpoint_callback
    if ckpt_cb is not None and ckpt_cb.dirpath:  # training may stop (max_steps, max_time) between validations
        trainer.save_checkpoint(last := Path(ckpt_cb.dirpath) / "last.ckpt")
        results.last_checkpoint = str(last)
    best = ckpt_cb.best_model_path if ckpt_cb is not None and Path(ckpt_cb.best_model_path).is_file() else ""
    if best:
        results.monitor, results.best_checkpoint = ckpt_cb.monitor, best
        results.best_score = None if ckpt_cb.best_model_score is None else round(float(ckpt_cb.best_model_score), 4)
    if cfg.average_best and ckpt_cb is not None and trainer.is_global_zero:  # the test split then scores the average
        best = str(average_best(ckpt_cb, cfg.average_best))
    best = trainer.strategy.broadcast(best)
    if cfg.run_test:
        tested = (trainer.test(module, datamodule=datamodule, ckpt_path=best or None) or [{}])[0]  # []: no batch
        results.test, results.tested_checkpoint = RunResults.scores(tested, "test"), best or "the last weights"
    if trainer.is_global_zero:
        results.alignment = module.alignment_record
        log.info("results (%s): %s", results.write(out), json.dumps(asdict(results)))
        announce(out, best)
    return results


def announce(out: Path, best: str) -> None:
    """Where the run's results are, and the commands that use them."""
    log.info("run directory:   %s\nbest checkpoint: %s", out, best or "(none saved)")
    log.info("TensorBoard:     tensorboard --logdir %s\nalignments:      %s", out / "tb", out / "alignments.html")
    log.info("translate:       python translate.py --ckpt %s < input.fr", best or out / "checkpoints" / "last.ckpt")


def resume_command(ckpt: Path) -> str:
    """The command that resumes this run from ``ckpt``: its own overrides (not its ckpt_path) and the checkpoint."""
    import shlex

    task = hydra.core.hydra_config.HydraConfig.get().overrides.task
    kept = [o for o in task if not o.lstrip("+~").startswith("ckpt_path=")]
    return shlex.join(["python", "train.py", *kept, f"ckpt_path={ckpt}"])
