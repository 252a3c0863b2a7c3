"""What the test suite catches: each rule a slow test guards, broken on purpose, and whether the suite fails.

    python -m bench.suite.mutations [--at REV] [--label NAME] [--only NAME ...] [--json bench/results/mutations.json]

Each mutation of :data:`MUTATIONS` replaces one line of the package with a wrong one (an average divided by one too
many, ranks reading the same share, a resumed run started afresh...) in a checkout of ``--at`` (a git worktree in a
temporary folder; default HEAD, so uncommitted changes are not measured), then runs the test files that guard that
rule, stopping at the first failure. A mutation is **killed** when a test fails, and the failing test then passes
on the unmutated code (else the run counts as an error: that test fails without the mutation too, on this machine);
it **survived** when every test passed. Run it at two commits, before and after a change to the suite (making it
faster, moving checks between tests), with the same list: the change lost nothing where the later commit kills at
least as many. A guard file that the commit does not have is left out of its run; a mutation whose line the commit
does not hold is "not applicable" there. The runs are kept by --label in one JSON, so the docs show them side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, git, options, provenance, table, write_json

PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-n", "0", "-p", "no:cacheprovider"]  # one process
FAILED = re.compile(r"^FAILED (\S+::\S+)", re.M)  # pytest's short summary: the first failing test


@dataclass(frozen=True)
class Mutation:
    """One rule broken in one line: ``old`` (found once in the first of ``files`` the commit has) becomes ``new``."""

    name: str
    rule: str
    files: tuple[str, ...]
    old: str
    new: str
    guards: tuple[str, ...]  # the test files that guard the rule (their slow tests among them)


MUTATIONS = (
    Mutation("averaging", "checkpoint averaging divides by the number of checkpoints", ("nmt/inference/averaging.py",),
             "state = {k: (v / len(paths)).to(", "state = {k: (v / (len(paths) + 1)).to(",
             ("tests/test_quality_tools.py",)),
    Mutation("ensemble", "an ensemble decodes with the mean of its members' log-probabilities",
             ("nmt/inference/ensemble.py",), "return torch.stack(logps).mean(0), new,",
             "return torch.stack(logps).sum(0), new,", ("tests/test_quality_tools.py",)),
    Mutation("val_bleu", "validation BLEU pairs each translation with its own reference", ("nmt/training/module.py",),
             "out, ref = [hyps[i] for i in order], [[refs.tgt[i] for i in order]]",
             "out, ref = [hyps[i] for i in order], [[refs.tgt[i] for i in order[::-1]]]", ("tests/test_train.py",)),
    Mutation("ddp_shares", "each DDP rank reads its own share of the batches", ("nmt/data/batching.py",),
             "return batches[self.rank : usable : self.world_size]", "return batches[0 : usable : self.world_size]",
             ("tests/test_batching.py", "tests/test_multinode.py", "tests/test_train.py")),
    Mutation("server_lines", "each request to the batching server gets its own lines back", ("nmt/serving/batcher.py",),
             "job.future.set_result(results[start : start + len(job.lines)])",
             "job.future.set_result(results[: len(job.lines)])", ("tests/test_serve.py",)),
    Mutation("annealing", "schedule=budgeted anneals the rate to the end of the budget", ("nmt/training/schedules.py",),
             "return self.final + (top - self.final) * left", "return top", ("tests/test_schedules.py",)),
    Mutation("heatmaps", "the alignment heatmaps reach TensorBoard", ("nmt/training/callbacks.py",),
             'writer.add_figure(f"alignment/{i}", fig, step)', "writer.flush()", ("tests/test_train.py",)),
    Mutation("resume", "ckpt_path resumes training where it stopped", ("nmt/training/run.py",),
             "trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)",
             "trainer.fit(module, datamodule=datamodule, ckpt_path=None)",
             ("tests/test_train.py", "tests/test_resume.py")),
    Mutation("ct2_embeddings", "the CTranslate2 export scales the embeddings as the model does",
             ("nmt/ct2_export.py", "nmt/export.py"), "layer_spec.scale_embeddings = True",
             "layer_spec.scale_embeddings = False", ("tests/test_ctranslate2.py",)),
    Mutation("guided_loss", "guided alignment adds its loss (pulls attention towards the links)",
             ("nmt/training/module.py",), "loss = loss + self.align_weight * align",
             "loss = loss - self.align_weight * align", ("tests/test_guided.py",)),
)  # fmt: skip


def pytest(tree: Path, args: list[str], timeout: float) -> tuple[int | None, str, float]:
    """pytest in ``tree`` (its own ``nmt`` first on the path): exit status (None past ``timeout``), output, seconds."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    try:
        done = subprocess.run([*PYTEST, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout + done.stderr, time.perf_counter() - start
    except subprocess.TimeoutExpired as e:
        return None, str(e.stdout or ""), time.perf_counter() - start


def run(tree: Path, m: Mutation, timeout: float) -> dict:
    """``m`` applied in ``tree``, its guards run, the file restored: what happened and in how many seconds."""
    found = [f for f in m.files if (tree / f).is_file() and (tree / f).read_text().count(m.old) == 1]
    guards = [g for g in m.guards if (tree / g).is_file()]
    row = {"name": m.name, "rule": m.rule, "guards": guards}
    if not found or not guards:
        return row | {"status": "not applicable", "why": "no such line" if not found else "no guard file"}
    path = tree / found[0]
    original = path.read_text()
    try:
        path.write_text(original.replace(m.old, m.new))
        code, out, seconds = pytest(tree, guards, timeout)
    finally:
        path.write_text(original)
    row |= {"file": found[0], "seconds": round(seconds, 1), "exit": code}
    if code == 0:
        return row | {"status": "survived"}
    failed = FAILED.search(out)
    if code != 1 or not failed:
        return row | {"status": "error", "why": out.strip().splitlines()[-1:] or ["timed out"]}
    clean, _, _ = pytest(tree, [failed[1]], timeout)  # the test that failed, on the unmutated code
    status = "killed" if clean == 0 else "error"
    return row | {"status": status, "by": failed[1], **({} if clean == 0 else {"why": "fails unmutated too"})}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--at", default="HEAD", help="the commit whose suite is measured (default: %(default)s)")
    p.add_argument("--label", help="the run's name in the JSON (default: the commit's short hash)")
    p.add_argument("--only", nargs="+", choices=[m.name for m in MUTATIONS], help="these mutations alone")
    p.add_argument("--timeout-min", type=float, default=30.0, help="minutes per run of the guards (default: 30)")
    options(p, "json")
    args = p.parse_args()
    commit = git("rev-parse", "--verify", "--quiet", f"{args.at}^{{commit}}")
    if not commit:
        p.error(f"--at {args.at}: no such commit in {ROOT}")
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutations: stopped (SIGTERM); the worktree is removed"))
    with tempfile.TemporaryDirectory(prefix="nmt-mutations-") as tmp:
        tree = Path(tmp) / "tree"
        git("worktree", "add", "--detach", str(tree), commit)
        if not (tree / "nmt").is_dir():
            sys.exit(f"error: git worktree add {tree} {commit[:7]} failed (is {ROOT} a git checkout?)")
        try:
            rows = []
            for m in chosen:
                rows.append(run(tree, m, args.timeout_min * 60))
                print(table([rows[-1]], ["name", "status", "seconds", "by"]), flush=True)
        finally:
            git("worktree", "remove", "--force", str(tree))
    kept = json.loads(Path(args.json).read_text())["runs"] if Path(args.json).is_file() else {}
    label = args.label or commit[:7]
    killed = sum(r["status"] == "killed" for r in rows)
    kept[label] = {"commit": commit, "killed": killed, "mutations": rows, "provenance": provenance()}
    print(table(rows, ["name", "status", "seconds", "by"]))
    print(f"{label} ({commit[:7]}): {killed} of {len(rows)} killed")
    write_json(args.json, {"runs": kept})


if __name__ == "__main__":
    main()
