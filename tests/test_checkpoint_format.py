"""Checkpoints written before nmt/ was regrouped into folders (format 3, classes named by their old module paths)
still load, translate and resume."""

from __future__ import annotations

import lzma
import shutil

import pytest
import torch

from conftest import ROOT, run_train
from nmt import checkpoint
from nmt.cli import translate as translate_cli
from nmt.models.transformer import TransformerDecoder, TransformerEncoder

# tests/data/format3_transformer.ckpt.xz: `python train.py` at commit 9304ced (format 3) with these settings,
# trainer.max_steps=8 trainer.val_check_interval=8 trainer.check_val_every_n_epoch=null run_test=false; last.ckpt
# compressed with xz -9 (1.1 MB -> 0.3 MB)
SETTINGS = [
    "data.source.train_size=600",
    "data.source.valid_size=24",
    "data.source.test_size=24",
    "data.prepare.spm.vocab_size=300",
    "data.prepare.spm.joint=true",
    "data.max_tokens=1024",
    "model=transformer",
    "model.emb_size=16",
    *(f"model.{part}.{k}={v}" for part in ("encoder", "decoder") for k, v in (("num_layers", 1), ("ff_size", 32))),
    *(f"model.{part}.heads=2" for part in ("encoder", "decoder")),
]


@pytest.fixture(scope="module")
def old_ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("format3") / "last.ckpt"
    path.write_bytes(lzma.decompress((ROOT / "tests" / "data" / "format3_transformer.ckpt.xz").read_bytes()))
    return path


def test_the_committed_checkpoint_is_of_the_old_format(old_ckpt):
    raw = torch.load(old_ckpt, map_location="cpu", weights_only=True)
    assert raw["nmt"]["format"] == 3
    assert raw["hyper_parameters"]["model"]["encoder"]["_target_"] == "nmt.transformer.TransformerEncoder"


def test_a_format_3_checkpoint_loads_with_its_classes_at_their_new_paths(old_ckpt):
    loaded = checkpoint.load_checkpoint(old_ckpt)
    assert isinstance(loaded.model.encoder, TransformerEncoder) and isinstance(loaded.model.decoder, TransformerDecoder)
    settings = loaded.checkpoint.settings
    assert settings["model"]["decoder"]["_target_"] == "nmt.models.transformer.TransformerDecoder"
    assert loaded.checkpoint.step == 8
    # every module path it names is one that imports now
    text = repr(settings)
    assert "nmt.transformer." not in text and "nmt.callbacks." not in text and "nmt.schedules." not in text


def test_moved_renames_module_paths_only():
    old = {"a": ["nmt.decoders.LuongDecoder", {"_target_": "nmt.callbacks.RunCheckpoint"}], "b": "nmt.data.x", "c": 3}
    assert checkpoint.moved(old) == {
        "a": ["nmt.models.decoders.LuongDecoder", {"_target_": "nmt.training.callbacks.RunCheckpoint"}],
        "b": "nmt.data.x",
        "c": 3,
    }


def test_every_moved_module_path_imports_now():
    """Each module a moved path is renamed to exists (a move of a module listed there shows here)."""
    import importlib.util

    for old, new in checkpoint.MOVED.items():
        assert importlib.util.find_spec(new.rstrip(".")) is not None, (old, new)
        assert not new.startswith(old), (old, new)  # renamed once, never again into a path of its own prefix


def test_a_format_3_checkpoint_translates(old_ckpt, tmp_path, capsys):
    src = tmp_path / "in.fr"
    src.write_text("Le chat dort.\nJe vois la maison.\n")
    assert translate_cli.main(["--ckpt", str(old_ckpt), "--input", str(src), "--beam-size", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all(isinstance(line, str) for line in out)


@pytest.mark.slow
def test_a_format_3_checkpoint_resumes(old_ckpt, tmp_path):
    """train.py ckpt_path=<old checkpoint> goes on from its step 8 to 12 and writes the new format."""
    resumed = tmp_path / "resumed.ckpt"
    shutil.copy(old_ckpt, resumed)
    run_dir = tmp_path / "run"
    run_train(run_dir, tmp_path / "cache", *SETTINGS, f"ckpt_path={resumed}", "trainer.max_steps=12", tiny=False)
    last = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["global_step"] == 12 and last["nmt"]["format"] == checkpoint.FORMAT
    assert last["hyper_parameters"]["model"]["encoder"]["_target_"] == "nmt.models.transformer.TransformerEncoder"
