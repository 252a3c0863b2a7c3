"""The hardware settings take effect where they act: oneDNN's primitive cache is as large as conf's onednn_cache says
(the environment's own value first), seen in oneDNN's own account of each primitive it creates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hydra import compose, initialize_config_dir

from conftest import ROOT
from nmt import hardware

# three convolutions on oneDNN, the third of the first one's shape: a cache that holds two primitives or more finds
# the third's (and its reorders') there; a cache of one has evicted them. One interpreter imports torch (as training
# has when it bounds the cache) and forks a child for each case, before any primitive exists: oneDNN reads its
# settings when it builds its first one.
CONVOLUTIONS = """
import json, os, sys, tempfile
import torch
from nmt.hardware import ONEDNN_CACHE, bound_onednn_cache

weight, hits = torch.randn(8, 3, 3, 3), []
for case in sys.argv[1:]:
    capacity, environment = json.loads(case)
    with tempfile.TemporaryFile() as out:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            os.environ["ONEDNN_VERBOSE"] = "all"
            if environment is not None:
                os.environ[ONEDNN_CACHE] = environment
            bound_onednn_cache(None if capacity == "null" else int(capacity))
            for size in (16, 20, 16):
                torch.mkldnn_convolution(torch.randn(1, 3, size, size), weight, None, [0, 0], [1, 1], [1, 1], 1)
            sys.stdout.flush()
            os._exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        out.seek(0)
        text = out.read().decode()
    assert "create:cache_miss" in text, text[-2000:]
    hits.append(text.count("create:cache_hit"))
print(json.dumps(hits))
"""


def cache_hits(*cases: tuple[str, str | None]) -> list[int]:
    """How often oneDNN found a primitive in its cache, for each case: conf's onednn_cache and the environment's own
    value (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != hardware.ONEDNN_CACHE and not k.startswith("ONEDNN_VERBOSE")}
    out = subprocess.run([sys.executable, "-c", CONVOLUTIONS, *map(json.dumps, cases)], capture_output=True, text=True,
                         env=env, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_onednn_s_cache_is_as_large_as_the_config_says_unless_the_environment_sets_it():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        configured = compose(config_name="config").onednn_cache
    assert configured == 64
    ample, one, users, default = cache_hits((str(configured), None), ("1", None), ("1", "64"), ("null", None))
    assert ample > 0  # room for every primitive: the third convolution's are found
    assert one == 0  # one primitive at a time: each is evicted before it comes back
    assert users > 0  # the user's own value stays
    assert default > 0  # null: oneDNN's default (1,024)


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
