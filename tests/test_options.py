"""No option accepted and then ignored: each option of translate.py and serve.py either always does something or is
refused in one line, naming what it needs, where it would do nothing (before any model loads)."""

from __future__ import annotations

import argparse

import pytest

from nmt.cli import serve as serve_cli
from nmt.cli import translate as translate_cli

MISSING = "never-opened.ckpt"  # the refusal comes first: no checkpoint is read

TRANSLATE = [
    (["--adapt-lr", "0.001"], "--adapt-lr: only with --adapt-epochs N (N > 0)"),
    (["--align-to", "e", "--adapt-epochs", "2", "--adapt-align-weight", "5"], "--adapt-align-weight: only with"),
    (["--align-to", "e", "--adapt-epochs", "2", "--adapt-draws", "3"], "--adapt-draws: only with --adapt-links"),
    (["--align-to", "e", "--adapt-epochs", "2", "--adapt-lines", "raw"], "--adapt-lines: only with --adapt-links"),
    (["--align-to", "e", "--adapt-links", "l"], "--adapt-links: only with --adapt-epochs N (N > 0)"),
    (["--align-to", "e", "--symmetrisation", "union"], "--symmetrisation: only with --reverse-ckpt"),
    (["--reverse-ckpt", "r"], "--reverse-ckpt: only with --align-to"),
    (["--adapt-epochs", "0"], "--adapt-epochs: only with --align-to"),  # a default given again is given
    (["--align-to", "e", "--nbest", "2", "--beam-size", "2"], "--beam-size: not with --align-to"),
    (["--align-to", "e", "--batch-type", "sentences"], "--batch-type: not with --align-to"),
    (["--align-to", "e", "--max-len-b", "5"], "--max-len-b: not with --align-to"),
    (["--align-to", "e", "--ref", "r"], "--ref: not with --align-to"),
    (["--align-to", "e", "--length-penalty", "1"], "--length-penalty: with --align-to, only where the scores"),
    (["--align-links", "union"], "--align-links: only where attention is read"),
    (["--align-layer", "0", "--output", "o"], "--align-layer: only where attention is read"),
    (["--interactive", "--input", "i"], "--input: not with --interactive"),
    (["--interactive", "--html", "h"], "--html: not with --interactive"),
]


@pytest.mark.parametrize("given, message", TRANSLATE)
def test_translate_py_refuses_an_option_that_would_do_nothing(given, message, capsys):
    assert translate_cli.main(["--ckpt", MISSING, *given]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err


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
    "translate": {"help", "ckpt", "device", "threads", "compute_type", "max_src_len", "long_lines", "interactive"},
    "serve": {"help", "ckpt", "device", "threads", "compute_type", "beam_size", "length_penalty", "max_len_a",
              "max_len_b", "nbest", "batch_size", "batch_type", "max_src_len", "long_lines", "align_layer",
              "align_head", "align_readout", "align_links", "reverse_ckpt", "host", "port", "no_batching",
              "max_queue", "max_lines", "max_chars", "max_body", "max_beam", "body_timeout", "no_access_log"},
}  # fmt: skip


@pytest.mark.parametrize("name, command", [("translate", translate_cli), ("serve", serve_cli)])
def test_every_option_always_applies_or_has_a_rule(name, command, monkeypatch):
    """A new option must be placed: in ALWAYS, or in a rule that refuses it where it does nothing."""
    seen = {}
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", lambda p, *a, **k: seen.setdefault("p", p) and exit())
    with pytest.raises(SystemExit):
        command._parse_args(["--ckpt", MISSING])
    dests = {a.dest for a in seen["p"]._actions}
    ruled = {d for rule in command.NEEDS for d in rule.options}
    assert dests == ALWAYS[name] | ruled, (dests - ALWAYS[name] - ruled, (ALWAYS[name] | ruled) - dests)
