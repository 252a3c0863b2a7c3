"""The tests' runs of a script of ours (``python train.py ...``), each in a process of its own forked from one that has
imported the libraries the scripts share: the same script run as ``__main__`` by a fresh process image in every way a
test sees (its exit status, its output, its files, its process), without each run's seconds of importing torch and
what Lightning imports again. A run whose environment differs from the server's in what those libraries read when
they are imported (thread counts, devices, Python's own switches) is started as a fresh interpreter instead."""

from __future__ import annotations

import atexit
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# the libraries the scripts import at their start, loaded once by the server: not nmt/ (a test may run the scripts of
# another tree, whose nmt/ is its own), and not Lightning itself but what makes its import slow: Lightning sets its
# loggers up as it is imported, by whether logging has a handler by then (Hydra's, in train.py), which only the run
# itself can say
LIBRARIES = ("numpy", "torch", "torch._dynamo", "torchmetrics", "omegaconf", "hydra", "sentencepiece", "sacrebleu",
             "yaml", "matplotlib", "matplotlib.figure", "torch.utils.tensorboard")  # fmt: skip
# the environment a library reads when it is imported (or a thread pool when it starts): a run that sets any of these
# otherwise than the server's environment is not forked
READ_AT_IMPORT = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "CUDA", "NCCL_", "TORCH", "PYTORCH", "PYTHON", "LD_",
                  "ONEDNN_", "DNNL_", "HYDRA_", "MALLOC_", "MPL")  # fmt: skip

SERVER = r"""
import gc, json, os, random, sys

for name in sys.argv[1:]:
    __import__(name)
gc.freeze()  # what is loaded stays: no collection of a run scans it, so no run copies its pages (an exit took 1.3 s)
replies = os.fdopen(int(os.environ.pop("NMT_FORK_REPLIES")), "w")
for line in sys.stdin:
    run = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the run: the script as python runs it, from here on
        os.setsid()  # a group of its own, which a timeout ends whole
        sys.stdin.close()
        replies.close()
        for fd, path in ((0, run["in"] or os.devnull), (1, run["out"]), (2, run["err"])):
            os.dup2(os.open(path, os.O_WRONLY if fd else os.O_RDONLY), fd)
        sys.stdin = sys.__stdin__ = os.fdopen(0, "r")  # the run's own input, read as python reads its stdin
        os.chdir(run["cwd"])
        os.environ.clear()
        os.environ.update(run["env"])
        random.seed()  # as a fresh interpreter draws its seeds
        sys.modules["numpy"].random.seed()
        import runpy

        argv = run["argv"]  # as python runs a script, -m module or -c code: sys.argv and sys.path[0] alike
        if argv[0] == "-m":
            sys.argv, sys.path[0] = ["-m", *argv[2:]], os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
            main = sys.modules["__main__"] = type(sys)("__main__")
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv, sys.path[0] = argv, os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
        sys.exit(0)  # the end of the script; an exception or sys.exit leaves as python leaves
    replies.write(json.dumps({"pid": pid}) + "\n")
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
    replies.flush()
"""


class Server:
    """One server process for this test process, started on the first run: it forks a child per run."""

    def __init__(self, env: dict[str, str]):
        read, write = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, *LIBRARIES], stdin=subprocess.PIPE, text=True,
                                     env=dict(env, NMT_FORK_REPLIES=str(write)), pass_fds=(write,))  # fmt: skip
        os.close(write)
        self.replies = os.fdopen(read)
        atexit.register(self.proc.kill)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def reply(self, timeout: float | None) -> dict:
        if not select.select([self.replies], [], [], timeout)[0]:
            raise TimeoutError
        line = self.replies.readline()
        if not line:
            raise RuntimeError("the tests' fork server ended")
        return json.loads(line)

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None, given: str | None
    ) -> Completed:
        with tempfile.TemporaryDirectory(prefix="nmt-fork-") as folder:
            out, err, stdin = Path(folder, "out"), Path(folder, "err"), None
            out.touch()
            err.touch()
            if given is not None:
                stdin = Path(folder, "in")
                stdin.write_text(given, encoding=locale.getpreferredencoding(False))
            request = {"argv": argv[1:], "cwd": str(cwd), "env": env, "in": stdin and str(stdin), "out": str(out),
                       "err": str(err)}  # fmt: skip
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            pid = self.reply(None)["pid"]  # the first, once the server has imported its libraries
            try:
                code = self.reply(timeout)["exit"]
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                self.reply(10)
                raise subprocess.TimeoutExpired(argv, timeout, read(out), read(err)) from None
            return Completed(argv, code, read(out), read(err))


def read(path: Path) -> str:
    """A run's output as ``subprocess.run(..., text=True)`` gives it: the locale's encoding, universal newlines."""
    return path.read_text(encoding=locale.getpreferredencoding(False))


Completed = subprocess.CompletedProcess  # what subprocess.run gives
_SERVERS: dict[tuple, Server] = {}


def run_script(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None = None, input: str | None = None
) -> Completed:
    """``subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, input=input)``; for
    ``argv`` = ``[sys.executable, script, *args]`` (or ``-m module``, ``-c code``), a child of the server of what
    ``env`` gives the libraries to read at import (started on its first run). A test of what a fresh interpreter
    imports runs its own."""
    if argv[0] != sys.executable or (argv[1].startswith("-") and argv[1] not in ("-m", "-c")):
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, input=input)
    key = tuple(sorted((k, v) for k, v in env.items() if k.startswith(READ_AT_IMPORT)))
    server = _SERVERS.get(key)
    if server is None or not server.alive():
        server = _SERVERS[key] = Server(env)
    return server.run(argv, cwd, env, timeout, input)
