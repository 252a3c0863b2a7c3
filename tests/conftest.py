"""Shared fixtures: tiny toy data and tiny models, trained once per test session through train.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TINY_MODEL = ["model.emb_size=32", "model.enc_hidden=32", "model.dec_hidden=48", "model.attn_hidden=32", "model.readout_size=32"]
TINY_DATA = ["data.toy.train_size=600", "data.toy.valid_size=24", "data.toy.test_size=24", "data.spm.vocab_size=300", "data.max_tokens=1024"]


def run_train(run_dir: Path, cache: Path, *overrides: str, check: bool = True, timeout: int = 300, toy: bool = True) -> subprocess.CompletedProcess:
    """The real train.py through Hydra with tiny settings."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"hydra.run.dir={run_dir}",
        f"data.cache_dir={cache}",
        *(TINY_DATA if toy else []),
        *TINY_MODEL,
        "trainer.max_steps=16",
        "trainer.val_check_interval=8",
        "trainer.check_val_every_n_epoch=null",
        "trainer.log_every_n_steps=4",
        "trainer.enable_progress_bar=false",
        "trainer.accelerator=cpu",
        "callbacks.heatmaps.num_sentences=2",
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
