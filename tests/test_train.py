"""The real train.py through Hydra, with tiny settings."""

import os
import signal
from pathlib import Path

import pytest
import torch
from forked import run_script
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import run_train, self_attending
from nmt import checkpoint
from nmt.alignment.choice import AttentionChoice
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.models.attention import DotProductAttention

pytestmark = pytest.mark.slow  # real train.py runs


def events(run_dir):
    ea = EventAccumulator(str(run_dir / "tb"), size_guidance={"images": 0, "scalars": 0})
    ea.Reload()
    return ea


def test_checkpoints_reload_and_tensorboard_has_heatmaps_and_bleu(trained):
    for name, run_dir in trained.items():
        ckpts = run_dir / "checkpoints"
        assert (ckpts / "last.ckpt").is_file() and list(ckpts.glob("best-*.ckpt"))
        assert (run_dir / ".hydra" / "config.yaml").is_file()
        loaded = checkpoint.load_checkpoint(ckpts / "last.ckpt")
        saved = loaded.checkpoint
        assert saved.model_settings["name"] == name and loaded.tokenizer is not None and saved.step == 16
        assert saved.settings["optim"]["_target_"] == "torch.optim.Adam"  # what was used
        best = max(e.value for e in events(run_dir).Scalars("val/bleu"))
        assert saved.monitor == "val/bleu" and saved.best_score == pytest.approx(best, abs=1e-4)
        ea = events(run_dir)
        tags = ea.Tags()
        assert {"alignment/0", "alignment/1"} <= set(tags["images"])
        assert "val/bleu" in tags["scalars"] and "val/aer" in tags["scalars"] and "test/bleu" in tags["scalars"]
        assert {"train/loss", "train/device/items_per_sec", "train/grad_norm", "lr-Adam"} <= set(tags["scalars"])
        model = loaded.model  # what it declares and computes, not its family's name, says what is logged
        dot = any(isinstance(m, DotProductAttention) for m in model.modules())
        chosen = "kernels.attention on this CPU in 32-true: " in (run_dir / "train.log").read_text()
        assert chosen == dot  # measured where there is scaled-dot attention to choose a kernel for
        viewer = (run_dir / "alignments.html").read_text()
        assert (
            viewer.count('"label": "8 (epoch ') == 1 and viewer.count('"label": "16 (epoch ') == 1
        )  # a slider step each
        # every attention choice measured on validation: the grid, and the best recorded in the checkpoint
        assert {"val/aer_grid", "test/aer_grid"} <= set(tags["images"])
        assert {"val/aer_output", "val/aer_input", "val/aer_links_reverse"} <= set(tags["scalars"])
        record = saved.alignment_record
        assert saved.alignment == AttentionChoice(record["layer"], record["head"], record["readout"], record["links"])
        assert record["readout"] in ("output", "input") and record["step"] == 16
        for axis in (("output", "input"), [f"links_{name}" for name in COMBINATIONS]):  # each axis's best is the best
            best_val = min(ea.Scalars(f"val/aer_{value}")[-1].value for value in axis)
            assert record["aer"] == pytest.approx(best_val, abs=1e-6)
        layers, heads = model.attention_layout
        assert ("attention_heads/0" in tags["images"]) == (layers * heads > 1)  # several layers or heads: a grid
        assert ("self_attention/0" in tags["images"]) == self_attending(model)  # decoders that have it


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


def test_the_transformer_resumes_where_it_stopped(trained, data_cache, tmp_path):
    last = trained["transformer"] / "checkpoints" / "last.ckpt"
    proc = run_train(tmp_path / "resumed", data_cache, "model=transformer", f"ckpt_path={last}", "trainer.max_steps=24")
    assert "Restoring states from the checkpoint" in proc.stderr + proc.stdout
    resumed = torch.load(tmp_path / "resumed" / "checkpoints" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == 24 and resumed["hyper_parameters"]["model"]["name"] == "transformer"
    assert min(e.step for e in events(tmp_path / "resumed").Scalars("train/loss")) >= 16
    # the optimiser and schedule went on: the learning rate at step 16 is where the first run left it
    lr = {e.step: e.value for e in events(tmp_path / "resumed").Scalars("lr-Adam")}
    first = {e.step: e.value for e in events(trained["transformer"]).Scalars("lr-Adam")}
    assert lr[min(lr)] >= first[max(first)]


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


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_bf16_mixed_precision_with_clipping_trains_as_float32_does(trained, data_cache, tmp_path, name):
    """trainer.precision=bf16-mixed (trainer=gpu's, and on a CPU with bf16 instructions) with gradient clipping: the
    optimiser is one Lightning can clip under mixed precision, and the losses follow the float32 run's."""
    proc = run_train(tmp_path / "bf16", data_cache, f"model={name}", "trainer.precision=bf16-mixed", check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = {e.step: e.value for e in events(trained[name]).Scalars("train/loss")}
    mixed = {e.step: e.value for e in events(tmp_path / "bf16").Scalars("train/loss")}
    assert sorted(mixed) == sorted(first) and len(first) >= 3
    assert all(mixed[s] == pytest.approx(first[s], rel=0.01) for s in first)  # bf16 products, float32 weights
    assert (tmp_path / "bf16" / "checkpoints" / "last.ckpt").exists()


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_that_would_emulate_it_warns_that_float32_is_faster(monkeypatch, caplog, native):
    from nmt import hardware

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else None
    if flags is not None:  # the instructions torch reports are the ones the kernel lists
        assert hardware.cpu_computes_bf16() == any(f in flags.split() for f in ("avx512_bf16", "amx_bf16", "bf16"))
    monkeypatch.setattr(hardware, "cpu_computes_bf16", lambda: native)
    for precision in ("bf16-mixed", "32-true"):
        hardware.check_trainer({"accelerator": "cpu", "precision": precision})
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == (0 if native else 1)
    assert native or warned[0].startswith("trainer.precision=bf16-mixed: ") and "trainer.precision=32-true" in warned[0]


def test_bad_config_values_give_a_clear_error(data_cache, tmp_path):
    for override, message in (
        (
            "model.decoder._target_=nmt.models.decoders.Transformer",
            "model.decoder._target_='nmt.models.decoders.Transformer': not",
        ),
        ("data.prepare.on_bad_line=maybe", "data.prepare.on_bad_line='maybe': must be one of error, skip"),
        ("optim._target_=torch.optim.Adamm", "optim._target_='torch.optim.Adamm': cannot be imported"),
    ):
        proc = run_train(tmp_path / override.split("=")[0], data_cache, override, check=False)
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert f"error: {message}" in proc.stderr
    proc = run_train(tmp_path / "tsv", data_cache, "data=tsv", check=False, toy=False)
    assert proc.returncode == 1 and "error: data=tsv needs data.source.path" in proc.stderr
    missing = tmp_path / "none.tsv"
    proc = run_train(tmp_path / "tsv", data_cache, "data=tsv", f"data.source.path={missing}", check=False, toy=False)
    assert proc.returncode == 1 and f"error: data.source.path={missing}: no such file" in proc.stderr
    assert not (tmp_path / "tsv").exists()  # refused before preparation: no run directory left


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for a GPU where there is none")
def test_a_missing_gpu_is_one_line_before_any_data_is_prepared(tmp_path):
    proc = run_train(tmp_path / "run", tmp_path / "cache", "trainer=gpu", "trainer.accelerator=gpu", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: trainer.accelerator=gpu: no GPU (torch ")
    assert not (tmp_path / "cache").exists()  # nothing was generated, prepared or cached
    advised = last.split("add ", 1)[1].split()  # followed: the same command, and what it says to add
    rerun = run_train(tmp_path / "run", tmp_path / "cache", "trainer=gpu", "trainer.accelerator=gpu", *advised,
                      "trainer.max_steps=2", "trainer.val_check_interval=2")  # fmt: skip
    assert "GPU available: False, used: False" in rerun.stdout + rerun.stderr


def test_nan_loss_stops_with_the_step(data_cache, tmp_path):
    proc = run_train(
        tmp_path / "nan",
        data_cache,
        "optim.lr=1e37",
        "schedule=constant",
        "trainer.gradient_clip_val=null",
        check=False,
    )
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert line.startswith("error: the weights are not finite at step ") or line.startswith(
        "error: training loss is not finite at step "), line  # fmt: skip
    saved = list((tmp_path / "nan" / "checkpoints").glob("*.ckpt"))
    assert all(checkpoint.non_finite(torch.load(p, weights_only=True)["state_dict"]) is None for p in saved)
    if saved:  # the advice names the latest, a finite one
        assert "go on from the latest checkpoint with trainer.precision=32-true: python train.py " in line, line
    else:
        assert "no checkpoint was saved before it; start again with a lower optim.lr" in line, line


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


def test_every_log_line_once_on_the_console_and_in_the_log_file(data_cache, tmp_path):
    proc = run_train(tmp_path / "run", data_cache, "trainer.max_steps=4", "trainer.val_check_interval=2")
    console, logfile = proc.stdout + proc.stderr, (tmp_path / "run" / "train.log").read_text()
    for line in ("Seed set to 1", "`Trainer.fit` stopped: `max_steps=4` reached.", "bahdanau model, "):
        assert console.count(line) == 1 and logfile.count(line) == 1, (line, console)
    assert "Tip:" not in console and "was called without a model" not in console and "LeafSpec" not in console
    assert "; test bleu " in proc.stdout  # the run summary is still there, with the scores


def test_ctrl_c_leaves_a_resumable_checkpoint(data_cache, tmp_path):
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
        "trainer.max_epochs=-1", "callbacks.early_stopping=null",  # still running when Ctrl-C comes, however fast
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1")
    sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731 - even where our parent ignores it
    popen = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=sigint)
    proc = subprocess.Popen(cmd, **popen)
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
    # the advice, followed as printed: the run's own settings (its tiny model too) and the checkpoint
    import shlex

    advice = shlex.split(err.strip().splitlines()[-1].split("resume with", 1)[1])
    assert advice[:2] == ["python", "train.py"] and advice[-2:] == [f"hydra.run.dir={run_dir}", f"ckpt_path={saved}"]
    cmd = [sys.executable, *advice[1:-2], f"trainer.max_steps={step + 4}", *advice[-2:]]  # in its own folder
    done = run_script(cmd, ROOT, env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = run_dir / "checkpoints"
    assert torch.load(folder / "last.ckpt", weights_only=True)["global_step"] == step + 4
    assert not saved.exists() and not list(folder.glob("*-v*.ckpt"))  # it ended well: no on_exception.ckpt left


def test_val_bleu_is_sacrebleu_of_the_validation_translations(trained, data_cache):
    import sacrebleu

    from conftest import datamodule
    from nmt.inference.search import SearchOptions
    from nmt.inference.translator import Translator

    run_dir = trained["bahdanau"]
    module = checkpoint.load_checkpoint(run_dir / "checkpoints" / "last.ckpt")  # step 16: the last validation's weights
    dm = datamodule(
        cache_dir=str(data_cache), source=dict(train_size=600, valid_size=24, test_size=24), spm=dict(vocab_size=300)
    )
    dm.setup()
    refs = dm.references("valid")
    search = SearchOptions(**module.checkpoint.settings["decoding"])
    hyps = [t.text for t in Translator(module.model, module.tokenizer, search).translate(refs.src)]
    ea = events(run_dir)
    bleu, chrf = ea.Scalars("val/bleu")[-1], ea.Scalars("val/chrf")[-1]  # the last validation: the weights saved last
    assert search == SearchOptions(beam_size=1) and chrf.value > 1  # (BLEU of an untrained model may be 0)
    assert bleu.value == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs.tgt]).score, abs=1e-3)
    assert chrf.value == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs.tgt]).score, abs=1e-3)


def test_aer_of_attention_built_from_the_gold_links_is_zero(data_cache):
    """Gold links -> piece-level attention -> the same word aggregation and AER sums as val/aer."""
    from conftest import datamodule
    from nmt.alignment.aer import AERCounts
    from nmt.alignment.links import parse_links
    from nmt.alignment.words import attention_links, piece_words

    dm = datamodule(
        cache_dir=str(data_cache), source=dict(train_size=600, valid_size=24, test_size=24), spm=dict(vocab_size=300)
    )
    dm.setup()
    refs, tok, counts, used = dm.references("valid"), dm.tokenizer, AERCounts(), 0
    batch = dm.sample_batch("valid", len(refs))
    for row, i in enumerate(batch.idx.tolist()):
        sure = parse_links(refs.sure[i])
        by_target: dict[int, set[int]] = {}
        for s, t in sure:
            by_target.setdefault(t, set()).add(s)
        if any(len(v) != 1 for v in by_target.values()) or len(by_target) != len(refs.tgt[i].split()):
            continue  # one link per target word can only be perfect where the gold has exactly one
        src_pieces = tok.src_pieces(batch.src[row, : int(batch.src_len[row])].tolist())
        tgt_pieces = tok.tgt_pieces(batch.tgt_out[row, : int(batch.tgt_len[row]) - 1].tolist())
        src_word, tgt_word = piece_words(src_pieces), piece_words(tgt_pieces)
        weights = torch.zeros(len(tgt_pieces) + 1, len(src_pieces))  # + the EOS row, as in training
        for t, w in enumerate(tgt_word):
            (s,) = by_target[w]
            cols = [p for p, sw in enumerate(src_word) if sw == s]
            weights[t, cols] = 1.0 / len(cols)
        links = attention_links(weights, src_pieces, tgt_pieces, len(refs.src[i].split()), len(refs.tgt[i].split()))
        counts.add(links, sure, parse_links(refs.possible[i]))
        used += 1
    assert used >= 5 and AERCounts.aer(counts.as_tensor()) == 0.0


def test_a_bad_or_unfitting_checkpoint_to_resume_is_one_line(trained, data_cache, tmp_path):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"\x00not a checkpoint")
    last = trained["bahdanau"] / "checkpoints" / "last.ckpt"
    for overrides, message in (
        ([f"ckpt_path={junk}"], f"error: {junk}: not a checkpoint of this project"),
        ([f"ckpt_path={tmp_path / 'missing.ckpt'}"], "checkpoint not found"),
        (
            [f"ckpt_path={last}", "model.decoder.hidden_size=64"],
            f"error: {last}: its weights do not fit these model settings",
        ),
    ):
        proc = run_train(tmp_path / "r", data_cache, *overrides, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert message in proc.stderr.strip().splitlines()[-1]


def test_a_save_cut_short_leaves_no_checkpoint_behind(trained, data_cache, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(trained["bahdanau"] / "checkpoints", old)
    partial = old / "best-24.ckpt.part"  # what Ctrl-C in the middle of a save leaves
    partial.write_bytes(b"half a checkpoint")
    saved = torch.load(old / "last.ckpt", weights_only=True)
    checkpoint_record(saved)["dirpath"] = str(old)
    torch.save(saved, old / "last.ckpt")
    run_train(
        tmp_path / "resumed", data_cache, "model=bahdanau", f"ckpt_path={old / 'last.ckpt'}", "trainer.max_steps=24"
    )
    assert not partial.exists() and not list((tmp_path / "resumed" / "checkpoints").glob("*.part"))
    assert all(
        torch.load(p, weights_only=True)["global_step"] for p in (tmp_path / "resumed" / "checkpoints").glob("*.ckpt")
    )


def test_every_checkpoint_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from lightning.pytorch.plugins.io import TorchCheckpointIO

    from conftest import ROOT
    from nmt.training.callbacks import AtomicCheckpointIO

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        trainer_cfg = compose(config_name="config", overrides=["trainer.accelerator=cpu"]).trainer
    trainer = instantiate(trainer_cfg, logger=False, enable_checkpointing=False)
    assert isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO)  # what train.py's trainer writes with
    io, path = AtomicCheckpointIO(), tmp_path / "best.ckpt"
    io.save_checkpoint({"w": torch.ones(2)}, path)
    assert torch.equal(torch.load(path)["w"], torch.ones(2))

    def disk_full(self, checkpoint, target, storage_options=None):
        Path(target).write_bytes(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TorchCheckpointIO, "save_checkpoint", disk_full)
    with pytest.raises(OSError):
        io.save_checkpoint({"w": torch.zeros(2)}, path)
    assert torch.equal(torch.load(path)["w"], torch.ones(2))  # the earlier checkpoint stands
    with pytest.raises(OSError):
        io.save_checkpoint({"w": torch.zeros(2)}, tmp_path / "last.ckpt")
    assert not (tmp_path / "last.ckpt").exists()  # only a *.part, which a resume removes


def test_a_ctrl_c_that_python_swallows_still_stops_training_at_the_next_batch():
    """SIGINT that arrives while the garbage collector runs a ``__del__`` raises KeyboardInterrupt there, where
    Python prints "Exception ignored" and goes on: the run must stop all the same."""
    import lightning as L
    from lightning.pytorch.demos.boring_classes import BoringModel

    from nmt.training.callbacks import CtrlC

    class Collected:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # Ctrl-C, delivered while the collector runs this

    class Interrupted(BoringModel):
        def training_step(self, batch, batch_idx):
            if batch_idx == 3:
                Collected()  # dropped at once: its __del__ runs here, and its KeyboardInterrupt is swallowed
            return super().training_step(batch, batch_idx)

    trainer = L.Trainer(
        max_steps=40, callbacks=[CtrlC()], logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, limit_val_batches=0, accelerator="cpu",
    )  # fmt: skip
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit):  # Lightning's answer to Ctrl-C
        trainer.fit(Interrupted())
    assert trainer.interrupted and trainer.global_step == 4  # stopped at the end of the batch it came in
    assert signal.getsignal(signal.SIGINT) is before  # the handler is given back
