"""translate.py, serve.py, average.py and export.py refuse, before anything loads, in one line naming the option: a
value beyond its range (upper bounds and infinity included, the output budget and the length penalty it leaves
finite), and an output path that cannot be written or would overwrite an input. The advice in each line names
options of the command that printed it, and works when followed. (The refusals that need a model, and the server's
request fields, are tested in test_translate.py and test_serve.py.)"""

from __future__ import annotations

import argparse
import re

import pytest

from nmt.cli import average as average_cli
from nmt.cli import export as export_cli
from nmt.cli import serve as serve_cli
from nmt.cli import translate as translate_cli
from nmt.cli.options import cores

MISSING = "never-opened.ckpt"  # each refusal comes first: no checkpoint is read
NOT_LOADED = "checkpoint not found"  # what a case that passed every check up front ends with


def run(command, argv: list[str], capsys) -> str:
    """The one error line ``command`` ends with (exit status 1)."""
    assert command.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0].removeprefix("error: ")


def options_of(command) -> set[str]:
    """The options the command's parser takes (``--max-len-a`` ...)."""
    seen = {}

    def parse(p: argparse.ArgumentParser, *args, **kwargs):
        seen["p"] = p
        raise SystemExit(0)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", parse)
        with pytest.raises(SystemExit):
            command._parse_args(["--ckpt", MISSING])
    return {s for a in seen["p"]._actions for s in a.option_strings}


def named_options(message: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]*", message))


def plain(line: str) -> str:
    """``line`` with the thousands separators of its numbers taken out (``4,096`` -> ``4096``)."""
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", line)


BUDGET = "--max-len-a 1.5 --max-len-b 10: a line of 4096 pieces (--max-src-len) would be given 6154 output tokens, "
TRANSLATE_BOUNDS = [  # (options given, what the line must say); the decoding ranges are conf/'s (nmt/settings.py)
    (["--max-len-a", "inf"], "--max-len-a=inf: must be a number in [0, "),
    (["--max-len-a", "nan"], "--max-len-a=nan: must be a number in [0, "),
    (["--max-len-b", "1000000"], "--max-len-b=1000000: must be an integer in [0, "),
    (["--max-src-len", "4096"], BUDGET + "more than the 4096 a search may give: lower them, or give --max-src-len "
                                       "2724 or less"),
    (["--max-len-a", "10", "--max-src-len", "1000"], "--max-len-a 10 --max-len-b 10: a line of 1000 pieces "
                                                     "(--max-src-len) would be given 10010 output tokens"),
    (["--max-src-len", "100000"], "--max-src-len=100000: must be an integer in [1, 4096]"),
    (["--length-penalty", "inf"], "--length-penalty=inf: must be a number in [0, "),
    (["--beam-size", "100000"], "--beam-size=100000: must be an integer in [1, "),
    (["--threads", "100000"], f"--threads=100000: must be an integer in [0, {cores()}]"),
]  # fmt: skip


@pytest.mark.parametrize("given, says", TRANSLATE_BOUNDS)
def test_translate_py_bounds_every_number_before_anything_loads(given, says, capsys):
    line = run(translate_cli, ["--ckpt", MISSING, *given], capsys)
    assert plain(line).startswith(says), line
    assert named_options(line) <= options_of(translate_cli), line  # its advice names its own options


def test_the_advice_on_a_budget_works_when_followed(capsys):
    for given in (["--max-src-len", "4096"], ["--max-len-a", "10", "--max-src-len", "1000"]):
        line = run(translate_cli, ["--ckpt", MISSING, *given], capsys)
        advised = re.search(r"give (--max-src-len \d+) or less", line).group(1).split()
        assert NOT_LOADED in run(translate_cli, ["--ckpt", MISSING, *given, *advised], capsys)  # past every check
        too_far = [advised[0], str(int(advised[1]) + 1)]
        assert NOT_LOADED not in run(translate_cli, ["--ckpt", MISSING, *given, *too_far], capsys)  # the largest


SERVE_BOUNDS = [
    (["--max-wait-ms", "inf"], "--max-wait-ms=inf: must be a number in [0, 60000]"),
    (["--max-wait-ms", "1e9"], "--max-wait-ms=1000000000.0: must be a number in [0, 60000]"),
    (["--body-timeout", "inf"], "--body-timeout=inf: must be a number in (0, 3600]"),
    (["--body-timeout", "1e9"], "--body-timeout=1000000000.0: must be a number in (0, 3600]"),
    (["--max-len-a", "inf"], "--max-len-a=inf: must be a number in [0, "),
    (["--max-src-len", "4096"], BUDGET),
    (["--threads", "100000"], f"--threads=100000: must be an integer in [0, {cores()}]"),
]


@pytest.mark.parametrize("given, says", SERVE_BOUNDS)
def test_serve_py_bounds_every_number_before_anything_loads(given, says, capsys):
    line = run(serve_cli, ["--ckpt", MISSING, "--port", "0", *given], capsys)
    assert plain(line).startswith(says), line
    assert named_options(line) <= options_of(serve_cli), line


def translate_outputs(tmp_path):
    """(options, what the line must say) for outputs that cannot be written, each before the model loads."""
    (tmp_path / "in.fr").write_text("Le chat dort.\n")
    (tmp_path / "a_file").write_text("")
    src = ["--input", str(tmp_path / "in.fr")]
    missing, a_file = tmp_path / "missing", tmp_path / "a_file"
    return [
        ([*src, "--alignments", str(missing / "x.align")], f"--alignments {missing / 'x.align'}: cannot write: "
                                                           f"folder {missing} does not exist"),
        ([*src, "--html", str(a_file / "x.html")], f"--html {a_file / 'x.html'}: cannot write: {a_file} is not a "
                                                   "folder"),
        ([*src, "--attention-dir", str(a_file)], f"--attention-dir {a_file}: is a file, not a folder"),
        ([*src, "--attention-dir", str(a_file / "sub")], f"--attention-dir {a_file / 'sub'}: cannot make the folder"),
        ([*src, "--output", str(tmp_path)], f"--output {tmp_path}: is a folder; give a file name"),
        ([*src, "--output", str(missing / "o")], f"--output {missing / 'o'}: cannot write: folder {missing} does not "
                                                          "exist"),
        ([*src, "--output", str(tmp_path / "in.fr")], f"--output {tmp_path / 'in.fr'}: is --input too, which it "
                                                      "would overwrite; give another path"),
        ([*src, "--ref", str(tmp_path / "in.fr"), "--html", str(tmp_path / "in.fr")], "--html"),
        ([*src, "--output", str(tmp_path / "o"), "--alignments", str(tmp_path / "o")],
         f"--alignments {tmp_path / 'o'}: --output names it too; give each output its own path"),
        (["--input", str(tmp_path / "none.fr")], f"--input {tmp_path / 'none.fr'}: no such file"),
        ([*src, "--ref", str(missing)], f"--ref {missing}: no such file"),
    ]  # fmt: skip


def test_translate_py_checks_every_output_path_before_a_model_loads(tmp_path, capsys):
    for given, says in translate_outputs(tmp_path):
        line = run(translate_cli, ["--ckpt", MISSING, *given], capsys)
        assert line.startswith(says), (line, says)
        assert named_options(line) <= options_of(translate_cli), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "in.fr"]  # nothing written, nothing made
    assert (tmp_path / "in.fr").read_text() == "Le chat dort.\n"


def test_average_py_writes_over_nothing_and_checks_before_reading(tmp_path, capsys):
    """--out is refused before any checkpoint is read (those given here are not checkpoints at all)."""
    a, b = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    a.write_bytes(b"weights a")
    b.write_bytes(b"weights b")
    other = tmp_path / "results.txt"
    other.write_text("keep me")
    cases = [
        (["--ckpt", str(a), str(b), "--out", str(a)],
         f"--out {a}: is one of the checkpoints to average; give a new path"),
        (["--ckpt", str(a), str(b), "--out", str(other)],
         f"--out {other}: is a file that is there already; give a new path"),
        (["--ckpt", str(a), "--out", str(tmp_path)], f"--out {tmp_path}: is a folder; give a file name"),
        (["--ckpt", str(a), "--out", str(tmp_path / "no" / "x.ckpt")],
         f"--out {tmp_path / 'no' / 'x.ckpt'}: cannot write: "),
    ]
    for argv, says in cases:
        line = run(average_cli, argv, capsys)
        assert line.startswith(says), line
    assert a.read_bytes() == b"weights a" and other.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ckpt", "b.ckpt", "results.txt"]


def test_export_py_names_its_options_before_the_checkpoint_loads(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "a_file").write_text("")
    cases = [
        (["--out", str(tmp_path / "taken")], f"--out {tmp_path / 'taken'}: already exists; give a new folder"),
        (["--out", str(tmp_path / "a_file" / "m")], f"--out {tmp_path / 'a_file' / 'm'}: cannot write: "),
        (["--out", str(tmp_path / "m"), "--max-positions", "1000000"], "--max-positions=1000000: must be an integer "
                                                                        "in [2, 4"),
    ]  # fmt: skip
    for argv, says in cases:
        line = run(export_cli, ["--ckpt", MISSING, *argv], capsys)
        assert line.startswith(says), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "taken"]


@pytest.mark.parametrize("command", [translate_cli, serve_cli], ids=["translate", "serve"])
def test_every_rule_names_options_of_its_own_command(command):
    """What a refusal of an ignored option says it needs names options the command takes."""
    for rule in command.NEEDS:
        assert named_options(rule.needs) <= options_of(command), rule.needs
