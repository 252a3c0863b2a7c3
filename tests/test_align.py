"""align.py (``nmt-align``): word links of given translations through the real command, scored against gold links
with ``--gold``; the gold reader and AER of :mod:`nmt.alignment.gold`."""

from __future__ import annotations

import re

import pytest

import align as cli
from nmt.alignment.aer import AERCounts
from nmt.alignment.gold import read_gold
from nmt.alignment.links import parse_links

FR = ["Le chat mange la pomme rouge .", "Je ne mange pas .", "Le petit chien voit la grande maison ."]
EN = ["The cat eats the red apple .", "I do not eat .", "The small dog sees the big house ."]
# 1-based, English word first, as the Hansards set's dev.en-fr.gold: sure e-f, possible epf / e?f / e-f-P
GOLD = ["1-1 2-2 3-3 4p4 4?5 5-6-P 6-5 7-7", "1-1 2p2 3-3 3-4-P 4-3 5-5", "1-1 2-3 3-2 4-4 5-5 6-7 7-6 8-8-S"]


@pytest.fixture(scope="module")
def ckpt(trained):
    return str(trained["bahdanau"] / "checkpoints" / "last.ckpt")


@pytest.fixture
def files(tmp_path):
    for name, lines in (("in.fr", FR), ("in.en", EN), ("gold", GOLD)):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return tmp_path


def run(main, args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_aer_precision_and_recall_of_a_hand_made_case():
    """By the formula, AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|) with S ⊆ P: 1 - (1 + 2) / (3 + 2) = 0.4; precision
    |A∩P| / |A| = 2/3, recall |A∩S| / |S| = 1/2."""
    counts = AERCounts()
    counts.add({(0, 0), (1, 2), (2, 2)}, {(0, 0), (1, 1)}, {(1, 2)})
    aer, precision, recall = counts.scores()
    assert aer == pytest.approx(0.4) and precision == pytest.approx(2 / 3) and recall == pytest.approx(0.5)


def test_the_gold_reader_takes_the_wpt_form_english_first_and_from_one(tmp_path):
    (tmp_path / "gold").write_text("2-1 1p2 3?1 2-3-P 1-1-S\n\n")
    sure, possible = read_gold(tmp_path / "gold", ["a b c", "x"], ["A B C", "X"])
    assert sure == [{(0, 1), (0, 0)}, set()] and possible == [{(1, 0), (0, 2), (2, 1)}, set()]


@pytest.mark.parametrize(
    "text, says",
    [
        ("1-1 2x2\n\n", ":1: '2x2' is no gold link"),
        ("1-1\n0-1\n", ":2: '0-1' names a word the pair does not have"),
        ("1-1\n1-3\n", ":2: '1-3' names a word the pair does not have (2 English words, 2 French"),
        ("1-1\n", " has 1 lines but the input has 2"),
    ],
)
def test_a_bad_gold_file_is_refused_naming_its_line(tmp_path, capsys, text, says):
    (tmp_path / "in.fr").write_text("a b\nc d\n")
    (tmp_path / "in.en").write_text("A B\nC D\n")
    (tmp_path / "gold").write_text(text)
    args = ["--ckpt", "never-opened.ckpt", "--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en")]
    code, out, err = run(cli.main, [*args, "--gold", str(tmp_path / "gold")], capsys)
    assert code == 1 and not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: {tmp_path / 'gold'}{says}"), err  # refused before a model loads


def test_align_prints_links_and_with_gold_their_aer_precision_and_recall(ckpt, files, capsys):
    args = ["--ckpt", ckpt, "--input", str(files / "in.fr"), "--align-to", str(files / "in.en")]
    code, out, err = run(cli.main, args, capsys)
    links = [parse_links(x) for x in out.splitlines()]
    assert code == 0 and len(links) == len(FR) and all(links), out
    assert all(i < len(f.split()) and j < len(e.split()) for x, f, e in zip(links, FR, EN) for i, j in x)
    code, out, err = run(cli.main, [*args, "--gold", str(files / "gold")], capsys)
    assert code == 0 and [parse_links(x) for x in out.splitlines()] == links, err  # the same links, then scored
    line = err.strip().splitlines()[-1]
    got = re.match(r"AER = ([\d.]+)%  precision = ([\d.]+)%  recall = ([\d.]+)%  \(gold .*: 3 pairs", line)
    assert got, err
    sure, possible = read_gold(files / "gold", FR, EN)
    counts = AERCounts()
    for found, s, p in zip(links, sure, possible):
        counts.add(found, s, p)
    assert [float(x) for x in got.groups()] == [round(100 * x, 2) for x in counts.scores()]


@pytest.mark.parametrize(
    "given, says",
    [
        (["--length-penalty", "1"], "--length-penalty: only where the scores of the readings are shown"),
        (["--symmetrisation", "union"], "--symmetrisation: only with --reverse-ckpt"),
        (["--adapt-links", "eflomal"], "--adapt-links: only with --adapt-epochs N (N > 0)"),
        (["--adapt-epochs", "2", "--adapt-corpus", "c"], "--adapt-corpus: only with --adapt-links eflomal"),
        (["--alignments", "/no/such/folder/a"], "--alignments /no/such/folder/a: cannot write"),
        (["--gold", "missing.gold"], "--gold missing.gold: no such file"),
    ],
)
def test_align_refuses_an_option_that_would_do_nothing_before_a_model_loads(files, capsys, given, says):
    args = ["--ckpt", "never-opened.ckpt", "--input", str(files / "in.fr"), "--align-to", str(files / "in.en")]
    code, out, err = run(cli.main, [*args, *given], capsys)
    assert code == 1 and not out and err.strip() == err.strip().splitlines()[0] and err.startswith(f"error: {says}")
