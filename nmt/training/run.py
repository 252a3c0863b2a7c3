"""A training run as ``train.py`` configures it: prepare the data, fit, average, test, and say where the results
are. Everything is built from the Hydra configuration by ``_target_``."""

from __future__ import annotations

import errno
import json
import logging
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from nmt.training.run_dir import RESUMABLE, checkpoint_dirs, forgotten_if_refused, latest_saved, refuse_used_run_dir

log = logging.getLogger("train")


def train(cfg: DictConfig) -> float | None:
    import lightning as L
    from hydra.utils import instantiate

    from nmt import checkpoint
    from nmt.errors import interrupted
    from nmt.hardware import bound_onednn_cache, trains_on_cpu
    from nmt.training import distributed, precision_auto
    from nmt.training.callbacks import CtrlC
    from nmt.training.console import ProgressBar, one_console
    from nmt.training.module import TranslationModule
    from nmt.training.stopping import check_epoch_settings, follow_time_budget

    one_console()
    hc = hydra.core.hydra_config.HydraConfig.get()
    out = Path(hc.runtime.output_dir)
    with forgotten_if_refused(out):  # a refused run leaves no run directory that Hydra made for it
        refuse_used_run_dir(out, checkpoint_dirs(cfg), cfg.ckpt_path)  # (FreshRun refuses before Hydra, where it runs)
        check_settings(cfg, hc)  # before any data is prepared
        bound_onednn_cache(cfg.get("onednn_cache"))  # before the first bf16 product on a CPU
        L.seed_everything(cfg.seed, workers=True)
        datamodule = instantiate(cfg.data, links=cfg.loss.align_weight > 0)  # links: guided alignment
        refuse_unread_split(datamodule.source, hc.overrides.task, hc.runtime.choices.get("data"))
        saved = checkpoint.read(cfg.ckpt_path) if cfg.ckpt_path else None  # a missing or bad file: before preparing
        if saved is not None:  # a training state of these model settings, not behind what this run would write over
            own = checkpoint.tokenizer(saved["nmt"]["tokenizer"], cfg.ckpt_path)  # its vocabularies: no data needed
            resumable(TranslationModule.from_config(cfg, own), saved, cfg)
            refuse_going_back(Path(cfg.ckpt_path), saved, checkpoint_dirs(cfg))
    try:
        with forgotten_if_refused(out):  # a corpus refused as it is read (a bad line): no run directory either
            datamodule.prepare_data()  # under a lock: safe when every DDP rank runs this
    except KeyboardInterrupt:  # the workers are stopped and nothing half-written is kept
        interrupted("during data preparation; nothing half-done was kept: run the same command again")
    with forgotten_if_refused(out):  # what the prepared data decides: a pair longer than its split's budget
        datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    if saved is not None:  # the prepared data's vocabularies too: one line here, not inside Lightning
        with forgotten_if_refused(out):
            resumable(module, saved, cfg)
    precision_auto.resolve(cfg.trainer, module, datamodule)  # trainer.precision=auto: measured here
    if trains_on_cpu(cfg.trainer.get("accelerator", "auto")):  # the CPU's faster attention kernel, measured here
        if chosen := precision_auto.cpu_attention(module, datamodule, str(cfg.trainer.precision)):
            log.info("%s", chosen)
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c] + [CtrlC()]
    callbacks += [ProgressBar()] if cfg.trainer.get("enable_progress_bar", True) else []  # loss, lr, tokens/s only
    follow_time_budget(cfg.trainer, hc.overrides.task)  # a time budget trains for its time, epochs unbounded
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=instantiate(cfg.logger))
    with forgotten_if_refused(out):  # what the prepared data decides, before anything is trained or saved
        check_epoch_settings(cfg.trainer, datamodule.batches_per_epoch(trainer.world_size))
    n_params = sum(p.numel() for p in module.parameters())
    if trainer.is_global_zero:
        log.info("%s model, %s parameters, run directory %s", cfg.model.name, f"{n_params:,}", out)
    with module.kernels.applied():  # from before Lightning sets the device up: it reads the float32 precision there
        fit(trainer, module, datamodule, cfg, out)
        results = conclude(trainer, module, datamodule, cfg, out)
    distributed.leave()
    return results.valid.get("bleu")  # what a Hydra sweep optimises


def resumable(module, saved: dict, cfg: DictConfig) -> None:
    """A CheckpointError, in one line that says what to do, unless training can go on from ``saved`` (the file of
    ``cfg.ckpt_path``) with ``module``: a training state (not weights alone), of these model settings and data."""
    from nmt import checkpoint

    if not checkpoint.is_training_state(saved):
        raise checkpoint.CheckpointError(
            f"ckpt_path={cfg.ckpt_path}: holds weights without the optimiser's and the loops' state (an averaged or "
            "exported checkpoint), so training cannot go on from it; resume from its run's last.ckpt or "
            "on_exception.ckpt"
        )
    try:
        module.check_resumable(saved, cfg.ckpt_path)
    except checkpoint.CheckpointError as e:
        raise checkpoint.CheckpointError(with_model_advice(str(e), saved, cfg, cfg.ckpt_path)) from None


def refuse_going_back(ckpt: Path, saved: dict, dirs: dict[str, Path]) -> None:
    """A ValueError where the folders this run writes checkpoints to (``dirs``) hold a later state than ``ckpt`` (its
    contents ``saved``): resuming would write an earlier state over it. The line names the later file to resume
    from, and how to branch from ``ckpt`` instead."""
    from nmt import checkpoint

    ckpt, step = ckpt.expanduser().resolve(), saved.get("global_step", 0)
    latest = [p for d in dirs.values() if d.is_dir() for p in d.glob("*.ckpt")
              if p.resolve() != ckpt and p.stem.split("-v")[0] in RESUMABLE]  # fmt: skip
    later = [(s, p) for p in latest if (s := checkpoint.step_of(p)) is not None and s > step]
    if later:
        s, p = max(later)
        raise ValueError(
            f"ckpt_path={ckpt}: step {step}, behind {p} (step {s}) in the folder this run writes its checkpoints to, "
            f"which resuming would replace; resume from {shlex.quote(f'ckpt_path={p}')}, or branch from step {step} "
            "into another "
            "hydra.run.dir"
        )  # fmt: skip


def fit(trainer, module, datamodule, cfg: DictConfig, out: Path) -> None:
    """``trainer.fit``; Ctrl-C, a loss or weights that are not finite, and a node that stops end in one line that
    says how to resume."""
    from nmt.errors import interrupted
    from nmt.training import distributed

    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    except SystemExit:  # Lightning's answer to Ctrl-C, after the on-exception checkpoint is written
        if trainer.interrupted and trainer.is_global_zero:
            saved = out / "checkpoints" / "on_exception.ckpt"  # none before the first update, or on a full disk
            if (saved := saved if saved.is_file() else latest_saved(cfg)) is None:
                interrupted("before the first update, nothing to resume: run the same command again")
            interrupted(f"resume with  {resume_command(saved, out)}")
        raise
    except FloatingPointError as e:  # no checkpoint was written from such weights (the module refuses): any will do
        raise FloatingPointError(f"{e}: stopping; {diverged(cfg, out)}") from None
    except OSError as e:  # a full disk, a folder gone read-only: what was saved whole before still resumes
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or (latest := latest_saved(cfg)) is None:
            raise
        error = OSError(f"{e}; once it can be written, resume with  {resume_command(latest, out)}")
        error.errno = e.errno
        raise error from None
    except Exception as e:  # a node that stopped: the run cannot go on without it
        if trainer.world_size > 1 and (lost := distributed.lost_node(e, out, trainer.is_global_zero)):
            raise lost from None
        raise


def conclude(trainer, module, datamodule, cfg: DictConfig, out: Path):
    """After fitting: the last checkpoint saved, the best averaged where asked, the test split scored, and the
    run's results written into its directory and its log (:class:`~nmt.training.results.RunResults`)."""
    from nmt.inference.averaging import average_best
    from nmt.training.results import RunResults
    from nmt.training.stopping import stop_reason

    if trainer.is_global_zero:
        log.info("stopped:         %s", stop_reason(trainer))
    ckpt_cb = trainer.checkpoint_callback
    valid = RunResults.scores(trainer.callback_metrics, "val")  # the last validation's; a resume past max_steps,
    valid = valid or RunResults.scores(getattr(ckpt_cb, "scores", {}), "val")  # which validates nothing: its state's
    results = RunResults(str(out), cfg.model.name, trainer.global_step, valid)
    if ckpt_cb is not None and ckpt_cb.dirpath and ckpt_cb.save_last:  # a stop (max_steps, max_time) may come
        # between validations
        trainer.save_checkpoint(last := Path(ckpt_cb.dirpath) / "last.ckpt")
        results.last_checkpoint = str(last)
    best = ckpt_cb.best_model_path if ckpt_cb is not None and Path(ckpt_cb.best_model_path).is_file() else ""
    if best:
        results.monitor, results.best_checkpoint = ckpt_cb.monitor, best
        results.best_score = None if ckpt_cb.best_model_score is None else round(float(ckpt_cb.best_model_score), 4)
    if cfg.average_best and ckpt_cb is not None and trainer.is_global_zero:  # the test split then scores the average
        best = str(average_best(ckpt_cb, cfg.average_best) or best)
    best = trainer.strategy.broadcast(best)
    if cfg.run_test:
        tested = trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)  # no table:
        tested = (tested or [{}])[0]  # the summary names the scores; []: no batch
        results.test, results.tested_checkpoint = RunResults.scores(tested, "test"), best or "the last weights"
    if trainer.is_global_zero:
        results.alignment = module.alignment_record
        announce(out, best, results.last_checkpoint, f"{results.brief()}; all in {results.write(out)}")
    return results


def announce(out: Path, best: str, last: str | None, scores: str) -> None:
    """The run's scores, where its results are, and the commands that use them (named as the program was started):
    a log line each, so that each keeps the log's prefix."""
    from nmt.commands import command

    for line in summary(out, best, last, command("translate"), scores):
        log.info("%s", line)


def summary(out: Path, best: str, last: str | None, translate: str, scores: str) -> list[str]:
    """The end-of-run summary's lines: the scores (``scores``, in brief), the run directory, the best checkpoint,
    TensorBoard, the alignment viewer and the command that translates with the best checkpoint, else the ``last``
    (``translate``: how to run the translation command; none where neither was saved)."""
    ckpt = best or last
    return [
        f"scores:          {scores}",
        f"run directory:   {out}",
        f"best checkpoint: {best or '(none saved)'}",
        f"TensorBoard:     tensorboard --logdir {out / 'tb'}",
        f"alignments:      {out / 'alignments.html'}",
        *([f"translate:       {translate} --ckpt {ckpt} < input.fr"] if ckpt else []),
    ]


def resume_command(ckpt: Path, out: Path, *changes: str) -> str:
    """The command that resumes this run from ``ckpt`` in its own directory ``out``: its own overrides, with
    ``changes`` (``key=value``) in place of the same keys', the run directory and the checkpoint."""
    from nmt.commands import command

    task = hydra.core.hydra_config.HydraConfig.get().overrides.task
    replaced = {c.split("=", 1)[0] for c in changes} | {"ckpt_path"}
    kept = [o for o in task if o.lstrip("+~").split("=", 1)[0] not in replaced]
    return shlex.join([*command("train").split(), *kept, *changes, f"hydra.run.dir={out}", f"ckpt_path={ckpt}"])


def diverged(cfg: DictConfig, out: Path) -> str:
    """What to do after the loss or the weights went non-finite: go on from the run's latest checkpoint (every one
    saved is finite) in full float32 (with clipping where it already was), or start again gentler."""
    full = str(cfg.trainer.get("precision")) in ("32", "32-true", "64", "64-true")
    clip = cfg.trainer.get("gradient_clip_val")
    clipped = f"trainer.gradient_clip_val={clip / 4 if clip else 1.0:g}"  # tighter than the run's, or some at all
    remedies = ["a lower optim.lr", clipped, *([] if full else ["trainer.precision=32-true"])]
    again = f"start again with {', '.join(remedies[:-1])} or {remedies[-1]}"
    if (latest := latest_saved(cfg)) is None:
        return f"no checkpoint was saved before it; {again}"
    change = clipped if full else "trainer.precision=32-true"
    return f"go on from the latest checkpoint with {change}: {resume_command(latest, out, change)}; or {again}"


@contextmanager
def check_settings(cfg: DictConfig, hc: Any) -> None:
    """Every key read by something and every value in its range, the trainer, the CUDA graphs' and the model's
    rules: before any data is prepared (``hc``: Hydra's record of the command)."""
    from nmt.config_keys import check_keys
    from nmt.hardware import check_trainer
    from nmt.settings import check_config
    from nmt.training.graphs import check_graphs

    check_keys(cfg, hc.overrides.task, hc.runtime.choices, lambda: reference_config(hc))
    check_config(cfg)
    check_trainer(cfg.trainer)
    check_graphs(cfg)
    check_model(cfg)


def check_model(cfg: DictConfig) -> None:
    """The model's and the loss's rules between settings (heads that divide the width, a tied readout of the
    embeddings' size, a guided layer and head the model has), found by building the module on torch's meta device
    (shapes only, no memory) with the configured vocabulary size: before any data is prepared."""
    from types import SimpleNamespace

    import torch
    from omegaconf import OmegaConf

    from nmt.training.module import TranslationModule

    size = OmegaConf.select(cfg, "data.prepare.spm.vocab_size", default=None) or 64
    with torch.device("meta"):
        TranslationModule.from_config(cfg, SimpleNamespace(src_vocab_size=size, tgt_vocab_size=size))


def reference_config(hc: Any) -> DictConfig:
    """The config without the command's ``++key=value`` overrides: whether each of them adds a key."""
    task = [o for o in hc.overrides.task if not o.startswith("++")]
    return hydra.compose(config_name=hc.job.config_name, overrides=task)


def refuse_unread_split(source: Any, overrides: list[str], data: str | None) -> None:
    """A ValueError where ``data.prepare.split`` is set but unread: the corpus has its own validation and test pairs."""
    if source.held_out is None:
        return
    for o in overrides:
        key = o.lstrip("+~").split("=", 1)[0]
        if key == "data.prepare.split" or key.startswith("data.prepare.split."):
            raise ValueError(
                f"{o.lstrip('+~')}: not used, since the validation and test pairs of data={data} come from "
                f"{source.held_out}, not from a share of the training pairs; leave {key} out"
            )


def with_model_advice(message: str, saved: dict, cfg: DictConfig, ckpt_path: str | None = None) -> str:
    """``message`` (a checkpoint that does not fit the model or the data settings) with the settings to resume with,
    where it ends in the general advice: the model's from the checkpoint, the data's from its run's record."""
    from nmt.training.module import RESUME_DATA_HINT, RESUME_MODEL_HINT

    model, data = f": {RESUME_MODEL_HINT}", f": {RESUME_DATA_HINT}"
    trained = saved.get("hyper_parameters", {}).get("model")
    if message.endswith(model) and isinstance(trained, dict) and (advice := model_overrides(trained, cfg)):
        return message[: -len(model)] + f": it was trained with {' '.join(advice)}; add that to resume"
    if message.endswith(data) and ckpt_path and (advice := data_overrides(Path(ckpt_path))):
        return message[: -len(data)] + f": {advice}"
    return message


def data_overrides(ckpt: Path) -> str | None:
    """What to change for the data settings of the run that wrote ``ckpt``, from its ``.hydra/overrides.yaml``: its
    ``data`` overrides, and this command's that it did not have."""
    import yaml

    record = ckpt.resolve().parent.parent / ".hydra" / "overrides.yaml"
    try:
        theirs = yaml.safe_load(record.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(theirs, list):
        return None
    is_data = lambda o: str(o).lstrip("+~").startswith(("data.", "data="))  # noqa: E731
    key = lambda o: str(o).lstrip("+~").split("=", 1)[0]  # noqa: E731
    kept = [str(o) for o in theirs if is_data(o)]
    ours = [o for o in hydra.core.hydra_config.HydraConfig.get().overrides.task if is_data(o)]
    dropped = [o for o in ours if key(o) not in {key(k) for k in kept} and o not in kept]
    advice = f"it was trained with {shlex.join(kept) or 'the default data settings'} ({record})"
    return advice + (f"; resume with those, leaving out {shlex.join(dropped)}" if dropped else "; add that to resume")


def model_overrides(trained: dict, cfg: DictConfig) -> list[str]:
    """The overrides that give ``cfg`` the model settings ``trained`` (``model=<name>`` first where it differs)."""
    from omegaconf import OmegaConf

    now = OmegaConf.to_container(cfg.model, resolve=True)
    name = trained.get("name")
    first = []
    if name and name != now.get("name"):
        hc = hydra.core.hydra_config.HydraConfig.get()
        task = [o for o in hc.overrides.task if not o.lstrip("+~").startswith(("model.", "model="))]
        now = OmegaConf.to_container(hydra.compose(hc.job.config_name, [*task, f"model={name}"]).model, resolve=True)
        first = [f"model={name}"]
    here = dict(_leaves(now))
    changed = [(k, v) for k, v in _leaves(trained) if k not in here or here[k] != v]
    return first + [f"{'' if k in here else '+'}model.{k}={_value(v)}" for k, v in changed]


def _leaves(tree: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def _value(v: Any) -> str:
    """``v`` as a Hydra override writes it."""
    return json.dumps(v, separators=(",", ":")) if isinstance(v, (bool, list)) or v is None else str(v)
