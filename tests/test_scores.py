"""Scores split by what training saw (nmt.scores, nmt.data.targets): the whole set, its unseen references and the rest,
as the benchmarks record them and as ``translate.py --ref --seen`` prints them; and the help of every command names
only options that command (or the command it names beside them) takes."""

from __future__ import annotations

import gzip
import re

import pytest
import sacrebleu
from test_options import parser_of

from bench.quality import hypotheses
from nmt.cli import align as align_cli
from nmt.cli import average as average_cli
from nmt.cli import export as export_cli
from nmt.cli import serve as serve_cli
from nmt.cli import translate as translate_cli
from nmt.data.rules import Rules
from nmt.data.sources import Files, Tatoeba
from nmt.data.targets import training_targets
from nmt.scores import Score, corpus_scores, read_targets, sacrebleu_lines, score_split, targets

HYPS = ["The cat sleeps.", "He eats an apple.", "I am here.", "She is tall."]
REFS = ["The cat sleeps.", "He eats the apple.", "I'm here.", "She is tall."]
TRAIN = frozenset({"The cat sleeps.", "She  is tall. "})  # as written in a training file: spaces differ


def test_bleu_and_chrf_are_the_values_computed_by_hand():
    """#82 §6: every BLEU and chrF the project reports (validation, test, translate.py --ref, the benchmarks) is
    nmt.scores', pinned here. "the cat sat on the mat." against "the cat sat on a mat.", 13a-tokenised (the full stop
    a token of its own): 7 tokens each, n-gram matches 6/7, 4/6, 2/5, 1/4, no brevity penalty, so BLEU = 100 x
    (6/7 x 4/6 x 2/5 x 1/4) ** (1/4) = 48.89 (untokenised, "mat." one token: (5/6 x 3/5 x 2/4 x 1/3) ** (1/4) = 53.73).
    chrF of "abc" against "abd": character 1- to 3-grams (no longer ones) match 2/3, 1/2 and 0/1 both ways, so
    precision = recall = (2/3 + 1/2 + 0) / 3 and chrF2 = 100 x 7/18 = 38.89."""
    bleu, _ = corpus_scores(["the cat sat on the mat."], ["the cat sat on a mat."])
    assert bleu == pytest.approx(100 * (6 / 7 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25)
    assert corpus_scores(["abc"], ["abd"])[1] == pytest.approx(100 * 7 / 18)
    assert Score.of(["the cat sat on the mat."], ["the cat sat on a mat."]).bleu == 48.89
    bleu_line, chrf_line = sacrebleu_lines(["the cat sat on the mat."], ["the cat sat on a mat."])
    assert bleu_line.startswith("BLEU = 48.89 ") and "tok:13a" in bleu_line and chrf_line.startswith("chrF2 = ")


def test_the_parts_are_the_references_unseen_in_training_and_the_rest():
    split = score_split(HYPS, REFS, targets(TRAIN))
    assert (split.all.sentences, split.unseen.sentences, split.seen.sentences) == (4, 2, 2)
    assert split.seen.bleu == pytest.approx(100.0) and split.unseen.bleu < 100  # the seen pairs are the exact ones
    unseen = [1, 2]
    assert split.unseen.bleu == round(sacrebleu.corpus_bleu([HYPS[i] for i in unseen], [[REFS[i] for i in unseen]])
                                      .score, 2)  # fmt: skip
    assert split.all.bleu == round(sacrebleu.corpus_bleu(HYPS, [REFS]).score, 2)
    record = split.record()
    assert record["unseen_sentences"] + record["seen_sentences"] == record["sentences"] == 4


def test_without_training_targets_or_with_an_empty_part():
    assert score_split(HYPS, REFS).record().keys() == {"bleu", "chrf", "sentences"}
    none_seen = score_split(HYPS, REFS, frozenset())
    assert none_seen.seen is None and none_seen.unseen == none_seen.all
    assert none_seen.record()["seen_bleu"] is None and "seen: no pairs" in none_seen.lines()
    with pytest.raises(ValueError, match="4 translations but 3 references"):
        score_split(HYPS, REFS[:3], TRAIN)


def test_training_targets_are_read_from_a_tsv_s_english_or_a_text_file(tmp_path):
    (tmp_path / "train.tsv").write_text("Le chat dort.\tThe cat sleeps.\nElle est grande.\tShe is  tall.\n")
    (tmp_path / "train.en").write_text("The cat sleeps.\r\nShe is tall.\n")
    assert read_targets(tmp_path / "train.tsv") == read_targets(tmp_path / "train.en") == targets(TRAIN)
    (tmp_path / "bad.tsv").write_text("Le chat dort.\tThe cat sleeps.\nno tab here\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: no second \(English\) column"):
        read_targets(tmp_path / "bad.tsv")
    (tmp_path / "latin1.en").write_bytes("The cat.\nCafé\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.en:2: not UTF-8 text"):
        read_targets(tmp_path / "latin1.en")


def test_a_corpus_s_training_targets_are_its_training_split_s(tmp_path):
    """Held-out files: the training file's targets alone; hash-split input: the pairs the hash puts in training,
    the same pairs whichever way round the corpus is read."""
    for name, lines in (("train", ["Le chat.\tThe cat.", "Un chien.\tA dog."]), ("valid", ["Oui.\tYes."]),
                        ("test", ["Non.\tNo."])):  # fmt: skip
        (tmp_path / f"{name}.tsv").write_text("".join(line + "\n" for line in lines))
    rules = Rules("error", 0.0, 0.0, 50, 9.0, 5, 100, 1)
    assert training_targets(Tatoeba(splits=str(tmp_path)), tmp_path / "cache", rules) == {"The cat.", "A dog."}
    pairs = [(f"Phrase numéro {i}.", f"Sentence number {i}.") for i in range(200)]
    (tmp_path / "all.tsv").write_text("".join(f"{fr}\t{en}\n" for fr, en in pairs))
    split = Rules("error", 0.2, 0.2, 50, 9.0, 5, 100, 1)
    seen = training_targets(Files(path=str(tmp_path / "all.tsv")), tmp_path / "cache", split)
    assert 0 < len(seen) < 200 and seen <= {en for _, en in pairs}
    reversed_rules = Rules("error", 0.2, 0.2, 50, 9.0, 5, 100, 1, reverse=True)
    french = training_targets(Files(path=str(tmp_path / "all.tsv")), tmp_path / "cache", reversed_rules)
    assert french == {fr for fr, en in pairs if en in seen}


def test_a_record_s_translations_are_kept_to_be_scored_again(tmp_path):
    record = tmp_path / "results" / "quality_x.json"
    kept = hypotheses.write(record, "beam 5", ["A b.", "C\nd."])
    assert kept == str(tmp_path / "results" / "hypotheses" / "quality_x.beam5.en.gz")
    assert hypotheses.read(kept) == ["A b.", "C d."]  # one line a pair, whatever a translation holds
    first = (tmp_path / "results" / "hypotheses" / "quality_x.beam5.en.gz").read_bytes()
    hypotheses.write(record, "beam 5", ["A b.", "C\nd."])
    assert (tmp_path / "results" / "hypotheses" / "quality_x.beam5.en.gz").read_bytes() == first  # no timestamp
    assert gzip.decompress(first) == b"A b.\nC d.\n"


def test_each_row_of_a_long_run_keeps_its_translations_in_a_file_of_its_own(tmp_path):
    """bench/quality/converged.py: every weighting of every run, each search, a file name of its own (no spaces)."""
    from bench.quality.converged import kept_as

    record = tmp_path / "converged_fast.json"
    labels = [kept_as(run, weights, search) for run in ("fast", "luong + bahdanau")
              for weights in ("plain", "ema", "average of the 5 best (EMA)", "average of the last 5 snapshots (plain)")
              for search in ("greedy", "beam 5")]  # fmt: skip
    paths = {hypotheses.path_for(record, label) for label in labels}
    assert len(paths) == len(labels) and not any(" " in p.name or "(" in p.name for p in paths)


def test_translate_splits_its_reference_scores_by_the_training_file(trained, tmp_path, capsys):
    ckpt = str(trained["bahdanau"] / "checkpoints" / "last.ckpt")
    (tmp_path / "in.fr").write_text("Le chat dort.\nIl mange.\nJe ne mange pas.\n")
    (tmp_path / "ref.en").write_text("The cat sleeps.\nHe eats.\nI do not eat.\n")
    (tmp_path / "train.tsv").write_text("Le chat dort .\tThe cat sleeps.\n")
    args = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--ref", str(tmp_path / "ref.en")]
    assert translate_cli.main([*args, "--seen", str(tmp_path / "train.tsv")]) == 0
    captured = capsys.readouterr()
    hyps = captured.out.splitlines()
    expected = score_split(hyps, ["The cat sleeps.", "He eats.", "I do not eat."], frozenset({"The cat sleeps."}))
    for line in expected.lines():
        assert line in captured.err
    assert "unseen (2 pairs)" in captured.err and "seen (1 pairs)" in captured.err


def test_seen_needs_ref_and_a_readable_file(tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Le chat dort.\n")
    (tmp_path / "bad.tsv").write_text("one column\n")
    (tmp_path / "ref.en").write_text("The cat sleeps.\n")
    src = ["--ckpt", "never-opened.ckpt", "--input", str(tmp_path / "in.fr")]
    for extra, says in [
        (["--seen", str(tmp_path / "bad.tsv")], "--seen: only with --ref, whose scores it splits"),
        (["--ref", str(tmp_path / "ref.en"), "--seen", str(tmp_path / "none.tsv")], "no such file"),
        (["--ref", str(tmp_path / "ref.en"), "--seen", str(tmp_path / "bad.tsv")], "bad.tsv:1: no second"),
    ]:
        assert translate_cli.main([*src, *extra]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], (extra, err)


COMMANDS = {"translate": translate_cli, "align": align_cli, "serve": serve_cli, "export": export_cli,
            "average": average_cli}  # fmt: skip


def foreign_options(help_text: str, name: str, options: dict[str, set[str]]) -> list[str]:
    """The options a help text names that are not options of the command they are named for: on a line, an option
    belongs to the last ``<command>.py`` named before it, else to the command whose help it is (``name``)."""
    wrong = []
    for line in help_text.splitlines():
        owner = name
        for m in re.finditer(r"\b(\w+)\.py\b|(?<![\w.-])(--[a-z][a-z0-9-]*)", line):
            if m[1]:
                owner = m[1]
            elif m[2] not in options.get(owner, {m[2]}):  # a command not checked here (train.py: Hydra keys)
                wrong.append(f"{name}: {m[2]} ({owner}.py has no such option): {line.strip()}")
    return wrong


def test_every_help_text_names_options_its_command_has(monkeypatch):
    parsers = {name: parser_of(command.main, monkeypatch, ["--ckpt", "x"]) for name, command in COMMANDS.items()}
    options = {name: {s for a in p._actions for s in a.option_strings} for name, p in parsers.items()}
    wrong = [w for name, p in parsers.items() for w in foreign_options(p.format_help(), name, options)]
    assert not wrong, wrong
    assert foreign_options("  --align-links  default: or with --adapt-links", "translate", options) != []
    assert foreign_options("python align.py --adapt-links eflomal", "translate", options) == []
