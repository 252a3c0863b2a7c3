"""#65: every checkpoint is one a resume can use, and a resume continues its run: no checkpoint is written from
weights that are not finite and the advice names one that is; a resume goes on in its own folder, never moves its
latest state backwards, checks its checkpoint before any preparation, and only adds to ``results.json``."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import ROOT, TINY_DATA, run_train, tiny_model_overrides
from nmt import checkpoint
from nmt.training.results import RunResults


def compose(*overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def last_line(proc) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


def step(path: Path) -> int:
    return torch.load(path, weights_only=True)["global_step"]


def as_run(monkeypatch, task: list[str]) -> None:
    """What ``resume_command`` reads of a run: its command-line overrides, and how the command was started."""
    import hydra

    hc = SimpleNamespace(overrides=SimpleNamespace(task=task))
    monkeypatch.setattr(hydra.core.hydra_config.HydraConfig, "get", staticmethod(lambda: hc))
    monkeypatch.setattr(sys, "argv", ["train.py"])


# --- no checkpoint from weights that are not finite ------------------------------------------------------------------


def test_no_checkpoint_is_written_from_weights_that_are_not_finite(tmp_path):
    """Weights poisoned at update 5 of a real fit whose last.ckpt is written every update: the save at update 5 is
    refused, the run stops, last.ckpt keeps update 4's finite state and no on_exception.ckpt is left."""
    import lightning as L
    from hydra.utils import instantiate

    from nmt.training.callbacks import InterruptCheckpoint, RunCheckpoint
    from nmt.training.module import TranslationModule

    overrides = ["model=transformer", *tiny_model_overrides("model=transformer"), *TINY_DATA]
    cfg = compose(*overrides, f"data.cache_dir={tmp_path / 'cache'}", "data.num_workers=0")
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer)

    class Poison(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, *_):
            if trainer.global_step == 5:
                next(pl_module.parameters()).data.fill_(float("nan"))

    folder = tmp_path / "checkpoints"
    callbacks = [Poison(), RunCheckpoint(dirpath=folder, save_top_k=0, save_last=True, last_every_n_train_steps=1),
                 InterruptCheckpoint(dirpath=folder)]  # fmt: skip
    trainer = L.Trainer(
        max_steps=20, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, callbacks=callbacks,
    )  # fmt: skip
    with pytest.raises(FloatingPointError, match=r"^the weights are not finite at step 5 \("):
        trainer.fit(module, datamodule=dm)
    assert sorted(p.name for p in folder.iterdir()) == ["last.ckpt"]  # no on_exception.ckpt
    saved = torch.load(folder / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 4 and checkpoint.non_finite(saved["state_dict"]) is None


def test_the_advice_after_divergence_names_the_latest_checkpoint_and_a_change_that_applies(tmp_path, monkeypatch):
    from nmt.training.run import diverged

    run = tmp_path / "run"
    folder = run / "checkpoints"
    folder.mkdir(parents=True)
    cfg = compose("trainer.precision=bf16-mixed", f"callbacks.checkpoint.dirpath={folder}",
                  f"callbacks.interrupted.dirpath={folder}", "callbacks.heatmaps=null")  # fmt: skip
    as_run(monkeypatch, ["model=luong", "trainer.precision=bf16-mixed"])
    assert diverged(cfg, run).startswith("no checkpoint was saved before it; start again with a lower optim.lr")
    for name, at in (("best-8.ckpt", 8), ("last.ckpt", 12), ("averaged.ckpt", 40)):
        torch.save({"global_step": at}, folder / name)
    advice = diverged(cfg, run)
    command = advice.split(": ", 1)[1].split("; or ")[0]
    assert shlex.split(command) == ["python", "train.py", "model=luong", "trainer.precision=32-true",
                                    f"hydra.run.dir={run}", f"ckpt_path={folder / 'last.ckpt'}"], advice  # fmt: skip
    cfg.trainer.precision = "32-true"  # already full float32: tighter clipping is what changes
    assert "trainer.gradient_clip_val=0.25 hydra.run.dir=" in diverged(cfg, run)  # a quarter of the default 1.0


def test_a_disk_that_fills_during_a_save_names_its_folder_leaves_no_part_and_keeps_the_last_whole_state(tmp_path):
    """#82 §5: the disk fills while update 5's last.ckpt is written (half of it on disk): the run's error names the
    folder, no ``.part`` stays, the on-exception save that fails alike is not the error said, update 4's state
    stays whole."""
    import errno

    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.plugins.io import TorchCheckpointIO

    from nmt.training.callbacks import AtomicCheckpointIO, InterruptCheckpoint, RunCheckpoint
    from nmt.training.module import TranslationModule

    cfg = compose(f"data.cache_dir={tmp_path / 'cache'}", "data.num_workers=0", *TINY_DATA, *tiny_model_overrides())
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer)
    real = TorchCheckpointIO.save_checkpoint

    def filling(io, checkpoint, path, storage_options=None):
        if checkpoint["global_step"] < 5:
            return real(io, checkpoint, path, storage_options)
        Path(path).write_bytes(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    folder = tmp_path / "checkpoints"
    callbacks = [RunCheckpoint(dirpath=folder, save_top_k=0, save_last=True, last_every_n_train_steps=1),
                 InterruptCheckpoint(dirpath=folder)]  # fmt: skip
    trainer = L.Trainer(
        max_steps=20, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, callbacks=callbacks, plugins=[AtomicCheckpointIO()],
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TorchCheckpointIO, "save_checkpoint", filling)
        with pytest.raises(OSError) as e:
            trainer.fit(module, datamodule=dm)
    assert str(e.value) == f"cannot write in {folder}: No space left on device"
    assert sorted(p.name for p in folder.iterdir()) == ["last.ckpt"]  # no .part, no on_exception.ckpt
    assert step(folder / "last.ckpt") == 4


def test_the_advice_after_a_full_disk_resumes_from_the_latest_whole_state(tmp_path, monkeypatch):
    import errno

    from nmt.data.atomic import folder_error
    from nmt.training import run as training_run

    run = tmp_path / "run"
    folder = run / "checkpoints"
    folder.mkdir(parents=True)
    cfg = compose(f"callbacks.checkpoint.dirpath={folder}", f"callbacks.interrupted.dirpath={folder}")
    as_run(monkeypatch, ["model=luong"])
    for name, at in (("best-8.ckpt", 8), ("last.ckpt", 12)):
        torch.save({"global_step": at}, folder / name)

    def fit(*_, **__):  # what the checkpoint writer raises (nmt.training.callbacks.AtomicCheckpointIO)
        raise folder_error(OSError(errno.ENOSPC, "No space left on device"), folder)

    trainer = SimpleNamespace(fit=fit, world_size=1, interrupted=False, is_global_zero=True)
    with pytest.raises(OSError) as e:
        training_run.fit(trainer, None, None, cfg, run)
    line = str(e.value)
    assert line.startswith(f"cannot write in {folder}: No space left on device; once it can be written, resume with ")
    resume = shlex.split(line.split("resume with  ", 1)[1])
    assert resume == ["python", "train.py", "model=luong", f"hydra.run.dir={run}", f"ckpt_path={folder / 'last.ckpt'}"]
    with pytest.raises(OSError, match="Permission denied$"):  # not a file system that filled or froze: as it was
        trainer.fit = lambda *_, **__: (_ for _ in ()).throw(OSError(errno.EACCES, "Permission denied"))
        training_run.fit(trainer, None, None, cfg, run)


def test_nothing_but_a_training_state_of_these_model_settings_is_resumed(tmp_path):
    from nmt.training.run import resumable

    saved = {"optimizer_states": [{"state": {}}], "loops": {"fit_loop": {}}}
    assert checkpoint.is_training_state(saved)
    for weights_only in ({**saved, "optimizer_states": []}, {"loops": {}}, {}):
        assert not checkpoint.is_training_state(weights_only)
        with pytest.raises(checkpoint.CheckpointError, match=r"^ckpt_path=a\.ckpt: holds weights without the optim"):
            resumable(None, weights_only, SimpleNamespace(ckpt_path="a.ckpt"))


def test_a_resume_that_would_move_the_folders_latest_state_backwards_is_refused(tmp_path):
    from nmt.training.run import refuse_going_back

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name, at in (("best-4.ckpt", 4), ("last.ckpt", 12), ("on_exception.ckpt", 14), ("best-20.ckpt", 20)):
        torch.save({"global_step": at}, folder / name)
    dirs = {"callbacks.checkpoint.dirpath": folder}
    with pytest.raises(ValueError) as refused:
        refuse_going_back(folder / "best-4.ckpt", {"global_step": 4}, dirs)
    assert str(refused.value) == (
        f"ckpt_path={folder / 'best-4.ckpt'}: step 4, behind {folder / 'on_exception.ckpt'} (step 14) in the folder "
        f"this run writes its checkpoints to, which resuming would replace; resume from "
        f"ckpt_path={folder / 'on_exception.ckpt'}, or branch from step 4 into another hydra.run.dir"
    )  # the best-20.ckpt of a later best is no latest state
    refuse_going_back(folder / "on_exception.ckpt", {"global_step": 14}, dirs)  # the latest: resumed
    refuse_going_back(tmp_path / "elsewhere.ckpt", {"global_step": 30}, dirs)  # later than all there
    refuse_going_back(folder / "best-4.ckpt", {"global_step": 4}, {"x": tmp_path / "none"})  # another folder


def test_a_resume_from_elsewhere_into_a_folder_with_checkpoints_is_refused(tmp_path):
    """Another run's checkpoint resumed into a folder that holds checkpoints would write over them; the folder's own
    latest state is what resumes there."""
    from nmt.training.run_dir import refuse_used_run_dir

    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(b"x")
    dirs = {"callbacks.checkpoint.dirpath": folder}
    refuse_used_run_dir(tmp_path / "run", dirs, str(folder / "last.ckpt"))  # its own: resumed there
    with pytest.raises(ValueError) as refused:
        refuse_used_run_dir(tmp_path / "run", dirs, str(tmp_path / "other.ckpt"))
    assert f"which resuming ckpt_path={tmp_path / 'other.ckpt'} there would write over; to continue that run, add " \
           f"ckpt_path={(folder / 'last.ckpt').resolve()};" in str(refused.value)  # fmt: skip


def test_results_json_only_gains_what_a_resume_measured(tmp_path):
    first = RunResults(str(tmp_path), "bahdanau", 16, {"bleu": 3.2, "chrf": 20.0}, {"bleu": 3.0}, "best-8.ckpt")
    first.write(tmp_path)
    RunResults(str(tmp_path), "bahdanau", 16, {}, {"bleu": 3.1}, "best-8.ckpt").write(tmp_path)  # nothing validated
    kept = json.loads((tmp_path / "results.json").read_text())
    assert kept["valid"] == {"bleu": 3.2, "chrf": 20.0} and kept["test"] == {"bleu": 3.1}
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text((tmp_path / "results.json").read_text())  # a copied file: not this run's
    RunResults(str(other), "luong", 2, {}).write(other)
    assert json.loads((other / "results.json").read_text())["valid"] == {}


# --- the whole flow, through train.py ------------------------------------------------------------------------------

RUN = ["trainer.max_steps=12", "trainer.val_check_interval=4", "callbacks.heatmaps.num_sentences=0",
       "callbacks.early_stopping=null", "callbacks.checkpoint.save_top_k=-1"]  # fmt: skip


@pytest.mark.slow
def test_a_resume_goes_on_in_its_own_folder_and_never_backwards(data_cache, tmp_path):
    run = tmp_path / "run"
    run_train(run, data_cache, *RUN)
    folder = run / "checkpoints"
    assert step(folder / "last.ckpt") == 12 and (folder / "best-4.ckpt").is_file()
    before = json.loads((run / "results.json").read_text())
    # an earlier best, into the run's own folder: refused before preparation, nothing written
    stamp = (folder / "last.ckpt").stat().st_mtime_ns
    line = last_line(run_train(run, data_cache, *RUN, f"ckpt_path={folder / 'best-4.ckpt'}", check=False))
    assert line.startswith(f"error: ckpt_path={folder / 'best-4.ckpt'}: step 4, behind {folder / 'last.ckpt'}"), line
    assert (folder / "last.ckpt").stat().st_mtime_ns == stamp
    # the advice followed: on from step 12, the same files written over, no last-v1.ckpt
    advised = line.split("resume from ", 1)[1].split(",")[0]
    run_train(run, data_cache, *RUN, advised, "trainer.max_steps=16")
    assert step(folder / "last.ckpt") == 16 and not list(folder.glob("*-v*.ckpt"))
    # again past max_steps, as a stopped run's advice would say: nothing trains, nothing validates, nothing lost
    run_train(run, data_cache, *RUN, advised, "trainer.max_steps=16")
    after = json.loads((run / "results.json").read_text())
    assert after["valid"] and after["valid"].keys() == before["valid"].keys(), after
    # #82 §5: a copy of the folder resumed past max_steps (its results.json another folder's): the scores come
    # with the state, as they are in the run's own folder
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    run_train(copy, data_cache, *RUN, f"ckpt_path={copy / 'checkpoints' / 'last.ckpt'}", "trainer.max_steps=16")
    copied = json.loads((copy / "results.json").read_text())
    assert copied["run_dir"] == str(copy) and copied["valid"] == after["valid"], copied
    # an averaged checkpoint holds no training state: refused before preparation, naming what to resume
    averaged = torch.load(folder / "last.ckpt", weights_only=True)
    averaged.pop("optimizer_states")
    torch.save(averaged, tmp_path / "averaged.ckpt")
    line = last_line(run_train(tmp_path / "a", data_cache, *RUN, f"ckpt_path={tmp_path / 'averaged.ckpt'}",
                               "data.cache_dir=/nonexistent/never", check=False))  # fmt: skip
    assert "holds weights without the optimiser's and the loops' state" in line and not (tmp_path / "a").exists()


@pytest.mark.slow
def test_another_models_checkpoint_is_refused_before_any_preparation(trained, tmp_path):
    last = trained["bahdanau"] / "checkpoints" / "last.ckpt"
    cache = tmp_path / "cache"  # empty: the refusal comes before anything is prepared into it
    line = last_line(run_train(tmp_path / "r", cache, f"ckpt_path={last}", "model.emb_size=40", check=False))
    assert line.startswith(f"error: {last}: its weights do not fit these model settings"), line
    assert not cache.exists() and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_save_last_false_writes_no_last_ckpt(data_cache, tmp_path):
    run = tmp_path / "run"
    proc = run_train(run, data_cache, *RUN, "trainer.max_steps=4", "callbacks.checkpoint.save_last=false")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best-4.ckpt"]
    assert f"--ckpt {run / 'checkpoints' / 'best-4.ckpt'}" in proc.stdout + proc.stderr


def test_the_advice_s_checkpoint_path_is_quoted_where_it_has_a_space(tmp_path):
    """#82 §5: followed as printed, ``add ckpt_path=...`` must be one argument of the shell, a space or not."""
    from nmt.training.run import refuse_going_back
    from nmt.training.run_dir import refuse_used_run_dir

    run = tmp_path / "my run"
    folder = run / "checkpoints"
    folder.mkdir(parents=True)
    torch.save({"global_step": 8}, folder / "last.ckpt")
    with pytest.raises(ValueError) as e:
        refuse_used_run_dir(run, {"callbacks.checkpoint.dirpath": folder}, None)
    added = str(e.value).split("add ", 1)[1].split("; else", 1)[0]
    assert shlex.split(added) == [f"ckpt_path={(folder / 'last.ckpt').resolve()}"], str(e.value)
    torch.save({"global_step": 4}, folder / "best-4.ckpt")
    with pytest.raises(ValueError) as e:
        refuse_going_back(folder / "best-4.ckpt", {"global_step": 4}, {"callbacks.checkpoint.dirpath": folder})
    advised = str(e.value).split("resume from ", 1)[1].split(", or branch", 1)[0]
    assert shlex.split(advised) == [f"ckpt_path={(folder / 'last.ckpt').resolve()}"], str(e.value)


def test_a_failure_before_the_first_update_leaves_no_checkpoint_in_the_way(tmp_path):
    """#82 §5: a fit that fails before it trained anything leaves no on_exception.ckpt: the same command runs again
    into the same folder (it would be refused, with advice to resume a step-0 state)."""
    from nmt.training.callbacks import InterruptCheckpoint

    saved = []
    trainer = SimpleNamespace(global_step=0, save_checkpoint=saved.append)
    module = SimpleNamespace(state_dict=lambda: {"w": torch.ones(1)})
    InterruptCheckpoint(tmp_path).on_exception(trainer, module, RuntimeError("boom"))
    assert saved == []
    trainer.global_step = 3
    InterruptCheckpoint(tmp_path).on_exception(trainer, module, RuntimeError("boom"))
    assert saved == [str(tmp_path / "on_exception.ckpt")]
