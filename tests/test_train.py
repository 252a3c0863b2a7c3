"""The real train.py through Hydra, with tiny settings."""

from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import run_train
from nmt.module import TranslationModule


def events(run_dir):
    ea = EventAccumulator(str(run_dir / "tb"), size_guidance={"images": 0, "scalars": 0})
    ea.Reload()
    return ea


def test_checkpoints_reload_and_tensorboard_has_heatmaps_and_bleu(trained):
    for name, run_dir in trained.items():
        ckpts = run_dir / "checkpoints"
        assert (ckpts / "last.ckpt").is_file() and list(ckpts.glob("best-*.ckpt"))
        assert (run_dir / ".hydra" / "config.yaml").is_file()
        module = TranslationModule.from_checkpoint(ckpts / "last.ckpt")
        assert module.hparams.model["name"] == name and module.tokenizer is not None
        ea = events(run_dir)
        tags = ea.Tags()
        assert {"alignment/0", "alignment/1"} <= set(tags["images"])
        assert "val/bleu" in tags["scalars"] and "val/aer" in tags["scalars"] and "test/bleu" in tags["scalars"]
        assert {"train/loss", "train/device/items_per_sec", "train/grad_norm", "lr-Adam"} <= set(tags["scalars"])
        if name == "luong":
            assert "self_attention/0" in tags["images"]
        else:
            assert "self_attention/0" not in tags["images"]


def checkpoint_record(ckpt: dict) -> dict:
    """The checkpoint callback's saved state (best scores and paths)."""
    return next(v for k, v in ckpt["callbacks"].items() if k.startswith("RunCheckpoint"))


def test_resume_continues_from_the_saved_step_and_keeps_the_best(trained, data_cache, tmp_path):
    last = trained["bahdanau"] / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 16
    # mid-epoch: the data module stored where in the epoch's batches training was
    dm_state = saved["TranslationDataModule"]
    assert dm_state["batches"] > 0
    before = checkpoint_record(saved)
    proc = run_train(tmp_path / "resumed", data_cache, "model=bahdanau", f"ckpt_path={last}", "trainer.max_steps=24")
    assert "Restoring states from the checkpoint" in proc.stderr + proc.stdout
    assert "dataloader is not resumable" not in proc.stderr
    resumed = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == 24
    steps = [e.step for e in events(tmp_path / "resumed").Scalars("train/loss")]
    assert min(steps) >= 16
    # the best of the whole run, not of the part after the resume; it is a file that exists
    bleu_24 = {e.step: e.value for e in events(tmp_path / "resumed").Scalars("val/bleu")}[24]
    after = checkpoint_record(resumed)
    assert float(after["best_model_score"]) == pytest.approx(max(float(before["best_model_score"]), bleu_24))
    assert Path(after["best_model_path"]).is_file()
    if bleu_24 <= float(before["best_model_score"]):
        assert after["best_model_path"] == before["best_model_path"]


def test_resume_when_the_recorded_best_file_is_gone(trained, data_cache, tmp_path):
    # what Ctrl-C during the save of a new best leaves: a record naming a file never written
    saved = torch.load(trained["bahdanau"] / "checkpoints" / "last.ckpt", weights_only=True)
    record = checkpoint_record(saved)
    gone = str(tmp_path / "best-never-written.ckpt")
    record["best_k_models"] = {gone: record["best_model_score"] + 1}
    record["best_model_path"] = record["kth_best_model_path"] = gone
    torch.save(saved, tmp_path / "interrupted.ckpt")
    proc = run_train(
        tmp_path / "resumed",
        data_cache,
        "model=bahdanau",
        f"ckpt_path={tmp_path / 'interrupted.ckpt'}",
        "trainer.max_steps=24",
    )
    best = checkpoint_record(torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=True))[
        "best_model_path"
    ]
    assert best != gone and Path(best).is_file() and Path(best).parent == tmp_path / "resumed" / "checkpoints"
    assert "test/bleu" in events(tmp_path / "resumed").Tags()["scalars"], proc.stderr[-2000:]


def test_same_seed_same_first_epoch_losses(trained, data_cache, tmp_path):
    run_train(tmp_path / "again", data_cache, "model=bahdanau", "trainer.max_steps=8", "run_test=false")
    first = {e.step: e.value for e in events(trained["bahdanau"]).Scalars("train/loss")}
    again = {e.step: e.value for e in events(tmp_path / "again").Scalars("train/loss")}
    common = sorted(set(first) & set(again))
    assert common and all(first[s] == again[s] for s in common)


def test_bad_config_values_give_a_clear_error(data_cache, tmp_path):
    for override, message in (
        ("model.name=transformer", "model.name must be one of"),
        ("data.on_bad_line=maybe", "data.on_bad_line must be"),
        ("optim.schedule=cosine", "optim.schedule must be"),
    ):
        proc = run_train(tmp_path / override.split("=")[0], data_cache, override, check=False)
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert f"error: {message}" in proc.stderr
    proc = run_train(tmp_path / "tsv", data_cache, "data=tsv", check=False, toy=False)
    assert proc.returncode == 1 and "error: data=tsv needs data.path" in proc.stderr


def test_nan_loss_stops_with_the_step(data_cache, tmp_path):
    proc = run_train(
        tmp_path / "nan",
        data_cache,
        "optim.lr=1e37",
        "optim.schedule=constant",
        "trainer.gradient_clip_val=null",
        check=False,
    )
    assert proc.returncode == 1
    assert "error: training loss is" in proc.stderr and "at step" in proc.stderr


def test_ddp_two_cpu_processes(data_cache, tmp_path):
    run_dir = tmp_path / "ddp"
    overrides = [
        "trainer=ddp",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
    ]
    run_train(run_dir, data_cache, *overrides, timeout=600)
    ea = events(run_dir)
    assert "val/bleu" in ea.Tags()["scalars"] and "train/items_per_sec" in ea.Tags()["scalars"]
    # BLEU over the whole validation set: both ranks' hypotheses were gathered
    assert {e.value for e in ea.Scalars("val/sentences")} == {24.0}
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6


def test_ctrl_c_leaves_a_resumable_checkpoint(data_cache, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT, TINY_DATA, tiny_model_overrides

    run_dir = tmp_path / "interrupted"
    cmd = [
        sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={run_dir}", f"data.cache_dir={data_cache}",
        *TINY_DATA, *tiny_model_overrides(),
        "trainer.max_steps=100000", "trainer.val_check_interval=4", "trainer.check_val_every_n_epoch=null",
        "trainer.enable_progress_bar=false", "trainer.accelerator=cpu", "callbacks.heatmaps.num_sentences=0",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.time() + 120
    while not (run_dir / "checkpoints" / "last.ckpt").exists() and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "interrupted: resume with" in err
    saved = run_dir / "checkpoints" / "on_exception.ckpt"
    step = torch.load(saved, weights_only=True)["global_step"]
    assert step >= 4
    run_train(tmp_path / "resumed", data_cache, f"ckpt_path={saved}", f"trainer.max_steps={step + 4}")
    assert torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == step + 4
