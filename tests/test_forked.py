"""The tests' forked runs of a script (tests/forked.py) are what a fresh ``python`` gives: the same exit status and
output, arguments, import path, folder and environment, and the libraries' import-time state left to the run."""

import subprocess
import sys

import pytest
from forked import run_script

from conftest import ROOT, TRAIN_ENV

pytestmark = pytest.mark.slow  # starts a server (an import of torch) of its own

SCRIPT = """
import json, logging, os, sys
logging.basicConfig(level=logging.INFO)  # a handler before Lightning's import: its loggers propagate to it
import lightning
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                  "env": os.environ.get("NMT_FORK_PROBE"), "stdin": sys.stdin.read(),
                  "propagate": logging.getLogger("lightning.pytorch").propagate}))
sys.exit(sys.argv[-1] if sys.argv[-1] != "0" else 0)
"""


@pytest.mark.parametrize("code", ["0", "bad input: one line"])
def test_a_forked_run_is_a_fresh_interpreter_s_run(tmp_path, code):
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    env = dict(TRAIN_ENV, NMT_FORK_PROBE="x")
    for argv in ([sys.executable, str(script), "a b", code], [sys.executable, "-c", SCRIPT, "a b", code]):
        fresh = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, input="in\n", timeout=120)
        forked = run_script(argv, tmp_path, env, timeout=120, input="in\n")
        assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
        assert '"propagate": true' in fresh.stdout and '"stdin": "in\\n"' in fresh.stdout


def test_a_run_past_its_timeout_is_ended_as_subprocess_ends_it(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        run_script([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], ROOT, TRAIN_ENV,
                   timeout=3)  # fmt: skip
    assert run_script([sys.executable, "-c", "print('next')"], ROOT, TRAIN_ENV).stdout == "next\n"  # still serves
