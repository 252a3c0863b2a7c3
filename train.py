"""Train a French→English attention NMT model.

python train.py                                  # Bahdanau model on the built-in corpus
python train.py model=luong                      # the scaled-dot / look-ahead variant
python train.py experiment=tatoeba_bahdanau      # the reference setting on real data
python train.py ckpt_path=runs/.../checkpoints/last.ckpt   # resume
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import hydra
from omegaconf import DictConfig

log = logging.getLogger("train")


def one_console() -> None:
    """Each log line once, on the console and in the run's log file: Lightning's loggers print through Hydra's
    handlers (the root logger's) where Hydra set them up, not through their own console handler as well; and
    none of Lightning's warnings that are false here."""
    import lightning  # noqa: F401 - sets up its "lightning" logger and its console handler

    if logging.getLogger().handlers:  # Hydra's job logging (hydra/job_logging=none leaves Lightning's own)
        logging.getLogger("lightning").handlers.clear()
    false_alarms = [
        # the data module restores the position within the epoch itself (its state_dict), which Lightning cannot see
        "You're resuming from a checkpoint that ended before the epoch ended",
        # a fresh fit with OnExceptionCheckpoint among the callbacks: Lightning looks for a "last" one to resume
        r"`\.fit\(ckpt_path=None\)` was called without a model",
        r'\.fit\(ckpt_path="last"\) is set, but there is no last checkpoint',
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # inside Lightning, with this torch
    ]
    for message in false_alarms:
        warnings.filterwarnings("ignore", message=message)
    # an advertisement, not a log line
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(lambda r: "Tip:" not in str(r.msg))


def run(cfg: DictConfig) -> float | None:
    import lightning as L
    from hydra.utils import instantiate

    from nmt import checkpoint
    from nmt.averaging import average_best
    from nmt.errors import interrupted, lost_peer
    from nmt.hardware import check_trainer
    from nmt.module import TranslationModule
    from nmt.settings import check_config

    one_console()
    check_config(cfg)
    check_trainer(cfg.trainer)  # before any data is prepared
    L.seed_everything(cfg.seed, workers=True)
    out = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    datamodule = instantiate(cfg.data, links=cfg.loss.align_weight > 0)  # guided alignment reads word links
    try:
        datamodule.prepare_data()  # under a lock: safe when every DDP rank runs this
    except KeyboardInterrupt:  # the workers are stopped and nothing half-written is kept
        interrupted("during data preparation; nothing half-done was kept: run the same command again")
    datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    if cfg.ckpt_path:  # a bad or unfitting file fails here with one line, not inside Lightning
        module.check_resumable(checkpoint.read(cfg.ckpt_path), cfg.ckpt_path)
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c]
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=instantiate(cfg.logger))
    n_params = sum(p.numel() for p in module.parameters())
    if trainer.is_global_zero:
        log.info("%s model, %s parameters, run directory %s", cfg.model.name, f"{n_params:,}", out)
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    except SystemExit:  # Lightning's answer to Ctrl-C, after the on-exception checkpoint is written
        if trainer.interrupted and trainer.is_global_zero:
            interrupted(f"resume with  {resume_command(out / 'checkpoints' / 'on_exception.ckpt')}")
        raise
    except Exception as e:
        if trainer.world_size > 1 and (said := lost_peer(e)):  # the run cannot go on without it
            where = out / "checkpoints" / "last.ckpt" if trainer.is_global_zero else "checkpoints/last.ckpt"
            raise ConnectionError(
                f"another node of the run stopped or cannot be reached ({said}); the checkpoints are intact: launch "
                f"every node again as before, adding ckpt_path={where} (global rank 0's run directory; copy it "
                "where the other nodes can read it)"
            ) from None
        raise
    ckpt_cb = trainer.checkpoint_callback
    if ckpt_cb is not None and ckpt_cb.dirpath:  # training may stop (max_steps, max_time) between validations
        trainer.save_checkpoint(Path(ckpt_cb.dirpath) / "last.ckpt")
    best = ckpt_cb.best_model_path if ckpt_cb is not None else ""
    if cfg.average_best and ckpt_cb is not None and trainer.is_global_zero:  # the test split then scores the average
        best = str(average_best(ckpt_cb, cfg.average_best))
    best = trainer.strategy.broadcast(best)
    if cfg.run_test:
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None)
    if trainer.is_global_zero:
        log.info("run directory:   %s\nbest checkpoint: %s", out, best or "(none saved)")
        log.info("TensorBoard:     tensorboard --logdir %s\nalignments:      %s", out / "tb", out / "alignments.html")
        log.info("translate:       python translate.py --ckpt %s < input.fr", best or out / "checkpoints" / "last.ckpt")
    score = trainer.callback_metrics.get("val/bleu")
    end_distributed()
    return float(score) if score is not None else None


def end_distributed() -> None:
    """Leave the process group together: a rank that exits while gloo's threads still talk to the others can be
    aborted on the way out ("terminate called without an active exception")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def resume_command(ckpt: Path) -> str:
    """The command that resumes this run from ``ckpt``: its own overrides (not its ckpt_path) and the checkpoint."""
    import shlex

    task = hydra.core.hydra_config.HydraConfig.get().overrides.task
    kept = [o for o in task if not o.lstrip("+~").startswith("ckpt_path=")]
    return shlex.join(["python", "train.py", *kept, f"ckpt_path={ckpt}"])


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from nmt.errors import one_line_errors

    with one_line_errors():
        return run(cfg)


if __name__ == "__main__":
    main()
