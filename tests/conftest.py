"""Shared fixtures: tiny toy data and tiny models, trained once per test session through train.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TINY_MODEL = ["model.emb_size=32", "model.enc_hidden=32", "model.dec_hidden=48", "model.readout_size=32"]


def tiny_model_overrides(*overrides: str) -> list[str]:
    """TINY_MODEL plus the attention size where the chosen model has one."""
    return TINY_MODEL + ([] if "model=luong" in overrides else ["model.attn_hidden=32"])


TINY_DATA = [
    "data.toy.train_size=600",
    "data.toy.valid_size=24",
    "data.toy.test_size=24",
    "data.spm.vocab_size=300",
    "data.max_tokens=1024",
]


def run_train(
    run_dir: Path, cache: Path, *overrides: str, check: bool = True, timeout: int = 300, toy: bool = True
) -> subprocess.CompletedProcess:
    """The real train.py through Hydra with tiny settings."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"hydra.run.dir={run_dir}",
        f"data.cache_dir={cache}",
        *(TINY_DATA if toy else []),
        *tiny_model_overrides(*overrides),
        "trainer.max_steps=16",
        "trainer.val_check_interval=8",
        "trainer.check_val_every_n_epoch=null",
        "trainer.log_every_n_steps=4",
        "trainer.enable_progress_bar=false",
        "trainer.accelerator=cpu",
        "callbacks.heatmaps.num_sentences=2",
        "callbacks.throughput.window_size=4",
        *overrides,
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def trained(tmp_path_factory, data_cache) -> dict[str, Path]:
    """One tiny trained run per model: name -> run directory."""
    runs = {}
    for name in ("bahdanau", "luong"):
        run_dir = tmp_path_factory.mktemp(f"run_{name}")
        run_train(run_dir, data_cache, f"model={name}")
        runs[name] = run_dir
    return runs


def tiny_model(name: str, src_vocab: int = 40, tgt_vocab: int = 30, **sizes):
    """A small untrained model of either kind (dropout off unless given)."""
    from nmt.seq2seq import build_model

    base = dict(
        emb_size=16, enc_hidden=12, enc_layers=1, dec_hidden=20, readout_size=16, dropout=0.0, tie_embeddings=False
    )
    base |= dict(attn_hidden=10) if name == "bahdanau" else dict(dec_layers=1, heads=1)
    return build_model(name=name, src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, **(base | sizes))


def data_settings(source: str = "toy", **settings) -> dict:
    """``conf/data/<source>.yaml`` as keyword arguments of the DataModule, with ``settings`` merged in."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"data={source}"])
    out = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if not k.startswith("_")}
    for k, v in settings.items():
        out[k] = out[k] | v if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def datamodule(source: str = "toy", **settings):
    from nmt.data.datamodule import TranslationDataModule

    return TranslationDataModule(**data_settings(source, **settings))
