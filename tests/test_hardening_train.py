"""#59, the training side: a fresh run never continues an old one, the latest state is always saved, no key of the
config is accepted and then ignored, and every bad key is one line naming it."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from test_settings import CONFIGS, composed

from conftest import FAMILIES, ROOT, TRAIN_ENV, run_train, train_command
from nmt.config_keys import check_keys
from nmt.data.readers import CorpusError

GROUPS = {"model", "data", "trainer", "optim", "schedule", "averaging", "experiment", "paths"}


def last_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


# --- unknown keys -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", CONFIGS)
def test_no_shipped_config_has_a_key_that_nothing_reads(overrides):
    check_keys(composed(overrides), overrides, GROUPS)


UNKNOWN = [  # an added key, and the line that refuses it
    (["+model.foo=3"], "model.foo: no such key; model has decoder, dropout, emb_size, encoder, name, readout_size, "
                       "share_embeddings, tie_embeddings"),  # fmt: skip
    (["+data.foo=3"], "data.foo: no such key; data takes the arguments of nmt.training.datamodule."),
    (["+trainer.foo=3"], "trainer.foo: no such key; trainer takes the arguments of lightning.pytorch.Trainer"),
    (["+trainer.max_step=3"], "trainer.max_step: no such key; did you mean trainer.max_steps"),
    (["+loss.foo=1"], "loss.foo: no such key; loss has align_full_context, align_head, align_layer, align_weight"),
    (["++decoding.foo=1"], "decoding.foo: no such key; decoding has alpha, beam_size, max_len_a, max_len_b, nbest"),
    (["+foo=1"], "foo: no such key; the top level has average_best, callbacks, ckpt_path"),
    (["+data.prepare.spm.foo=1"], "data.prepare.spm.foo: no such key; data.prepare.spm has character_coverage"),
    (["+data.source.src=a.fr"], "data.source.src: no such key; data.source takes the arguments of "
     "nmt.data.sources.BuiltIn: max_words, seed, test_size, train_size, valid_size"),
    (["+model.encoder.hiden_size=3"], "model.encoder.hiden_size: no such key; did you mean model.encoder.hidden_size"),
    (["+data.links=true"], "data.links: set by train.py from loss.align_weight, not a key of its own"),
    (["+model.decoder.emb_size=8"], "model.decoder.emb_size: set by train.py from model.emb_size"),
    (["+callbacks.extra=3"], "callbacks.extra: a new entry of callbacks needs its class: add +callbacks.extra._ta"),
    (["+callbacks.extra.out=x"], "callbacks.extra: a new entry of callbacks needs its class"),
    (["+compile.pad_multiple=8"], "compile.pad_multiple: no such key since it moved: it is data.pad_multiple now"),
]


@pytest.mark.parametrize("overrides, message", UNKNOWN)
def test_an_unknown_key_is_one_line_naming_it_and_the_keys_there(overrides, message):
    with pytest.raises(ValueError) as e:
        check_keys(composed(overrides), overrides, GROUPS, lambda: composed([]))
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["+trainer.limit_train_batches=2"],  # an argument of the Trainer that conf/ does not set
        ["++loss.label_smoothing=0.2"],  # ++ on a key that exists adds none
        ["+callbacks.probe._target_=ddp_probe.Probe", "+callbacks.probe.out=x"],  # a callback of one's own
        ["averaging=ema", "schedule=plateau", "+schedule.scheduler.min_lr=1e-5"],
    ],
)
def test_keys_that_something_reads_are_taken(overrides):
    check_keys(composed(overrides), overrides, GROUPS, lambda: composed([o for o in overrides if "++" not in o]))


# --- corpus source keys that the way of reading leaves unread -------------------------------------------------------


def test_every_data_tsv_key_the_files_leave_unread_is_refused(tmp_path):
    from nmt.data.sources import Files, Tatoeba

    tsv, fr, en = (tmp_path / n for n in ("t.tsv", "t.fr", "t.en"))
    for p in (tsv, fr, en):
        p.write_text("a\tb\n")
    for kwargs, message in (
        (dict(path=tsv, src=fr, tgt=en), f"data.source.src={fr}: not read, since data.source.path (a TSV file)"),
        (dict(path=tsv, tgt=en), f"data.source.tgt={en}: not read, since data.source.path"),
        (dict(path=tsv, valid=tsv, test=tsv, valid_src=fr), f"data.source.valid_src={fr}: not read, since "
                                                               "data.source.valid"),  # fmt: skip
        (dict(path=tsv, valid_src=fr, test=tsv), f"data.source.valid_src={fr}: needs data.source.valid_tgt"),
        (dict(path=tsv, valid=tsv, test_tgt=en), f"data.source.test_tgt={en}: needs data.source.test_src"),
        (dict(src=fr, tgt=en, src_col=2), "data.source.src_col=2: a column of a TSV file, and no TSV file is read"),
        (dict(src=fr, tgt=en, tgt_col=0), "data.source.tgt_col=0: a column of a TSV file"),
        (dict(path=tsv, src_col=1, tgt_col=1), "data.source.src_col = data.source.tgt_col = 1"),
        (dict(path=tsv, valid=tsv), f"data.source.valid={tsv}: needs data.source.test (or test_src and test_tgt)"),
        (dict(path=tsv, test_src=fr, test_tgt=en), f"data.source.test_src={fr}: needs data.source.valid"),
        (dict(path=tmp_path / "none.tsv"), f"data.source.path={tmp_path / 'none.tsv'}: no such file"),
        (dict(src=fr, tgt=tmp_path / "none.en"), f"data.source.tgt={tmp_path / 'none.en'}: no such file"),
    ):
        with pytest.raises(CorpusError) as e:
            Files(**{k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()})
        assert str(e.value).startswith(message), str(e.value)
    Files(src=str(fr), tgt=str(en), valid=str(tsv), test=str(tsv), src_col=1, tgt_col=0)  # columns of valid and test
    splits = tmp_path / "splits"
    splits.mkdir()
    for name in Tatoeba.SPLIT_FILES:
        (splits / name).write_text("a\tb\n")
    with pytest.raises(CorpusError, match=r"^data.source.url=http://x: not read, since paths.tatoeba_splits="):
        Tatoeba(url="http://x", splits=str(splits))


# --- through train.py ----------------------------------------------------------------------------------------------


def test_a_fresh_run_into_a_directory_with_checkpoints_is_refused_before_anything_is_written(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / ".hydra").mkdir()
    record = run_dir / ".hydra" / "config.yaml"
    record.write_text("the old run's record\n")
    for name, age in (("best-8.ckpt", 30), ("last.ckpt", 20), ("on_exception.ckpt", 10)):
        (run_dir / "checkpoints" / name).write_bytes(b"old")
        t = time.time() - age
        os.utime(run_dir / "checkpoints" / name, (t, t))
    proc = run_train(run_dir, tmp_path / "cache", "optim.lr=1e-3", check=False)
    line = last_line(proc)
    newest = (run_dir / "checkpoints" / "on_exception.ckpt").resolve()
    assert line.startswith(f"error: hydra.run.dir={run_dir.resolve()}: holds the checkpoints of an earlier run")
    assert f"add ckpt_path={newest};" in line and line.endswith("else choose another hydra.run.dir")
    assert record.read_text() == "the old run's record\n" and not (run_dir / "train.log").exists()
    assert not (tmp_path / "cache").exists()  # refused before any data was prepared


def test_a_run_directory_that_cannot_be_made_is_one_line_naming_the_key(tmp_path):
    """#82 §5: a folder where nothing can be written (/sys answers os.access with yes for root, and refuses), or a
    file in the way, is refused before Hydra makes the folder (its traceback), naming hydra.run.dir."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = {Path("/sys/nmt-run"): "cannot write in /sys (", a_file / "run": f"cannot make the folder: {a_file} is a "
             "file", a_file: "is a file, not a folder"}  # fmt: skip
    for run_dir, why in cases.items():
        proc = run_train(run_dir, tmp_path / "cache", check=False)
        assert last_line(proc).startswith(f"error: hydra.run.dir={run_dir}: {why}"), proc.stderr[-2000:]
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_checkpoints_of_an_earlier_run_in_another_folder_are_refused_too(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"old")
    newest = (run_dir / "checkpoints" / "last.ckpt").resolve()
    proc = run_train(tmp_path / "new", tmp_path / "cache", f"callbacks.checkpoint.dirpath={run_dir / 'checkpoints'}",
                     check=False)  # fmt: skip
    assert last_line(proc).startswith(f"error: callbacks.checkpoint.dirpath={newest.parent}: holds the checkpoints")
    assert "else choose another callbacks.checkpoint.dirpath" in last_line(proc)
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.foo=3"], "error: model.foo: no such key; model has decoder, dropout, emb_size"),  # Hydra's own check
        (["+model.foo=3"], "error: model.foo: no such key; model has decoder, dropout, emb_size"),  # its advice
        (["+data.foo=3"], "error: data.foo: no such key; data takes the arguments of "),
        (["+trainer.foo=3"], "error: trainer.foo: no such key; trainer takes the arguments of lightning.pytorch"),
        (["model=lstm"], f"error: model=lstm: no such option; model is one of {', '.join(FAMILIES)}"),
        (["trainer.limit_train_batches=2"], "error: trainer.limit_train_batches: not in conf/; "
         "lightning.pytorch.Trainer takes it: add it with +trainer.limit_train_batches=2"),
        (["decoding.max_len_a=inf"], "error: decoding.max_len_a=inf: must be a number in [0, 10]"),
        (["data.prepare.split.valid=0.2"], "error: data.prepare.split.valid=0.2: not used, since the validation and "
                                           "test pairs of data=toy come from data.source.valid_size"),  # fmt: skip
        (["data=base"], "error: data.source.train_size: no such key, since data.source holds nothing (the data config "
                        "chosen leaves it to another); choose data=tatoeba or data=toy or data=tsv"),  # fmt: skip
        (["trainer.val_check_interval=200", "trainer.check_val_every_n_epoch=1"],
         "error: trainer.val_check_interval=200: more than the "),  # found once the data is prepared: no run left
        # #82: every key that reaches a target, Lightning's classes behind callbacks and logger included
        (["++callbacks.checkpoint.foo=1"], "error: callbacks.checkpoint.foo: no such key; callbacks.checkpoint takes "
                                           "the arguments of nmt.training.callbacks.RunCheckpoint"),  # fmt: skip
        (["+callbacks.checkpoint.save_weights_only=no"],
         "error: callbacks.checkpoint.save_weights_only='no': must be true or false"),
        (["+trainer.fast_dev_run=no"], "error: trainer.fast_dev_run='no': must be true or false, or an integer"),
        # the model's rules, found on the meta device before preparation (the cache stays empty)
        (["model=transformer", "model.encoder.heads=5"], "error: model.emb_size=32 (d_model) must be a multiple of "),
        (["model=luong", "model.tie_embeddings=true", "model.readout_size=100"], "error: model.tie_embeddings needs "),
        (["loss.align_weight=1", "loss.align_layer=3"], "error: loss.align_layer=3: the model has 1 attention layer"),
        (["trainer.max_time=garbage"], "error: trainer.max_time='garbage': must be DD:HH:MM:SS"),
        (["callbacks.lr_monitor._target_=lightning.pytorch.callbacks.NoSuchMonitor"],
         "error: callbacks.lr_monitor._target_='lightning.pytorch.callbacks.NoSuchMonitor': cannot be imported ("),
    ],
)
def test_train_py_says_a_bad_key_in_one_line_and_leaves_no_run_directory(tmp_path, data_cache, overrides, message):
    proc = run_train(tmp_path / "run", data_cache, *overrides, check=False)
    assert last_line(proc).startswith(message), last_line(proc)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_validation_interval_longer_than_an_epoch_follows_its_advice(tmp_path, data_cache):
    """The run of docs/attention.md's figure, on less data: its interval is more batches than an epoch has."""
    given = ["trainer.val_check_interval=20", "trainer.check_val_every_n_epoch=1", "trainer.max_steps=20"]
    line = last_line(run_train(tmp_path / "run", data_cache, *given, check=False))
    advice = line.split("; add ", 1)[1].split()[0]
    assert advice == "trainer.check_val_every_n_epoch=null", line
    run_train(tmp_path / "run", data_cache, *given, advice)
    assert torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 20
    assert (tmp_path / "run" / "checkpoints" / "best-20.ckpt").is_file()  # validated at update 20, across epochs


@pytest.mark.slow
def test_data_tsv_with_src_and_tgt_beside_path_is_refused(tmp_path):
    tsv = tmp_path / "c.tsv"
    tsv.write_text("".join(f"le chat {i}\tthe cat {i}\n" for i in range(50)))
    args = ("data=tsv", f"data.source.path={tsv}", f"data.source.src={tsv}", f"data.source.tgt={tsv}")
    proc = run_train(tmp_path / "run", tmp_path / "cache", *args, check=False, toy=False)
    assert last_line(proc).startswith(f"error: data.source.src={tsv}: not read, since data.source.path")
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def follow(line: str, what: str) -> list[str]:
    """The overrides an error line advises after ``what``, up to the next ';'."""
    return shlex.split(line.split(what, 1)[1].split(";", 1)[0])


@pytest.mark.slow
def test_a_resume_with_other_model_settings_names_the_ones_it_was_trained_with(trained, data_cache, tmp_path):
    last = trained["bahdanau"] / "checkpoints" / "last.ckpt"
    changed = ("model.decoder.hidden_size=64", "model.emb_size=40")
    proc = run_train(tmp_path / "r", data_cache, f"ckpt_path={last}", *changed, check=False)
    line = last_line(proc)
    assert line.startswith(f"error: {last}: its weights do not fit these model settings"), line
    advice = follow(line, "it was trained with ")
    assert sorted(advice) == ["model.decoder.hidden_size=48", "model.emb_size=32"], line
    run_train(tmp_path / "r", data_cache, f"ckpt_path={last}", *changed, *advice, "trainer.max_steps=20")
    assert torch.load(tmp_path / "r" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 20
    # another model altogether: model=<its name> and its sizes
    proc = run_train(tmp_path / "l", data_cache, f"ckpt_path={last}", "model=luong", check=False)
    advice = follow(last_line(proc), "it was trained with ")
    assert advice[0] == "model=bahdanau" and "model.decoder.attn_hidden=32" in advice, last_line(proc)
    # other data: its run's data overrides, from its .hydra/overrides.yaml
    proc = run_train(tmp_path / "d", data_cache, f"ckpt_path={last}", "data.prepare.spm.vocab_size=200", check=False)
    line = last_line(proc)
    assert line.startswith(f"error: {last}: another target vocabulary than this data config: it was trained with ")
    advice = follow(line, "it was trained with ")[:-1]  # its record's path last
    assert "data.prepare.spm.vocab_size=300" in advice and line.endswith("add that to resume"), line
    run_train(tmp_path / "d", data_cache, f"ckpt_path={last}", "data.prepare.spm.vocab_size=200", *advice,
              "trainer.max_steps=20")  # fmt: skip
    assert not (tmp_path / "l").exists()  # the refused runs left no run directory


# --- the latest state is always saved --------------------------------------------------------------------------------

PLATEAU = [  # a run that never improves after its first validation (the weights barely move), and never ends
    "optim.lr=1e-12", "schedule=constant", "trainer.max_steps=100000", "trainer.max_epochs=-1",
    "callbacks.early_stopping=null", "callbacks.heatmaps.num_sentences=0", "trainer.val_check_interval=4",
]  # fmt: skip


def killed_when(run_dir: Path, cache: Path, overrides: list[str], ready, timeout: float = 90) -> int:
    """Start train.py, SIGKILL it once ``ready(step of last.ckpt)`` (or after ``timeout``): last.ckpt's step."""
    log = (run_dir.parent / f"{run_dir.name}.stderr").open("w+")  # a file: a full pipe would stop the run
    proc = subprocess.Popen(train_command(run_dir, cache, *overrides), stdout=subprocess.DEVNULL, stderr=log,
                            env=TRAIN_ENV, cwd=ROOT)  # fmt: skip
    last, step, deadline = run_dir / "checkpoints" / "last.ckpt", -1, time.time() + timeout
    try:
        while time.time() < deadline and proc.poll() is None:
            if last.is_file():
                step = torch.load(last, weights_only=True)["global_step"]  # written whole, then renamed
                if ready(step):
                    break
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    log.seek(0)
    assert proc.returncode == -signal.SIGKILL, log.read()[-3000:]
    return torch.load(last, weights_only=True)["global_step"] if last.is_file() else -1


@pytest.mark.slow
def test_a_run_killed_between_validations_resumes_from_its_last_validation(data_cache, tmp_path):
    run_dir = tmp_path / "run"
    step = killed_when(run_dir, data_cache, PLATEAU, lambda s: s >= 12)
    bests = sorted(int(p.stem.split("-")[1]) for p in (run_dir / "checkpoints").glob("best-*.ckpt"))
    assert bests == [4], bests  # it improved only at its first validation ...
    assert step >= 12 and step % 4 == 0, step  # ... and last.ckpt is its last validation's state, not step 4's
    saved = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    early = {k: v for k, v in saved["callbacks"].items() if k.startswith("RunCheckpoint")}
    assert early and all(v["best_model_path"].endswith("best-4.ckpt") for v in early.values())
    # resumed in the same directory, as the refusal of a fresh run there advises
    last = run_dir / "checkpoints" / "last.ckpt"
    proc = run_train(run_dir, data_cache, *PLATEAU, f"ckpt_path={last}", f"trainer.max_steps={step + 4}")
    assert f"Restoring states from the checkpoint path at {last}" in proc.stdout + proc.stderr
    assert torch.load(last, weights_only=True)["global_step"] == step + 4


@pytest.mark.slow
def test_last_ckpt_is_also_written_every_n_updates_between_validations(data_cache, tmp_path):
    run_dir = tmp_path / "run"
    overrides = [*PLATEAU, "trainer.val_check_interval=1000", "callbacks.checkpoint.last_every_n_train_steps=3"]
    step = killed_when(run_dir, data_cache, overrides, lambda s: s >= 6)
    assert step >= 6 and step % 3 == 0, step
    assert not list((run_dir / "checkpoints").glob("best-*.ckpt"))  # no validation yet: the interval wrote it
