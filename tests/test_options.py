"""No option accepted and then ignored: each option of translate.py, align.py and serve.py either always does
something or is refused in one line, naming what it needs, where it would do nothing (before any model loads)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from conftest import ROOT
from nmt.cli import align as align_cli
from nmt.cli import serve as serve_cli
from nmt.cli import translate as translate_cli

MISSING = "never-opened.ckpt"  # the refusal comes first: no checkpoint is read

TRANSLATE = [
    (["--align-links", "union"], "--align-links: only where attention is read"),
    (["--align-layer", "0", "--output", "o"], "--align-layer: only where attention is read"),
    (["--interactive", "--input", "i"], "--input: not with --interactive"),
    (["--interactive", "--html", "h"], "--html: not with --interactive"),
    (["--beam-size", "1", "--length-penalty", "1"], "--length-penalty: only where it changes the search"),
]
ALIGN = [  # after --align-to e, which align.py requires
    (["--adapt-lr", "0.001"], "--adapt-lr: only with --adapt-epochs N (N > 0)"),
    (["--adapt-epochs", "2", "--adapt-align-weight", "5"], "--adapt-align-weight: only with"),
    (["--adapt-epochs", "2", "--adapt-draws", "3"], "--adapt-draws: only with --adapt-links"),
    (["--adapt-epochs", "2", "--adapt-lines", "raw"], "--adapt-lines: only with --adapt-links"),
    (["--adapt-links", "l"], "--adapt-links: only with --adapt-epochs N (N > 0)"),
    (["--symmetrisation", "union"], "--symmetrisation: only with --reverse-ckpt"),
    (["--length-penalty", "1"], "--length-penalty: only where the scores of the readings are shown"),
]


@pytest.mark.parametrize("given, message", TRANSLATE)
def test_translate_py_refuses_an_option_that_would_do_nothing(given, message, capsys):
    assert translate_cli.main(["--ckpt", MISSING, *given]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("given, message", ALIGN)
def test_align_py_refuses_an_option_that_would_do_nothing(given, message, capsys):
    assert align_cli.main(["--ckpt", MISSING, "--align-to", "e", *given]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("option", ["--align-to", "--reverse-ckpt", "--adapt-epochs", "--symmetrisation"])
def test_translate_py_has_no_alignment_option(option, capsys):
    """Aligning given translations is align.py's alone: translate.py does not know its options."""
    with pytest.raises(SystemExit) as stop:
        translate_cli.main(["--ckpt", MISSING, option, "x"])
    assert stop.value.code == 2 and f"unrecognized arguments: {option}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, message",
    [
        (["--symmetrisation", "union"], "--symmetrisation: only with --reverse-ckpt"),
        (["--no-batching", "--batch-tokens", "100"], "--batch-tokens: not with --no-batching"),
        (["--no-batching", "--max-wait-ms", "1"], "--max-wait-ms: not with --no-batching"),
    ],
)
def test_serve_py_refuses_an_option_that_would_do_nothing(given, message, capsys):
    assert serve_cli.main(["--ckpt", MISSING, "--port", "0", *given]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err


# options that do something in every combination the command accepts
ALWAYS = {
    "translate": {"help", "ckpt", "device", "threads", "compute_type", "attention_backends", "float32_matmul",
                  "beam_size", "max_len_a", "max_len_b", "max_src_len", "long_lines", "interactive"},
    "serve": {"help", "ckpt", "device", "threads", "compute_type", "attention_backends", "float32_matmul", "beam_size",
              "length_penalty", "max_len_a",
              "max_len_b", "nbest", "batch_size", "batch_type", "max_src_len", "long_lines", "align_layer",
              "align_head", "align_readout", "align_links", "reverse_ckpt", "host", "port", "no_batching",
              "max_queue", "max_lines", "max_chars", "max_body", "max_beam", "body_timeout", "no_access_log"},
    "align": {"help", "ckpt", "device", "threads", "compute_type", "attention_backends", "float32_matmul",
              "max_src_len", "long_lines", "align_layer", "align_head", "align_readout", "align_links", "input",
              "align_to", "alignments", "gold", "html", "attention_dir", "reverse_ckpt", "adapt_epochs"},
}  # fmt: skip


@pytest.mark.parametrize("name, command", [("translate", translate_cli), ("serve", serve_cli), ("align", align_cli)])
def test_every_option_always_applies_or_has_a_rule(name, command, monkeypatch):
    """A new option must be placed: in ALWAYS, or in a rule that refuses it where it does nothing."""
    seen = {}
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", lambda p, *a, **k: seen.setdefault("p", p) and exit())
    with pytest.raises(SystemExit):
        command._parse_args(["--ckpt", MISSING])
    dests = {a.dest for a in seen["p"]._actions}
    ruled = {d for rule in command.NEEDS for d in rule.options}
    assert dests == ALWAYS[name] | ruled, (dests - ALWAYS[name] - ruled, (ALWAYS[name] | ruled) - dests)


# --- every option of every rule, through the real parsing --------------------------------------------------------

VALUE = {  # a value each option parses
    "input": "i", "output": "o", "ref": "r", "align_to": "e", "alignments": "a", "html": "h", "attention_dir": "d",
    "nbest": "2", "batch_size": "7", "batch_type": "sentences", "reverse_ckpt": "r.ckpt", "adapt_epochs": "2",
    "beam_size": "2", "max_len_a": "1", "max_len_b": "5", "length_penalty": "1", "symmetrisation": "union",
    "adapt_lr": "0.001", "adapt_links": "l", "adapt_align_weight": "5", "adapt_corpus": "c", "adapt_draws": "3",
    "adapt_lines": "raw", "align_layer": "0", "align_head": "0", "align_readout": "input", "align_links": "union",
    "max_wait_ms": "1", "batch_tokens": "100", "seen": "t",
}  # fmt: skip
ADAPT = ["--adapt-epochs", "2"]
# (what the command line holds besides, the options refused there, what the refusal says), written by hand from the
# rules as the docs state them: a rule that loses an option leaves its row unrefused
TRANSLATE_RULES = [
    (["--interactive"], ["input", "output", "ref", "alignments", "html", "attention_dir", "nbest", "batch_size",
                         "batch_type", "seen"], "not with --interactive"),
    ([], ["seen"], "only with --ref"),
    (["--beam-size", "1"], ["length_penalty"], "only where it changes the search (--beam-size above 1)"),
    (["--interactive", "--beam-size", "1"], ["length_penalty"], "only where it changes the search"),
    ([], ["align_layer", "align_head", "align_readout", "align_links"], "only where attention is read"),
    (["--output", "o"], ["align_layer", "align_head", "align_readout", "align_links"], "only where attention is read"),
]  # fmt: skip
ALIGN_RULES = [  # after --align-to e
    ([], ["length_penalty"], "only where the scores of the readings are shown"),
    ([], ["symmetrisation"], "only with --reverse-ckpt"),
    ([], ["adapt_lr", "adapt_links"], "only with --adapt-epochs N (N > 0)"),
    (ADAPT, ["adapt_align_weight"], "only with --adapt-links"),
    (ADAPT, ["adapt_corpus", "adapt_draws", "adapt_lines"], "only with --adapt-links eflomal"),
    ([*ADAPT, "--adapt-links", "l"], ["adapt_corpus", "adapt_draws", "adapt_lines"], "only with --adapt-links eflomal"),
]  # fmt: skip
SERVE_RULES = [
    ([], ["symmetrisation"], "only with --reverse-ckpt"),
    (["--no-batching"], ["max_wait_ms", "batch_tokens"], "not with --no-batching"),
]
# where each option does something: the rules let it through (checked through the parsing, before anything loads)
TRANSLATE_APPLIES = [
    ([], ["input", "output", "ref", "alignments", "html", "attention_dir", "nbest", "batch_size", "batch_type",
          "beam_size", "max_len_a", "max_len_b", "length_penalty"]),
    (["--alignments", "a"], ["align_layer", "align_head", "align_readout", "align_links"]),
    (["--html", "h"], ["align_layer", "align_head", "align_readout", "align_links"]),
    (["--interactive", "--beam-size", "3"], ["length_penalty"]),
    (["--ref", "r"], ["seen"]),
]  # fmt: skip
ALIGN_APPLIES = [  # after --align-to e
    (["--html", "h"], ["length_penalty"]),
    (["--attention-dir", "d"], ["length_penalty"]),
    (["--reverse-ckpt", "r"], ["symmetrisation"]),
    (ADAPT, ["adapt_lr", "adapt_links"]),
    ([*ADAPT, "--adapt-links", "l"], ["adapt_align_weight"]),
    ([*ADAPT, "--adapt-links", "eflomal"], ["adapt_corpus", "adapt_draws", "adapt_lines", "adapt_align_weight"]),
]
# each command as the tables run it: its module and what its command line always holds
COMMANDS = {
    "translate": (translate_cli, ["--ckpt", MISSING]),
    "align": (align_cli, ["--ckpt", MISSING, "--align-to", "e"]),
    "serve": (serve_cli, ["--ckpt", MISSING, "--port", "0"]),
}


def given(dest: str) -> list[str]:
    return ["--" + dest.replace("_", "-"), VALUE[dest]]


def cases(rules):
    return [(context, dest, says) for context, dests, says in rules for dest in dests]


RULES = {"translate": TRANSLATE_RULES, "align": ALIGN_RULES, "serve": SERVE_RULES}
APPLIES = {"translate": TRANSLATE_APPLIES, "align": ALIGN_APPLIES}


@pytest.mark.parametrize("name, context, dest, says", [(n, *c) for n, rows in RULES.items() for c in cases(rows)])
def test_every_option_of_every_rule_is_refused_where_it_would_do_nothing(name, context, dest, says, capsys):
    command, always = COMMANDS[name]
    assert command.main([*always, *context, *given(dest)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --{dest.replace('_', '-')}: {says}") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("name, context, dests", [(n, *row) for n, rows in APPLIES.items() for row in rows])
def test_every_ruled_option_is_taken_where_it_does_something(name, context, dests):
    from nmt.cli.options import refuse_ignored

    command, always = COMMANDS[name]
    for dest in dests:
        args = command._parse_args([*always, *context, *given(dest)])
        refuse_ignored(args, command.NEEDS)  # no refusal


@pytest.mark.parametrize("name", RULES)
def test_the_tables_hold_every_option_of_every_rule(name):
    """Each (rule, option) of NEEDS has a row above saying what that rule says: a new option gets its row."""
    command, rows = COMMANDS[name][0], RULES[name]
    for rule in command.NEEDS:
        for dest in rule.options:
            row = [says for _, dests, says in rows if dest in dests and rule.needs.startswith(says)]
            assert row, (name, dest, rule.needs)
    ruled = {d for rule in command.NEEDS for d in rule.options}
    assert ruled == {d for _, dests, _ in rows for d in dests}, name


def parser_of(main, monkeypatch, argv: list[str]) -> argparse.ArgumentParser:
    """The parser a command builds, taken at its parse_args (nothing else runs)."""
    seen = {}

    def caught(parser, *args, **kwargs):
        seen["p"] = parser
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    with pytest.raises(SystemExit):
        main(argv)
    return seen["p"]


def test_every_option_of_every_command_has_a_test_of_its_effect(monkeypatch):
    """tests/option_effects.py names, for each option of each command, the tests that observe its effect (each of
    which exists); a new option fails here until it has one."""
    import re

    from option_effects import OBSERVED

    from conftest import ROOT
    from nmt.cli import average as average_cli
    from nmt.cli import export as export_cli

    mains = {"translate": translate_cli.main, "serve": serve_cli.main, "align": align_cli.main,
             "export": export_cli.main, "average": average_cli.main}  # fmt: skip
    for name, main in mains.items():
        dests = {a.dest for a in parser_of(main, monkeypatch, ["--ckpt", MISSING])._actions} - {"help"}
        observed = set(OBSERVED[name])
        assert observed == dests, (name, dests - observed, observed - dests)
    for name, options in OBSERVED.items():
        for dest, tests in options.items():
            assert tests, (name, dest)
            for test in tests:
                file, function = test.split("::")
                assert re.search(rf"^def {function}\(", (ROOT / "tests" / file).read_text(), re.M), (name, dest, test)


def test_the_inference_commands_load_no_config_machinery():
    """translate, align, serve, export and average start without Hydra or OmegaConf (the options read their bounds
    from the classes that take them, not through a config's target names): a second saved at each start."""
    code = "import sys, nmt.cli.translate, nmt.cli.align, nmt.cli.serve, nmt.cli.export, nmt.cli.average; "
    code += "print(sorted({m.split('.')[0] for m in sys.modules} & {'hydra', 'omegaconf'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out
