"""Every command and code block of the README and the docs works as a reader types it (#65): a name that moves, an
option that goes, a key that is renamed or a value out of range breaks a test here, not a reader.

- Each command of ours (``python train.py``, ``translate.py``, ..., ``python -m bench.<group>.<script>``,
  ``docs/generator/report.py``, the ``nmt-*`` commands), in a ``bash`` block or an inline code span, is checked as its
  program would check it before doing any work: ``train.py``'s overrides composed by Hydra and checked (keys, ranges,
  words, the rules between keys); every other command's options parsed by its own parser, with the rules between its
  options.
- A ``bash`` block marked ``<!-- run: OVERRIDES -->`` is run for real, each ``train.py`` command of it with
  ``OVERRIDES`` added (tiny budgets: the data and the settings as written).
- ``python`` blocks run, a page's in order in one interpreter, in a folder holding the files they name (tiny
  checkpoints of the test session, a few lines of text).
- A block marked ``<!-- not run: REASON -->`` is left out, with its reason; other programs (``pip``, ``curl``, ...)
  are left out with the reason in :data:`EXTERNAL`. Anything else fails, naming the page and the line.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from forked import run_script

from conftest import ROOT, TRAIN_ENV

# every page a reader types from; the provenance page records what each result file's run was given on its day (the
# options of that day), not a command to type: docs/benchmarks.md gives each script's command today
RECORDS = {ROOT / "docs" / "provenance.md"}
PAGES = [ROOT / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts and p not in RECORDS)]
COMMANDS = {f"nmt-{name}": f"{name}.py" for name in ("train", "translate", "align", "serve", "export", "average")}
EXTERNAL = {  # programs the docs name that are not ours: why a test does not run them
    "pip": "installs packages: what CI's first step does",
    "tensorboard": "a server that runs until it is stopped",
    "curl": "asks a running serve.py; tests/test_serve.py sends the same requests",
    "ruff": "the linter CI runs",
    "echo": "gives a pipe its input",
    "python -m pytest": "the test suite itself",
    "python -m sphinx": "the docs build CI runs",
}
LAUNCHERS = {"torchrun", "srun"}  # start train.py on many machines: their train.py command is checked
UNWRITTEN = {  # commands of a walkthrough that only work once the reader has written what it adds
    ("docs/developing.md", "python train.py model=luong model.decoder.score=cosine"):
        "the contributor guide's worked example: model.decoder.score is the setting it adds",
}  # fmt: skip
HYDRA_FLAGS = {"-m": 0, "--multirun": 0, "--resolve": 0, "--cfg": 1, "-c": 1, "--package": 1, "-p": 1}
PLACEHOLDER = re.compile(r"<(?=\S)[^<>\n]*?(?<=\S)>")  # <run>, <JoeyNMT 2.3 venv>; not "< in.fr > out.en"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str  # bash, python, ...; "inline" for a code span
    text: str
    mark: tuple[str, str] | None  # ("run", overrides) or ("not run", reason)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


# <!-- not run: REASON --> above a fence; <!-- continues --> above a Python block that goes on from the one before
MARK = r"(?:<!--[ \t]*(not run|run|continues):?[ \t]*([^\n]*?)[ \t]*-->[ \t]*\n)?"
FENCE = re.compile(MARK + r"^```(\S*)[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
NAME = re.compile(r"^nmt(\.\w+)+(?<!\.json)(?<!\.yaml)$")  # a module or a name in one: nmt.inference.pair_links
FILE = re.compile(r"^(nmt|bench|conf|docs|tests)/[\w/.-]+\.(py|yaml|md|json|ipynb)$")  # a file of the checkout


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` and its inline code spans that start with a command of ours."""
    text = page.read_text(encoding="utf-8")
    found, fenced = [], []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start(3)) + 1
        found.append(Block(page, line, m.group(3), m.group(4), (m.group(1), m.group(2)) if m.group(1) else None))
        fenced.append((m.start(), m.end()))
    for m in INLINE.finditer(text):
        span = " ".join(m.group(1).split())
        inside = any(a <= m.start() < b for a, b in fenced)
        named = re.fullmatch(r"python \S+\.py|python -m bench(\.\w+)+|nmt-\w+", span)  # a program named, not a command
        if not inside and not named and re.match(r"(python (\S+\.py|-m \S+)|nmt-\w+)( |$)", span):
            found.append(Block(page, text.count("\n", 0, m.start()) + 1, "inline", span, None))
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def commands(block: Block) -> list[tuple[list[str], bool]]:
    """The simple commands of a shell block: (argv, elided: the docs left options out with "...")."""
    text = PLACEHOLDER.sub("PLACEHOLDER", block.text.replace("\\\n", " "))
    out = []
    for line in text.splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split, lex.commenters = True, "#"
        words, current = list(lex), []
        for word in [*words, ";"]:
            if word in (";", "&&", "||", "|", "&"):
                argv = [w for w in current if w not in ("do", "then")]
                if argv and argv[0] not in ("for", "done", "fi", "if"):
                    out.append(argv)
                current = []
            else:
                current.append(word)
    result = []
    for argv in out:
        argv = drop_redirections(argv)
        while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):  # VAR=value before the command
            argv = argv[1:]
        elided = "..." in argv
        argv = [unbracketed(w) for w in argv if w != "..."]
        result.append(([w for w in argv if w], elided))
    return result


def drop_redirections(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("<", ">", ">>", "2>", "2>>"):
            skip = True
        elif not re.match(r"^\d?>&\d$", word):
            kept.append(word)
    return kept


def unbracketed(word: str) -> str:
    """``[--threads`` and ``2]`` of the docs' optional parts as the words typed; ``key=[a,b]`` kept."""
    if word.startswith("["):
        word = word[1:]
    if word.endswith("]") and "=[" not in word:
        word = word[:-1]
    return word


# --- checking a command as its program does, before any work ---------------------------------------------------


class Parsed(Exception):
    def __init__(self, parsed: argparse.Namespace):
        super().__init__()
        self.parsed = parsed


def parse_only(script: Path, args: list[str], elided: bool, monkeypatch) -> None:
    """``python script args`` (``python -m bench.<group>.<script> args`` for a benchmark) up to its parsing of the
    command line, and no further: an option it does not have, or a value its parser refuses, fails with the parser's
    message. A command of ours is parsed by its own ``_parse_args`` and its rules between options (``NEEDS``) are
    applied; where the docs elided options ("..."), a required one may be among them."""
    module = None
    if script.parent == ROOT and (ROOT / "nmt" / "cli" / script.name).is_file():
        module = importlib.import_module(f"nmt.cli.{script.stem}")
    try:
        if module is not None and hasattr(module, "_parse_args"):
            parsed = module._parse_args(args)
            if hasattr(module, "NEEDS") and not elided:
                from nmt.cli.options import refuse_ignored

                refuse_ignored(parsed, module.NEEDS)
            return
        run_to_parsing(script, args, monkeypatch)
    except SystemExit as e:
        if e.code == 0 and {"--help", "-h"} & set(args):  # the help printed, as asked
            return
        if elided and e.code == 2:
            return
        raise


def run_to_parsing(script: Path, args: list[str], monkeypatch) -> None:
    """Run ``script`` as ``python script args`` (a benchmark as ``python -m bench.<group>.<script> args``) and stop it
    once its parser has read the command line."""
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        raise Parsed(original(self, args, namespace))

    with monkeypatch.context() as patched:  # undone before the block's next command
        patched.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        patched.setattr(sys, "argv", [str(script), *args])
        # a benchmark runs as python -m, which puts the working folder (the repository root) first on sys.path; the
        # file is run by its path, as pytest's import hook cannot hand runpy a module named test_* (test_lanes)
        patched.syspath_prepend(str(ROOT if script.is_relative_to(ROOT / "bench") else script.parent))
        try:
            runpy.run_path(str(script), run_name="__main__")
        except Parsed:
            return
    raise AssertionError(f"{script.name} {shlex.join(args)}: never parsed its command line")


def check_train(args: list[str]) -> None:
    """``train.py args`` composed and checked as ``train.py`` does before preparing anything."""
    overrides, multirun, skip = [], False, 0
    for word in args:
        if skip:
            skip -= 1
        elif word in HYDRA_FLAGS:
            skip, multirun = HYDRA_FLAGS[word], multirun or word in ("-m", "--multirun")
        elif word.startswith("-"):
            raise AssertionError(f"train.py {word}: not an option of train.py (Hydra's)")
        elif "PLACEHOLDER" not in word and not word.startswith("hydra."):
            overrides.append(word)
    runs = [overrides]
    if multirun:  # a sweep: each value of each comma list
        runs = [[]]
        for o in overrides:
            key, _, value = o.partition("=")
            values = value.split(",") if "," in value and "[" not in value else [value]
            runs = [[*r, f"{key}={v}"] for r in runs for v in values]
    for run in runs:
        checked(tuple(run))


@functools.cache  # the pages repeat commands (a third of them): each set of overrides is composed and checked once
def checked(run: tuple[str, ...]) -> None:
    """``train.py`` with the overrides ``run``, composed (as Hydra does: :func:`test_settings.composed`) and checked
    (an error raised, never cached)."""
    from test_settings import GROUPS, composed

    from nmt.config_keys import check_keys
    from nmt.settings import check_config

    groups = {group for group in GROUPS if "/" not in group}  # conf/'s top-level groups
    cfg = composed(run)
    reference = [o for o in run if not o.startswith("++")]
    check_keys(cfg, run, groups, lambda r=reference: composed(r))
    check_config(cfg)


STAND_INS = {"DIR", "WORK", "VENV"}  # the docs' placeholders of a folder: a folder holding the Tatoeba split files


def stand_in(argv: list[str], folder: Path) -> list[str]:
    """``argv`` with each placeholder of a folder replaced by ``folder``, and each file it names that this checkout
    lacks (a corpus, its links) made, empty, in the current folder (the test's)."""
    out = []
    for word in argv:
        if word in STAND_INS:
            word = str(folder)
        value = word.split("=", 1)[-1]
        if re.fullmatch(r"[\w./-]+\.(tsv|align|fr|en|gold|txt)", value) and not (ROOT / value).exists():
            Path(value).parent.mkdir(parents=True, exist_ok=True)
            Path(value).touch()
        out.append(word)
    return out


def check(argv: list[str], elided: bool, monkeypatch) -> str | None:
    """Check one command; the reason where it is someone else's program."""
    name = argv[0]
    if name in COMMANDS:
        argv = ["python", COMMANDS[name], *argv[1:]]
    if name in LAUNCHERS:
        script = next(i for i, w in enumerate(argv) if w.endswith(".py"))
        argv = ["python", *argv[script:]]
    if argv[0] in ("python", "python3") and len(argv) > 2 and argv[1] == "-m" and argv[2].startswith("bench."):
        if "PLACEHOLDER" in argv[2]:  # python -m bench.<group>.<script>: a script named in general
            return "a script named in general"
        script = ROOT.joinpath(*argv[2].split(".")).with_suffix(".py")
        assert script.is_file(), f"python -m {argv[2]}: no such benchmark"
        parse_only(script, argv[3:], elided, monkeypatch)
        return None
    if argv[0] in ("python", "python3") and len(argv) > 1 and argv[1] == "-m":
        reason = EXTERNAL.get(f"python -m {argv[2]}")
        assert reason, f"python -m {argv[2]}: neither ours nor in EXTERNAL"
        return reason
    if argv[0] not in ("python", "python3"):
        assert name in EXTERNAL, f"{name}: neither a command of ours nor in EXTERNAL"
        return EXTERNAL[name]
    script = ROOT / argv[1]
    assert script.is_file(), f"{argv[1]}: no such script"
    if script == ROOT / "train.py":
        check_train(argv[2:])
    else:
        parse_only(script, argv[2:], elided, monkeypatch)
    return None


SHELL = [b for b in ALL if b.lang in ("bash", "sh", "shell", "console", "inline")]


@pytest.fixture(scope="module")
def split_files(tmp_path_factory) -> Path:
    """A folder of the files the docs' folders hold (the Tatoeba splits, the Hansards' development set, the JoeyNMT
    anchor), one for every command (so that a command the pages repeat is composed once)."""
    folder = tmp_path_factory.mktemp("splits")
    for name in ("train.tsv", "valid.tsv", "test.tsv"):
        (folder / name).write_text("Bonjour !\tHello!\n", encoding="utf-8")
    for name in ("dev.fr", "dev.en", "dev.en-fr.gold", "transformer.yaml", "rnn_bahdanau.yaml", "run_train.sh",
                 "train_budget.py", "parse_train_log.py"):  # the Hansards' files, the JoeyNMT anchor's
        (folder / name).touch()
    return folder


@pytest.fixture
def splits(split_files, tmp_path, monkeypatch) -> Path:
    """:func:`split_files`, with the test's own folder as the current one."""
    monkeypatch.chdir(tmp_path)
    return split_files


@pytest.mark.parametrize("block", SHELL, ids=str)
def test_every_command_of_the_docs_is_one_its_program_takes(block, monkeypatch, splits):
    if block.mark and block.mark[0] == "not run":
        assert block.mark[1], f"{block}: marked not run without a reason"
        return
    if (str(block.page.relative_to(ROOT)), block.text) in UNWRITTEN:
        return
    found = commands(block)
    assert found, f"{block}: a shell block without a command"
    for argv, elided in found:
        try:
            check(stand_in(argv, splits), elided, monkeypatch)
        except (AssertionError, ValueError, SystemExit) as e:
            raise AssertionError(f"{block}: {shlex.join(argv)}: {type(e).__name__}: {e}") from None


def test_every_fenced_block_is_checked_or_says_why_not():
    """A fenced block of a language no test reads is marked with its reason (text, YAML and Sphinx directives are
    not code to run)."""
    read = {"bash", "sh", "shell", "console", "python"}
    shown = {"text", "yaml", "{toctree}", "{eval-rst}", "json", "html"}  # shown, not run: output, settings, Sphinx
    for block in ALL:
        if block.lang != "inline" and block.lang not in read | shown:
            assert block.mark and block.mark[0] == "not run" and block.mark[1], f"{block}: ```{block.lang}, unchecked"


def test_every_module_name_and_file_the_docs_name_exists():
    """An inline ``nmt.x.y`` imports (a module, or a name in one) and an inline ``bench/x.py`` is a file: a name that
    moves breaks this test, not a reader."""
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in INLINE.finditer(text):
            span, where = m.group(1).strip(), f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            if NAME.match(span) and not importable(span):
                missing.append(f"{where}: {span}")
            elif FILE.match(span) and "*" not in span and not (ROOT / span).exists():
                missing.append(f"{where}: {span}")
    assert not missing, missing


def importable(name: str) -> bool:
    """Whether ``name`` is a module, or the longest module in it holds the rest as attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


# --- blocks run for real ---------------------------------------------------------------------------------------------

RUN = [b for b in SHELL if b.mark and b.mark[0] == "run"]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=str)
def test_a_block_marked_to_run_runs(block, tmp_path, data_cache):
    extra = shlex.split(block.mark[1])
    for argv, _ in commands(block):
        assert argv[:2] == ["python", "train.py"], f"{block}: only train.py commands run here"
        cmd = [sys.executable, str(ROOT / "train.py"), *argv[2:], *extra, f"hydra.run.dir={tmp_path / 'run'}",
               f"data.cache_dir={data_cache}", "trainer.enable_progress_bar=false"]  # fmt: skip
        done = run_script(cmd, ROOT, TRAIN_ENV, timeout=600)
        assert done.returncode == 0, f"{block}: {shlex.join(argv)}\n{done.stderr[-3000:]}"
        shutil.rmtree(tmp_path / "run")


PYTHON = {}
for _block in ALL:
    if _block.lang == "python" and not (_block.mark and _block.mark[0] == "not run"):
        PYTHON.setdefault(_block.page, []).append(_block)


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(PYTHON), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_python_blocks_run_in_order(page, trained, trained_reverse, tmp_path):
    """Each block on its own, as a reader copies it (with the blocks before it where it is marked
    ``<!-- continues -->``), in a folder with the files they open: ``best.ckpt`` and its kin (tiny checkpoints), a
    few lines of French and English, a TSV of pairs."""
    last = trained["transformer"] / "checkpoints" / "last.ckpt"
    for name in ("best.ckpt", "a.ckpt", "b.ckpt", "fr-en.ckpt", "FR_EN.ckpt"):
        shutil.copy(last, tmp_path / name)
    shutil.copy(trained_reverse, tmp_path / "EN_FR.ckpt")
    fr = ["Le chat dort .", "Je ne sais pas .", "Bonjour !", "Il mange une pomme ."]
    en = ["The cat sleeps .", "I do not know .", "Hello !", "He eats an apple ."]
    for name, lines in (("dev.fr", fr), ("dev.en", en), ("test.fr", fr), ("test.en", en)):
        (tmp_path / name).write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    (tmp_path / "train.tsv").write_text("".join(f"{f}\t{e}\n" for f, e in zip(fr * 5, en * 5)), encoding="utf-8")
    runs: list[list[Block]] = []  # each block as a reader copies it alone, with the blocks it says it continues
    for b in PYTHON[page]:
        runs.append([*runs[-1], b] if b.mark and b.mark[0] == "continues" and runs else [b])
    for run in runs:
        code = "\n\n".join(b.text for b in run)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                              env={**TRAIN_ENV, "PYTHONPATH": str(ROOT)})  # fmt: skip
        assert done.returncode == 0, f"{run[-1]} (run on its own):\n{done.stderr[-3000:]}"
