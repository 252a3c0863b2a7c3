"""Training on several machines, tested on one: two "nodes" of one process each on the loopback address, launched
as torchrun launches them on two machines (static rendezvous, --node-rank 0 and 1), with gloo."""

import filecmp
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, TINY_DATA, tiny_model_overrides
from nmt import checkpoint

pytestmark = pytest.mark.slow  # DDP and several torchrun nodes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nodes:
    """``train.py`` on two nodes: each a torchrun of its own, its own run directory, console and cache folder."""

    def __init__(self, work: Path, caches: tuple[Path, Path], *overrides: str):
        self.work, port = work, free_port()
        work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT / 'tests'), OMP_NUM_THREADS="1")
        self.procs = []
        for node, cache in enumerate(caches):
            cmd = [
                sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}", str(ROOT / "train.py"),
                f"hydra.run.dir={self.run_dir(node)}", f"data.cache_dir={cache}", *TINY_DATA, *tiny_model_overrides(),
                "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=1", "trainer.num_nodes=2",
                "trainer.val_check_interval=4", "trainer.check_val_every_n_epoch=null",
                "trainer.enable_progress_bar=false", "trainer.strategy.timeout.seconds=60",
                "callbacks.heatmaps.num_sentences=0", "callbacks.early_stopping=null", "run_test=false",
                "+callbacks.probe._target_=ddp_probe.Probe", f"+callbacks.probe.out={work / 'probe'}", *overrides,
            ]  # fmt: skip
            console = open(work / f"console.{node}", "w")  # noqa: SIM115 - closed with the process
            self.procs.append(subprocess.Popen(cmd, stdout=console, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                               start_new_session=True))  # fmt: skip

    def run_dir(self, node: int) -> Path:
        return self.work / f"node{node}"

    def console(self, node: int) -> str:
        return (self.work / f"console.{node}").read_text()

    def wait(self, timeout: float = 300) -> list[int]:
        return [p.wait(timeout) for p in self.procs]

    def batches(self, rank: int) -> list[dict]:
        return [json.loads(line) for line in (self.work / "probe" / f"batches.{rank}.jsonl").read_text().splitlines()]


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def fresh_preparations(nodes: Nodes) -> int:
    text = nodes.console(0) + nodes.console(1)
    return sum("prepared data in " in line and "reused" not in line for line in text.splitlines())


@pytest.fixture(scope="module")
def epoch_on_two_nodes(tmp_path_factory):
    """One epoch on two nodes that share one cache folder, prepared by this run."""
    work = tmp_path_factory.mktemp("two_nodes")
    nodes = Nodes(work, (work / "cache", work / "cache"), "trainer.max_epochs=1", "trainer.max_steps=-1")
    assert nodes.wait() == [0, 0], nodes.console(0)[-3000:] + nodes.console(1)[-3000:]
    return nodes


def test_each_rank_reads_a_disjoint_share_and_the_weights_agree(epoch_on_two_nodes):
    nodes = epoch_on_two_nodes
    shares = [[i for b in nodes.batches(rank) for i in b["ids"]] for rank in (0, 1)]
    assert shares[0] and shares[1] and not set(shares[0]) & set(shares[1])
    assert all(len(share) == len(set(share)) for share in shares)  # each pair once in the epoch
    assert len(nodes.batches(0)) == len(nodes.batches(1))  # in step: every update sees both
    weights = [(nodes.work / "probe" / f"weights.{rank}").read_text() for rank in (0, 1)]
    assert weights[0] == weights[1]


def test_only_global_rank_0_writes_checkpoints_and_logs(epoch_on_two_nodes):
    nodes = epoch_on_two_nodes
    first, second = nodes.run_dir(0), nodes.run_dir(1)
    assert (first / "checkpoints" / "last.ckpt").is_file() and (first / "tb").is_dir()
    assert not (second / "checkpoints").exists() and not (second / "tb").exists()
    assert checkpoint.read(first / "checkpoints" / "last.ckpt")["global_step"] == len(nodes.batches(0))


def test_a_shared_cache_folder_is_prepared_once(epoch_on_two_nodes):
    assert fresh_preparations(epoch_on_two_nodes) == 1


def test_separate_cache_folders_are_prepared_once_each_and_alike(tmp_path):
    nodes = Nodes(tmp_path, (tmp_path / "cache0", tmp_path / "cache1"), "trainer.max_steps=2")
    assert nodes.wait() == [0, 0], nodes.console(0)[-3000:] + nodes.console(1)[-3000:]
    assert fresh_preparations(nodes) == 2
    [a], [b] = (list((tmp_path / c / "prepared").glob("*/train")) for c in ("cache0", "cache1"))
    assert a.parent.name == b.parent.name  # the same cache key ...
    assert not filecmp.dircmp(a, b).diff_files  # ... and the same bytes: both nodes train on the same batches


def test_resume_on_two_nodes_reads_the_batches_of_an_uninterrupted_run(epoch_on_two_nodes, tmp_path):
    cache = epoch_on_two_nodes.work / "cache"
    whole = Nodes(tmp_path / "whole", (cache, cache), "trainer.max_steps=8")
    assert whole.wait() == [0, 0]
    first = Nodes(tmp_path / "first", (cache, cache), "trainer.max_steps=4")
    assert first.wait() == [0, 0]
    last = first.run_dir(0) / "checkpoints" / "last.ckpt"
    resumed = Nodes(tmp_path / "resumed", (cache, cache), "trainer.max_steps=8", f"ckpt_path={last}")
    assert resumed.wait() == [0, 0], resumed.console(0)[-3000:]
    for rank in (0, 1):
        after = [b for b in whole.batches(rank) if b["step"] >= 4]
        assert resumed.batches(rank) == after and len(after) == 4


def test_a_node_that_dies_stops_the_other_with_one_line_and_a_checkpoint_to_resume(epoch_on_two_nodes, tmp_path):
    cache = epoch_on_two_nodes.work / "cache"
    nodes = Nodes(tmp_path, (cache, cache), "trainer.max_steps=100000", "trainer.max_epochs=-1")
    last = nodes.run_dir(0) / "checkpoints" / "last.ckpt"
    deadline = time.monotonic() + 240
    while not last.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert last.exists(), nodes.console(0)[-3000:]
    for pid in [nodes.procs[1].pid, *descendants(nodes.procs[1].pid)]:  # the whole second machine
        os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    code = nodes.procs[0].wait(120)  # well inside the strategy's timeout (60 s here) and its grace
    assert code != 0 and time.monotonic() - started < 90
    console = nodes.console(0)  # train.py's one line; after it torchrun's own report of a failed worker
    assert console.count("Traceback") == console.count("ChildFailedError:") <= 1, console[-3000:]
    errors = [line for line in console.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "another node of the run stopped or cannot be reached" in errors[0], console[-3000:]
    assert f"launch every node again as before, adding ckpt_path={last} " in errors[0]
    ckpt = checkpoint.read(last)  # whole: written atomically, loads, and training goes on from it
    step = ckpt["global_step"]
    assert step >= 4 and torch.is_tensor(next(iter(ckpt["state_dict"].values())))
    again = Nodes(tmp_path / "again", (cache, cache), f"trainer.max_steps={step + 2}", f"ckpt_path={last}")
    assert again.wait() == [0, 0], again.console(0)[-3000:]  # the advice, followed
    assert checkpoint.read(again.run_dir(0) / "checkpoints" / "last.ckpt")["global_step"] == step + 2
