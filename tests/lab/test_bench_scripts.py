"""The benchmark scripts stay runnable and indexed: each ``bench/<group>/*.py`` with a ``main`` answers ``--help`` (run
as ``python -m bench.<group>.<script>``) and every import of ``nmt`` in bench/ (one inside a function too, which
``--help`` never runs) names what exists (so a module moved or renamed in ``nmt/`` cannot break a script silently),
each script has its row in ``docs/benchmarks.md`` and its place under its folder's heading there, each folder's map
names its modules, and the overrides the benchmarks train with point the reference experiments at the splits they are
given."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import pytest
from forked import run_script

from conftest import ROOT, TRAIN_ENV

BENCH = ROOT / "bench"
INDEX = ROOT / "docs" / "benchmarks.md"


def has_main(path: Path) -> bool:
    """Whether a module of bench/ is a script: it defines ``main`` (helper modules such as common.py do not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


GROUPS = sorted(p.parent.name for p in BENCH.glob("*/__init__.py"))  # quality, speed, alignment, ...
MODULES = sorted(p for group in GROUPS for p in (BENCH / group).glob("*.py") if p.name != "__init__.py")
SCRIPTS = sorted(p.relative_to(BENCH).as_posix() for p in MODULES if has_main(p))  # "quality/curve.py", ...


def module(script: str) -> str:
    """The module a script runs as: ``quality/curve.py`` is ``bench.quality.curve``."""
    return "bench." + script.removesuffix(".py").replace("/", ".")


# ``python -m bench.<group>.<script> --help`` for every script at once: each script runs as ``__main__`` in a process
# of its own, from the repository root with the working folder first on sys.path, as python -m runs it. The processes
# are forked from one that has loaded the libraries they all share, which a Python start-up per script would load again
# each time (too slow for the fast lane); what the test is about, the imports from nmt/ and bench/, each process makes
# itself.
DRIVER = r"""
import gc, json, os, runpy, shutil, sys, tempfile

sys.path[0] = os.getcwd()  # as for python -m: the working folder, the repository root
for shared in ("numpy", "torch", "omegaconf", "sacrebleu", "lightning", "hydra", "matplotlib.pyplot"):
    __import__(shared)
gc.freeze()  # no child's collection scans what is shared, so none copies its pages
out, children = tempfile.mkdtemp(), {}
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.path.join(out, name), os.O_WRONLY | os.O_CREAT)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.argv = [name, "--help"]  # run_module puts the module's file first
        code = 0
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        except SystemExit as e:  # --help: 0; sys.exit("message"): the message and 1, as python gives them
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    children[name] = pid
answers = {}
for name, pid in children.items():
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
        answers[name] = [code, f.read()]
shutil.rmtree(out)
print(json.dumps(answers), flush=True)
os._exit(0)  # no teardown of the libraries loaded: its second or so measures nothing
"""


def help_answers(root: Path, scripts: list[str]) -> dict[str, tuple[int, str]]:
    """``python -m bench.<group>.<script> --help`` for each of ``scripts``, run in ``root``: its exit status and its
    output."""
    names = {module(script): script for script in scripts}
    proc = run_script([sys.executable, "-c", DRIVER, *names], root, TRAIN_ENV, timeout=300)  # one thread each
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {names[name]: (code, text) for name, (code, text) in json.loads(proc.stdout).items()}


def test_the_scripts_are_found():
    """The glob finds the scripts and leaves the helper modules out, so the tests below are not vacuous; the page
    generator, which measures nothing, lives in docs/generator/."""
    assert {"serving/engine.py", "quality/quality.py", "alignment/alignment.py", "speed/train_speed.py"} <= set(SCRIPTS)
    helpers = {"alignment/alignment_reading.py", "anchors/joeynmt_decode.py", "gpu/gpu_steps.py"}
    assert helpers <= {p.relative_to(BENCH).as_posix() for p in MODULES} and not helpers & set(SCRIPTS)
    assert not (BENCH / "report.py").exists() and not (BENCH / "tables").exists()


# Scripts that define one of common.OPTIONS' names themselves, and why: another meaning or form of the option
OWN_OPTIONS = {
    ("data_scale.py", "--data"), ("data_scale.py", "--json"),  # --baseline runs it with an earlier common.py
    ("encode_speed.py", "--data"),  # the training split alone
    ("engine.py", "--ckpt"), ("engine.py", "--threads"),  # optional (its child processes); several thread counts
    ("joeynmt_transformer.py", "--precision"),  # ours at each of any of Lightning's precisions
    ("profile_step.py", "--sentences"),  # the sentences decoded under the profiler, 500 by default
}  # fmt: skip


def test_the_shared_options_are_defined_once():
    """``--data``, ``--cache``, ``--models``, ``--threads``, ``--json`` and the other options the scripts share come
    from ``common.options``: a script that spells one out again is named (unless OWN_OPTIONS says why)."""
    from bench import common

    shared = {f"--{name}" for name in common.OPTIONS}
    spelt = {
        (path.name, node.args[0].value)
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args
        and isinstance(node.args[0], ast.Constant) and node.args[0].value in shared
    }  # fmt: skip
    assert spelt == OWN_OPTIONS


def test_every_benchmark_script_answers_help():
    """Each script imports what it needs from ``nmt`` and ``bench/`` and builds its options: ``--help`` exits 0 with
    its usage."""
    answers = help_answers(ROOT, SCRIPTS)
    failures = {s: f"exit status {code}: {text.strip()[-600:]}" for s, (code, text) in answers.items()
                if code or "usage:" not in text}  # fmt: skip
    assert answers.keys() == set(SCRIPTS) and not failures, failures


def defined(module: str) -> set[str]:
    """The names a module of ``nmt`` defines or imports at its top level (in ``if`` and ``try`` blocks too), read
    from its source without importing it."""
    found, body = set(), list(ast.parse(Path(importlib.util.find_spec(module).origin).read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            found |= {t.id for t in ast.walk(node) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try):
            body += [*node.body, *node.orelse, *getattr(node, "finalbody", []), *getattr(node, "handlers", [])]
        elif isinstance(node, ast.ExceptHandler):
            body += node.body
    return found


def test_every_import_of_nmt_in_bench_names_what_exists():
    """``from nmt.x import y`` anywhere in bench/ (inside a function, where ``--help`` never reaches it): the module
    ``nmt.x`` exists and defines ``y`` (or ``nmt.x.y`` is a module)."""
    missing = []
    for path in [BENCH / "common.py", *MODULES]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wanted = [(a.name, None) for a in node.names if a.name.split(".")[0] == "nmt"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nmt":
                wanted = [(node.module, a.name) for a in node.names]
            else:
                continue
            for module, name in wanted:
                where = f"{path.name}:{node.lineno}: {module}" + (f".{name}" if name else "")
                if importlib.util.find_spec(module) is None:
                    missing.append(where)
                elif name and name not in defined(module) and importlib.util.find_spec(f"{module}.{name}") is None:
                    missing.append(where)
    assert not missing, missing


def indexed(text: str) -> set[str]:
    """The scripts the index has a place for: named first in a table row, or in a heading."""
    rows = re.findall(r"^\| `bench/([\w/]+\.py)`", text, re.M)
    headings = re.findall(r"^#+ .*`bench/([\w/]+\.py)`", text, re.M)
    return set(rows) | set(headings)


def test_every_script_has_its_place_in_the_benchmark_index():
    """docs/benchmarks.md cannot go stale: a new script needs its row, and a row names a script that exists."""
    listed = indexed(INDEX.read_text(encoding="utf-8"))
    assert not set(SCRIPTS) - listed, f"add a row to docs/benchmarks.md for: {sorted(set(SCRIPTS) - listed)}"
    assert not listed - set(SCRIPTS), f"docs/benchmarks.md lists scripts that are gone: {sorted(listed - set(SCRIPTS))}"


def test_the_scripts_live_in_the_folders_the_index_heads():
    """bench/ holds its groups' folders and what they share; docs/benchmarks.md has a heading for each folder
    (``## Speed: `bench/speed/```), and each script's section sits under its own folder's heading."""
    assert sorted(p.name for p in BENCH.glob("*.py")) == ["__init__.py", "common.py"], "a new script goes in a group"
    text = INDEX.read_text(encoding="utf-8")
    heads = re.findall(r"^## .*`bench/(\w+)/`$", text, re.M)
    assert sorted(heads) == GROUPS, f"docs/benchmarks.md's folder headings {heads}, bench/'s folders {GROUPS}"
    misplaced, group = [], None
    for line in text.splitlines():
        if head := re.match(r"^## (?:.*`bench/(\w+)/`)?", line):
            group = head[1]
        elif section := re.match(r"^### `bench/(\w+)/\w+\.py`", line):
            misplaced += [line] if section[1] != group else []
    assert not misplaced, f"sections under another folder's heading: {misplaced}"


def test_each_folder_s_map_names_its_modules():
    """The docstring of each ``bench/<group>/__init__.py`` (``help(bench.speed)``) names every module of its folder,
    and no module that is not there; a script's stem is used once in bench/, so a stem names one script."""
    wrong = {}
    for group in GROUPS:
        doc = ast.get_docstring(ast.parse((BENCH / group / "__init__.py").read_text(encoding="utf-8"))) or ""
        named = set(re.findall(r"``(\w+)``", doc))
        there = {p.stem for p in MODULES if p.parent.name == group}
        if named != there:
            wrong[group] = {"not named": sorted(there - named), "not there": sorted(named - there)}
    assert not wrong, wrong
    stems = [p.stem for p in MODULES]
    assert len(stems) == len(set(stems)), sorted(s for s in stems if stems.count(s) > 1)


def test_a_recorded_command_is_shown_as_the_one_that_runs_the_script_today(monkeypatch):
    """A result records the command it ran (``bench/curve.py ...`` before the scripts moved into folders); the
    pages show the command that runs that script now, and a command this process records is that one."""
    sys.path.insert(0, str(ROOT / "docs" / "generator"))
    try:
        from report import shown
    finally:
        sys.path.remove(str(ROOT / "docs" / "generator"))
    from bench import common

    for recorded in ("bench/curve.py --plot x.json", "python bench/curve.py --plot x.json",
                     "python -m bench.quality.curve --plot x.json", "bench/quality/curve.py --plot x.json"):
        assert shown(recorded) == "python -m bench.quality.curve --plot x.json", recorded
    assert shown("python train.py seed=2") == "python train.py seed=2"
    main = types.ModuleType("__main__")
    main.__spec__ = importlib.util.find_spec("bench.quality.curve")
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", [str(BENCH / "quality" / "curve.py"), "--plot", "x.json"])
    assert common.provenance()["command"] == "python -m bench.quality.curve --plot x.json"


@pytest.mark.parametrize("experiment", ["tatoeba_luong", "tatoeba_bahdanau", "tatoeba_transformer"])
def test_corpus_overrides_point_the_experiment_at_the_given_splits(experiment, monkeypatch, tmp_path):
    """``common.corpus_overrides(DIR, CACHE)`` makes the reference experiment read the splits in DIR (never the
    download) and prepare them under CACHE."""
    from bench import common

    splits, cache = tmp_path / "splits", tmp_path / "cache"
    cfg = common.compose([f"experiment={experiment}", *common.corpus_overrides(splits, cache)])
    assert cfg.paths.tatoeba_splits == str(splits.resolve())
    assert cfg.data.source._target_ == "nmt.data.sources.Tatoeba"
    assert cfg.data.source.splits == str(splits.resolve())  # what the source reads: paths.tatoeba_splits
    assert cfg.data.cache_dir == str(cache)
