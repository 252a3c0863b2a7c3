"""The hardware settings take effect where they act: oneDNN's primitive cache is as large as conf's onednn_cache says
(the environment's own value first), seen in oneDNN's own account of each primitive it creates."""

from __future__ import annotations

import os
import subprocess
import sys

from hydra import compose, initialize_config_dir

from conftest import ROOT
from nmt import hardware

# three convolutions on oneDNN, the third of the first one's shape: a cache that holds two primitives or more finds
# the third's (and its reorders') there; a cache of one has evicted them
CONVOLUTIONS = """
import sys
from nmt.hardware import bound_onednn_cache
bound_onednn_cache(None if sys.argv[1] == "null" else int(sys.argv[1]))
import torch
weight = torch.randn(8, 3, 3, 3)
for size in (16, 20, 16):
    torch.mkldnn_convolution(torch.randn(1, 3, size, size), weight, None, [0, 0], [1, 1], [1, 1], 1)
"""


def cache_hits(capacity: str, environment: str | None = None) -> int:
    """How often oneDNN found a primitive in its cache, with conf's onednn_cache=``capacity``."""
    env = {k: v for k, v in os.environ.items() if k != hardware.ONEDNN_CACHE} | {"ONEDNN_VERBOSE": "all"}
    if environment is not None:
        env[hardware.ONEDNN_CACHE] = environment
    out = subprocess.run([sys.executable, "-c", CONVOLUTIONS, capacity], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "create:cache_miss" in out.stdout, out.stderr[-2000:]
    return out.stdout.count("create:cache_hit")


def test_onednn_s_cache_is_as_large_as_the_config_says_unless_the_environment_sets_it():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        configured = compose(config_name="config").onednn_cache
    assert configured == 64
    assert cache_hits(str(configured)) > 0  # room for every primitive: the third convolution's are found
    assert cache_hits("1") == 0  # one primitive at a time: each is evicted before it comes back
    assert cache_hits("1", environment="64") > 0  # the user's own value stays
    assert cache_hits("null") > 0  # null: oneDNN's default (1,024)


def test_trainer_devices_a_cpu_cannot_take_are_refused_in_one_line(monkeypatch):
    """#82 §3: Lightning's CPU takes a number of processes; GPU indices (a list, "0,1") or a word fail inside
    Lightning after preparation. A GPU's indices past the count are refused alike (no GPU here: faked)."""
    import pytest
    from omegaconf import OmegaConf

    for devices in ([0, 1], "0,1", "two", True):
        trainer = OmegaConf.create({"accelerator": "cpu", "devices": devices})
        with pytest.raises(ValueError, match=r"^trainer.devices=.*: on the CPU, the number of processes to train with"):
            hardware.check_trainer(trainer)
    for devices in (1, 2, "2", "auto"):
        hardware.check_trainer(OmegaConf.create({"accelerator": "cpu", "devices": devices}))
    monkeypatch.setattr(hardware.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(hardware.torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(hardware.torch.cuda, "get_device_name", lambda i: "a GPU")
    for devices, missing in (([0, 2], "2"), ("1,3", "3"), (3, None)):
        with pytest.raises(ValueError, match=rf"^trainer.devices={devices if missing is None else '.*'}: "):
            hardware.check_trainer(OmegaConf.create({"accelerator": "gpu", "devices": devices}))
    for devices in ([0, 1], "0,1", 2):
        hardware.check_trainer(OmegaConf.create({"accelerator": "gpu", "devices": devices}))
