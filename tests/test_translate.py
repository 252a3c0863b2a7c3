import json
import os
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from forked import run_script

import align as align_cmd
import translate as cli
from conftest import ROOT
from nmt import checkpoint
from nmt.alignment.links import parse_links, pharaoh
from nmt.alignment.symmetrisation import COMBINATIONS, combined
from nmt.alignment.words import piece_words
from nmt.data.toy import grammar as toy
from nmt.inference.adaptation import Adaptation, Job, adapted, adapted_together, guidance
from nmt.inference.aligner import Aligner, reading
from nmt.inference.loading import load_model
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator, translate

SENTENCES = ["Le chat mange la pomme rouge.", "", "Est-ce que tu dors ?", "Je ne mange pas.", ""]


@pytest.fixture(scope="module")
def ckpt(trained):
    return str(trained["bahdanau"] / "checkpoints" / "last.ckpt")


def run_cli(args, stdin_text=None, capsys=None, command=cli):
    code = command.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def run_align(args, capsys):
    return run_cli(args, capsys=capsys, command=align_cmd)


def test_one_output_line_per_input_line_in_order(ckpt, tmp_path, capsys):
    long_line = " ".join(["Le petit chat mange la pomme rouge et"] * 40) + " le chien dort."
    lines = [*SENTENCES, long_line, "Il dort."]
    (tmp_path / "in.fr").write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(
        ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--beam-size", "2", "--max-src-len", "40"], capsys=capsys
    )
    assert code == 0
    got = out.split("\n")[:-1]
    assert len(got) == len(lines)
    assert got[1] == "" and got[4] == ""
    alone = translate(ckpt, [lines[0], lines[2], lines[-1]], beam_size=2)
    assert [got[0], got[2], got[-1]] == alone
    assert got[5]  # the long line was translated (in parts), not dropped


def test_nbest_sorted_by_score(ckpt, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Le chat dort.\n\nIl mange.\n")
    code, out, _ = run_cli(
        ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--beam-size", "3", "--nbest", "3"], capsys=capsys
    )
    assert code == 0
    rows = [line.split("\t") for line in out.strip("\n").split("\n")]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 2, 2, 2]  # the empty line has no hypothesis
    for i in (0, 2):
        scores = [float(r[1]) for r in rows if int(r[0]) == i]
        assert scores == sorted(scores, reverse=True)


def test_attention_export(ckpt, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Le chat mange la pomme.\nIl dort.\n")
    code, _, _ = run_cli(
        ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--attention-dir", str(tmp_path / "att")], capsys=capsys
    )
    assert code == 0
    for i in (0, 1):
        data = json.loads((tmp_path / "att" / f"{i}.json").read_text())
        view = data["parts"][0]["hypotheses"][0]  # the viewer's format (SentenceAttention.to_json)
        weights = torch.tensor(view["cross"])
        assert weights.shape == (len(view["out_pieces"]), len(view["src_pieces"]))
        assert view["text"] == data["translation"]
        rows = torch.ones(len(weights))
        if view["choice"]["readout"] == "input":  # Shift-Att: the end of sentence is no step's input
            rows[-1] = 0
        assert torch.allclose(weights.sum(-1), rows, atol=1e-3)
        png = (tmp_path / "att" / f"{i}.png").read_bytes()
        assert png.startswith(b"\x89PNG")


def test_errors_are_one_clear_line(ckpt, tmp_path, capsys):
    bad_input = tmp_path / "bad.fr"
    bad_input.write_bytes(b"Bonjour.\nCaf\xe9\n")
    not_ckpt = tmp_path / "model.ckpt"
    torch.save({"state_dict": {}}, not_ckpt)
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello")
    cases = [
        (["--ckpt", str(tmp_path / "missing.ckpt")], "checkpoint not found"),
        (["--ckpt", str(not_ckpt)], "not a checkpoint of this project"),
        (["--ckpt", str(text_file)], "not a checkpoint of this project"),
        (["--ckpt", ckpt, "--input", str(bad_input)], "bad.fr:2: invalid UTF-8"),
        (["--ckpt", ckpt, "--beam-size", "2", "--nbest", "3"], "--nbest=3: must be at most --beam-size (2)"),
        (["--ckpt", ckpt, "--input", str(bad_input), "--output", str(tmp_path / "no" / "out.en")], "cannot write"),
    ]
    for args, message in cases:
        code, out, err = run_cli(args, capsys=capsys)
        assert code == 1 and out == ""
        assert err.strip().splitlines()[-1].startswith("error: ") and message in err
    # a failed run leaves no output file pretending to be complete
    out_file = tmp_path / "out.en"
    code, _, _ = run_cli(["--ckpt", ckpt, "--input", str(bad_input), "--output", str(out_file)], capsys=capsys)
    assert code == 1 and not out_file.exists() and not list(tmp_path.glob(".translate-*"))


@pytest.mark.slow
def test_stdout_carries_only_translations(ckpt):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, str(ROOT / "translate.py"), "--ckpt", ckpt, "--beam-size", "2"]
    proc = run_script(cmd, ROOT, env, timeout=120, input="\n".join(SENTENCES) + "\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:-1] == translate(ckpt, SENTENCES, beam_size=2)


def test_reference_scores_and_python_api(ckpt, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Le chat dort.\nIl mange.\n")
    (tmp_path / "ref.en").write_text("The cat sleeps.\nHe eats.\n")
    code, out, err = run_cli(
        ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--ref", str(tmp_path / "ref.en")], capsys=capsys
    )
    assert code == 0 and "BLEU" in err and "chrF" in err and "nrefs:1" in err
    module = checkpoint.load_checkpoint(ckpt)
    results = Translator(module.model, module.tokenizer, SearchOptions(beam_size=1)).translate(["Le chat dort.", ""])
    assert len(results) == 2 and results[1].text == "" and out.split("\n")[0] != "BLEU"


def test_reference_scores_equal_sacrebleu_on_the_output(ckpt, tmp_path, capsys):
    import sacrebleu

    sources = ["Le chat dort.", "Il mange la pomme rouge.", "Est-ce que tu dors ?", "Je ne mange pas."]
    refs = ["The cat sleeps.", "He eats the red apple.", "Do you sleep?", "I do not eat."]
    (tmp_path / "in.fr").write_text("\n".join(sources) + "\n")
    (tmp_path / "ref.en").write_text("\n".join(refs) + "\n")
    code, out, err = run_cli(
        ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--ref", str(tmp_path / "ref.en")], capsys=capsys
    )
    assert code == 0
    hyps = out.split("\n")[:-1]
    bleu, chrf = sacrebleu.corpus_bleu(hyps, [refs]), sacrebleu.corpus_chrf(hyps, [refs])
    assert f"BLEU = {bleu.score:.2f}" in err and f"chrF2 = {chrf.score:.2f}" in err


def test_a_device_that_is_not_there_is_one_line(ckpt, capsys):
    cases = [(["--device", "tpu"], "--device=tpu: not a device (auto, cpu or cuda[:N])")]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "--device=cuda: not available here: no GPU (torch "))
    for args, message in cases:
        code, out, err = run_cli(["--ckpt", ckpt, *args], capsys=capsys)
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1 and message in err, (args, err)


def test_numeric_options_are_checked_up_front(ckpt, capsys):
    from nmt.cli.options import ARG_RANGES

    def must(dest: str) -> str:  # the range the option shares with conf/ (nmt/settings.py) or has of its own
        return f"must be {ARG_RANGES[dest]}"

    cases = [
        (["--max-src-len", "0"], f"--max-src-len=0: {must('max_src_len')}"),
        (["--max-src-len", "-3"], f"--max-src-len=-3: {must('max_src_len')}"),
        (["--beam-size", "0"], f"--beam-size=0: {must('beam_size')}"),
        (["--nbest", "0"], f"--nbest=0: {must('nbest')}"),
        (["--beam-size", "2", "--nbest", "3"], "--nbest=3: must be at most --beam-size (2)"),
        (["--batch-size", "0"], f"--batch-size=0: {must('batch_size')}"),
        (["--length-penalty", "-1"], f"--length-penalty=-1.0: {must('length_penalty')}"),
        (["--length-penalty", "nan"], f"--length-penalty=nan: {must('length_penalty')}"),
        (["--max-len-a", "-0.5"], f"--max-len-a=-0.5: {must('max_len_a')}"),
        (["--max-len-b", "-1"], f"--max-len-b=-1: {must('max_len_b')}"),
    ]
    for args, message in cases:
        code, out, err = run_cli(["--ckpt", ckpt, *args], capsys=capsys)
        assert code == 1 and out == "" and err.strip().splitlines() == [f"error: {message}"], (args, err)


def test_nbest_of_a_line_translated_in_parts(ckpt):
    module = checkpoint.load_checkpoint(ckpt)
    long_line = "Le petit chat mange la pomme rouge et le chien dort dans la maison."
    split = Batching(max_src_len=6)
    one = Translator(module.model, module.tokenizer, SearchOptions(beam_size=4, nbest=1), split).translate([long_line])[
        0
    ]
    many = Translator(module.model, module.tokenizer, SearchOptions(beam_size=4, nbest=3), split).translate(
        [long_line]
    )[0]
    assert len(many.parts) > 1 and len(many.texts) == len(many.scores) == min(len(h) for _, h in many.parts) == 3
    assert many.texts[0] == one.text  # row 0 joins the best of every part
    for k in range(3):  # row k: the k-th best of every part, joined, scores summed
        row = [hyps[k] for _, hyps in many.parts]
        assert many.texts[k] == " ".join(module.tokenizer.decode_tgt([h.tokens for h in row]))
        assert many.scores[k] == pytest.approx(sum(h.score for h in row))


def broken_checkpoints(ckpt, tmp_path):
    """name -> (path, expected message) for checkpoints that are damaged in one way each."""
    good = torch.load(ckpt, weights_only=True)
    variants = {
        "spm": (
            lambda c: c["nmt"]["tokenizer"].update(src=b"not a sentencepiece model"),
            "sentencepiece models are unreadable",
        ),
        "nmt_type": (lambda c: c.update(nmt="format 2"), "not a checkpoint of this project"),
        "tok_type": (
            lambda c: c["nmt"].update(tokenizer=["src", "tgt"]),
            "sentencepiece models are missing or not bytes",
        ),
        "format": (lambda c: c["nmt"].update(format=99), "checkpoint format 99 is not one this version reads"),
        "hparams": (lambda c: c["hyper_parameters"]["model"].update(dropout="high"), "model settings are invalid"),
        "unknown_key": (lambda c: c["hyper_parameters"]["model"].update(colour=3), "model settings are invalid"),
        "shape": (
            lambda c: c["hyper_parameters"]["model"]["decoder"].update(hidden_size=64),
            "weights do not fit its model settings (model.decoder.W_ctx.weight: (144, 64) saved, (192, 64) expected)",
        ),
        "target": (
            lambda c: c["hyper_parameters"]["model"]["decoder"].update(_target_="subprocess.Popen"),
            "model settings are invalid (ValueError: model.decoder._target_='subprocess.Popen': not a model part",
        ),
    }
    out = {}
    for name, (damage, message) in variants.items():
        c = torch.load(ckpt, weights_only=True)
        damage(c)
        torch.save(c, tmp_path / f"{name}.ckpt")
        out[name] = (tmp_path / f"{name}.ckpt", message)
    assert good["nmt"]["format"] == checkpoint.FORMAT
    return out


def test_checkpoints_of_the_earlier_format_still_translate(ckpt, tmp_path):
    """Format 2 named the sizes flat (enc_hidden, dec_hidden, attn_hidden ...); it is read as format 3."""
    c = torch.load(ckpt, weights_only=True)
    model = c["hyper_parameters"]["model"]
    enc, dec = model.pop("encoder"), model.pop("decoder")
    model |= dict(enc_hidden=enc["hidden_size"], enc_layers=enc["num_layers"])
    model |= dict(dec_hidden=dec["hidden_size"], attn_hidden=dec["attn_hidden"])
    c["nmt"]["format"] = 2
    torch.save(c, tmp_path / "old.ckpt")
    upgraded = checkpoint.read(tmp_path / "old.ckpt")["hyper_parameters"]["model"]
    today = checkpoint.read(ckpt)["hyper_parameters"]["model"]
    # what the old format named reads as today's keys; a key added since is absent, and its default builds the same
    # part as the old checkpoint's (a new key of bahdanau.yaml with such a default keeps this test green)
    for part in ("encoder", "decoder"):
        assert upgraded[part].items() <= today[part].items(), (part, upgraded[part], today[part])
        defaults = target_defaults(today[part]["_target_"])
        added = {k: v for k, v in today[part].items() if k not in upgraded[part]}
        assert all(defaults.get(k, object()) == v for k, v in added.items()), (part, added, defaults)
    assert {k: v for k, v in upgraded.items() if k not in ("encoder", "decoder")}.items() <= today.items()
    assert translate(str(tmp_path / "old.ckpt"), SENTENCES) == translate(ckpt, SENTENCES)


def target_defaults(target: str) -> dict:
    """The default of each keyword argument of the class ``target`` names."""
    import importlib
    import inspect

    module, _, name = target.rpartition(".")
    params = inspect.signature(getattr(importlib.import_module(module), name)).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def test_a_damaged_checkpoint_is_one_line(ckpt, tmp_path, capsys):
    for name, (path, message) in broken_checkpoints(ckpt, tmp_path).items():
        code, out, err = run_cli(["--ckpt", str(path)], capsys=capsys)
        lines = err.strip().splitlines()
        assert code == 1 and out == "" and len(lines) == 1, (name, err)
        assert lines[0].startswith(f"error: {path}: ") and message in lines[0], (name, err)


VANISHING = ["\u200b\u200b", "\ufeff", "\x01\x02\x03", "\u200b \ufeff\x7f"]  # no sentencepiece piece survives


def test_lines_that_sentencepiece_empties_are_empty_lines_everywhere(ckpt, tmp_path, capsys):
    lines = ["Le chat dort.", *VANISHING, "", "Il mange."]
    targets = ["The cat sleeps.", "hello", "\u200b", "x", "there", "", "He eats."]
    (tmp_path / "in.fr").write_text("\n".join(lines) + "\n")
    (tmp_path / "in.en").write_text("\n".join(targets) + "\n")
    base = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr")]
    code, out, _ = run_cli([*base, "--alignments", str(tmp_path / "a.txt")], capsys=capsys)
    rows, links = out.split("\n")[:-1], (tmp_path / "a.txt").read_text().split("\n")[:-1]
    assert code == 0 and len(rows) == len(links) == len(lines)
    assert rows[1:6] == [""] * 5 and links[1:6] == [""] * 5 and rows[0] and rows[6] and links[0]
    code, out, _ = run_align([*base, "--align-to", str(tmp_path / "in.en")], capsys)
    rows = out.split("\n")[:-1]
    assert code == 0 and len(rows) == len(lines) and rows[1:6] == [""] * 5 and rows[0] and rows[6]
    code, out, _ = run_cli([*base, "--beam-size", "2", "--nbest", "2"], capsys=capsys)
    assert code == 0 and {int(r.split("\t")[0]) for r in out.split("\n")[:-1]} == {0, 6}  # no hypothesis invented


def test_error_lines_carry_no_terminal_control_codes(ckpt, tmp_path, capsys):
    bold = tmp_path / "\x1b[1mbold\x1b[0m.fr"
    code, out, err = run_cli(["--ckpt", ckpt, "--input", str(bold)], capsys=capsys)
    assert code == 1 and "\x1b" not in err and "\\x1b[1mbold\\x1b[0m.fr: no such file" in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_model_trained_the_other_way_aligns_too_and_both_links_are_symmetrised(
    ckpt, trained_reverse, tmp_path, capsys
):
    back = str(trained_reverse)
    languages = (checkpoint.load_checkpoint(c).checkpoint.languages for c in (ckpt, back))
    assert tuple(languages) == (
        ("fr", "en"),
        ("en", "fr"),
    )
    fr, en = tmp_path / "in.fr", tmp_path / "in.en"
    fr.write_text("Le chat mange la pomme rouge.\nJe ne mange pas.\nLe petit chien voit la grande maison.\n")
    en.write_text("The cat eats the red apple.\nI do not eat.\nThe small dog sees the big house.\n")
    one_way = lambda *a: [parse_links(x) for x in run_align(list(a), capsys)[1].splitlines()]  # noqa: E731
    forward = one_way("--ckpt", ckpt, "--input", str(fr), "--align-to", str(en))
    reverse = [{(j, i) for i, j in x} for x in one_way("--ckpt", back, "--input", str(en), "--align-to", str(fr))]
    both = ["--ckpt", ckpt, "--reverse-ckpt", back, "--input", str(fr), "--align-to", str(en)]
    got = {rule: one_way(*both, "--symmetrisation", rule) for rule in COMBINATIONS}
    for rule, lines in got.items():
        assert lines == [combined(rule, f, r) for f, r in zip(forward, reverse)], rule
    assert got["forward"] == forward and got["reverse"] == reverse and got["intersection"] != got["union"]
    for command, args, message in (
        (align_cmd, [*both[:2], "--reverse-ckpt", ckpt, *both[4:]],
         f"--reverse-ckpt {ckpt}: translates fr→en, as --ckpt does"),
        (cli, ["--ckpt", ckpt, back, *both[4:6]], f"{ckpt} translates fr→en but {back} translates en→fr: the members"),
    ):  # fmt: skip
        code, out, err = run_cli(args, capsys=capsys, command=command)
        assert code != 0 and not out and err.strip().splitlines()[-1].startswith(f"error: {message}")
        assert "Traceback" not in err


@pytest.mark.slow  # adapts two models
def test_models_adapted_to_the_pairs_they_align_learn_them_and_align_py_aligns_with_them(
    trained, trained_reverse, tmp_path
):
    """Each model trains on the pairs it aligns (its own direction), as a statistical aligner does; the loaded
    models are left as they were, and ``align.py --adapt-epochs`` gives the links of the adapted pair."""
    grammar = toy.Grammar(7)
    pairs = [grammar.pair(max_words=10) for _ in range(48)]
    fr, en = [p.fr for p in pairs], [p.en for p in pairs]
    ckpt = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    forward, backward = (load_model([c], torch.device("cpu")) for c in (ckpt, str(trained_reverse)))
    translator = Translator(forward.model, forward.tokenizer, alignment=forward.recorded)
    plain = Aligner.of(translator, backward, "grow-diag-final-and")
    before = {k: v.clone() for k, v in forward.model.module.state_dict().items()}
    how = Adaptation(epochs=12, lr=3e-3)
    adapted = plain.adapted(fr, en, how)
    mean_score = lambda t, src, tgt: sum(r.scores[0] for r in t.force(src, tgt)) / len(src)  # noqa: E731
    assert mean_score(adapted.forward, fr, en) > mean_score(plain.forward, fr, en) + 1.0
    assert mean_score(adapted.backward, en, fr) > mean_score(plain.backward, en, fr) + 1.0
    assert all(torch.equal(v, forward.model.module.state_dict()[k]) for k, v in before.items())
    (tmp_path / "in.fr").write_text("".join(line + "\n" for line in fr))
    (tmp_path / "in.en").write_text("".join(line + "\n" for line in en))
    args = ["--ckpt", ckpt, "--reverse-ckpt", str(trained_reverse), "--input", str(tmp_path / "in.fr")]
    args += ["--align-to", str(tmp_path / "in.en"), "--adapt-epochs", "12", "--adapt-lr", "3e-3"]
    assert align_cmd.main([*args, "--alignments", str(tmp_path / "links")]) == 0
    assert (tmp_path / "links").read_text().splitlines() == [pharaoh(x) for x in adapted.align(fr, en)[1]]


def test_a_pair_adapts_at_once_in_two_processes_as_each_model_adapts_alone(trained, trained_reverse):
    """adapted_together: with two threads, the second model adapts in a process of its own while the first adapts
    here, one thread each; the weights are those of adapting each alone with one thread, and the caller's thread
    count is given back."""
    grammar = toy.Grammar(3)
    pairs = [grammar.pair(max_words=8) for _ in range(24)]
    fr, en = [p.fr for p in pairs], [p.en for p in pairs]
    ckpt = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    forward, backward = (load_model([c], torch.device("cpu")) for c in (ckpt, str(trained_reverse)))
    how = Adaptation(epochs=2, lr=3e-3)
    jobs = [Job(forward.model.module, forward.tokenizer, fr, en, how),
            Job(backward.model.module, backward.tokenizer, en, fr, how)]  # fmt: skip
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        together = adapted_together(jobs)
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)
        alone = [job.run() for job in jobs]
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(together, alone):
        assert not a.training
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not all(torch.equal(x, y) for x, y in zip(together[1].state_dict().values(),
                                                     backward.model.module.state_dict().values()))  # fmt: skip


def test_an_adaptation_shows_each_epoch_as_a_shorter_one_gives_it(trained):
    """``after_epoch`` sees after epoch e exactly the model of an e-epoch adaptation, even when it draws random
    numbers and reads the model itself, and the adaptation ends as it does without it (so one run measures every
    shorter one: bench/alignment/alignment.py --adapt-one-run)."""
    grammar = toy.Grammar(3)
    pairs = [grammar.pair(max_words=8) for _ in range(24)]
    fr, en = [p.fr for p in pairs], [p.en for p in pairs]
    loaded = load_model([str(trained["transformer"] / "checkpoints" / "last.ckpt")], torch.device("cpu"))
    translator = Translator(loaded.model, loaded.tokenizer, alignment=loaded.recorded)
    seen = {}

    def after_epoch(epoch: int, model: torch.nn.Module) -> None:
        assert not model.training
        torch.rand(3)  # a reader's own draws must not move the training's
        reading(translator, model=model).force(fr[:2], en[:2])
        seen[epoch] = {k: v.clone() for k, v in model.state_dict().items()}

    how = Adaptation(epochs=3, lr=3e-3)
    last = adapted(loaded.model.module, loaded.tokenizer, fr, en, how, after_epoch=after_epoch)
    assert sorted(seen) == [1, 2, 3]
    for epochs in (2, 3):
        alone = adapted(loaded.model.module, loaded.tokenizer, fr, en, replace(how, epochs=epochs)).state_dict()
        assert all(torch.equal(v, seen[epochs][k]) for k, v in alone.items()), epochs
    assert all(torch.equal(v, seen[3][k]) for k, v in last.state_dict().items())
    assert not all(torch.equal(v, seen[1][k]) for k, v in last.state_dict().items())


def shifted_links(fr: str, en: str) -> set[tuple[int, int]]:
    """Links no model reads by itself, and not the same turned round: English word j to French word j + 1 (the
    first French word for the last English ones)."""
    n = len(fr.split())
    return {((j + 1) % n, j) for j in range(len(en.split()))}


def agreement(found: list[set], given: list[set]) -> float:
    """1 - AER of ``found`` against ``given`` (all sure)."""
    hits = sum(len(f & g) for f, g in zip(found, given))
    return 2 * hits / (sum(map(len, found)) + sum(map(len, given)))


def guided_setting(trained, trained_reverse, tmp_path, seed: int, count: int, max_words: int) -> tuple:
    """Toy pairs with :func:`shifted_links` of each, the two models, and ``align.py``'s arguments that align the
    pairs with both, guided by those links (written under ``tmp_path``)."""
    grammar = toy.Grammar(seed)
    pairs = [grammar.pair(max_words=max_words) for _ in range(count)]
    fr, en = [p.fr for p in pairs], [p.en for p in pairs]
    given = [shifted_links(f, e) for f, e in zip(fr, en)]
    ckpt = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    forward, backward = (load_model([c], torch.device("cpu")) for c in (ckpt, str(trained_reverse)))
    for name, lines in (("in.fr", fr), ("in.en", en), ("given", map(pharaoh, given))):
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    args = ["--ckpt", ckpt, "--reverse-ckpt", str(trained_reverse), "--input", str(tmp_path / "in.fr")]
    args += ["--align-to", str(tmp_path / "in.en"), "--adapt-links", str(tmp_path / "given")]
    return fr, en, given, forward, backward, [*args, "--adapt-lr", "3e-3", "--adapt-align-weight", "5"]


@pytest.mark.slow
def test_links_given_to_adapt_with_guide_the_attention_the_aligner_reads_and_align_py_takes_them(
    trained, trained_reverse, tmp_path
):
    """Adapting with a statistical aligner's links pulls each model's recorded attention towards them (the
    reverse model's turned round): links that no model reads by itself come out of the guided pair, not of the
    pair adapted without them; ``align.py --adapt-links`` gives the guided pair's links."""
    fr, en, given, forward, backward, args = guided_setting(trained, trained_reverse, tmp_path, 11, 32, 10)
    translator = Translator(forward.model, forward.tokenizer, alignment=forward.recorded)
    how = Adaptation(epochs=12, lr=3e-3, align_weight=5.0)
    for rule in ("forward", "reverse"):  # each model alone
        pair = Aligner.of(translator, backward, rule)
        plain = agreement(pair.adapted(fr, en, how).align(fr, en)[1], given)
        guided = agreement(pair.adapted(fr, en, how, given).align(fr, en)[1], given)
        assert guided > plain + 0.05, (rule, plain, guided)
    assert align_cmd.main([*args, "--adapt-epochs", "12", "--alignments", str(tmp_path / "links")]) == 0
    expected = Aligner.of(translator, backward, "grow-diag-final-and").adapted(fr, en, how, given)
    assert (tmp_path / "links").read_text().splitlines() == [
        pharaoh(x) for x in expected.closest(fr, en, given).align(fr, en)[1]
    ]


@pytest.mark.slow  # adapts two models
def test_guided_models_are_read_as_agrees_best_with_their_guide_unless_told_how(trained, trained_reverse, tmp_path):
    """After guided adaptation the aligner reads both models' links (forward, reverse, or a model's own two
    symmetrised) and joins the pair's (a symmetrisation) as agrees best with the guiding links, as training records
    its choice against eflomal's links; ``--align-links`` and ``--symmetrisation`` fix either; one model alone too."""
    fr, en, given, forward, backward, args = guided_setting(trained, trained_reverse, tmp_path, 5, 16, 8)
    fw, bw = (Translator(m.model, m.tokenizer, alignment=m.recorded) for m in (forward, backward))
    how = Adaptation(epochs=2, lr=3e-3, align_weight=5.0)
    pair = Aligner(fw, bw, "grow-diag-final-and").adapted(fr, en, how, given)
    read = lambda a, r, s: Aligner(reading(a.forward, r), a.backward and reading(a.backward, r), s)  # noqa: E731
    every = {(r, s): agreement(read(pair, r, s).align(fr, en)[1], given) for r in COMBINATIONS for s in COMBINATIONS}
    how_read = lambda a: (a.forward.alignment.links, a.backward.alignment.links, a.symmetrisation)  # noqa: E731
    chosen = pair.closest(fr, en, given)
    got = how_read(chosen)
    assert got[0] == got[1] and every[got[1:]] == max(every.values()) > min(every.values())
    assert chosen.forward.engine is pair.forward.engine and chosen.backward.engine is pair.backward.engine
    assert how_read(pair.closest(fr, en, given, ["reverse"], ["union"])) == ("reverse", "reverse", "union")
    alone = Aligner(pair.forward)
    each = {r: agreement(read(alone, r, "").align(fr, en)[1], given) for r in COMBINATIONS}
    assert each[alone.closest(fr, en, given).forward.alignment.links] == max(each.values()) > min(each.values())
    told = min(COMBINATIONS, key=lambda r: max(every[r, s] for s in COMBINATIONS))  # a reading it would not choose
    args += ["--adapt-epochs", "2", "--align-links", told, "--alignments", str(tmp_path / "links")]
    assert align_cmd.main(args) == 0
    expected = pair.closest(fr, en, given, [told]).align(fr, en)[1]
    assert expected != chosen.align(fr, en)[1]
    assert (tmp_path / "links").read_text().splitlines() == [pharaoh(x) for x in expected]


def test_guidance_targets_are_the_given_words_pieces(trained):
    """The guided targets of a pair spread each English word's links over the pieces of the French words it is
    linked to, words numbered as the text splits on whitespace (a word of several pieces included)."""
    tok = load_model([str(trained["transformer"] / "checkpoints" / "last.ckpt")], torch.device("cpu")).tokenizer
    fr, en = "Les chaussettes rouges dorment.", "The red socks sleep."
    links = {(0, 0), (1, 2), (2, 1), (3, 3)}
    s, t = tok.encode_src([fr])[0], tok.encode_tgt([en])[0]
    sw, tw = piece_words(tok.src_pieces(s)), piece_words(tok.tgt_pieces(t))
    assert max(sw) == 3 and len(s) > 4  # some French word has several pieces
    target = guidance([set(), links], tok).pair_targets(1, np.array(s), np.array(t))
    for row, j in enumerate(tw):
        linked = [c for c, i in enumerate(sw) if (i, j) in links]
        assert target[row].nonzero()[0].tolist() == linked and target[row].sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "given,message",
    [
        ("0-0\n", "given has 1 lines but there are 2 pairs: one line of links a pair"),
        ("0-0\n0-x\n", "given:2: '0-x' is not a link i-j"),
        ("0-0\n3-0\n", "given:2: link 3-0 names French word 3 and English word 0, but the pair has 3 French and 2"),
        (None, "given: no such file"),  # "--adapt-links PATH/given: ...", before the model loads
        ("0-0\n0-0\n", "--adapt-links: only with --adapt-epochs N"),
    ],
)
def test_links_to_adapt_with_that_do_not_fit_the_pairs_are_one_line(ckpt, tmp_path, capsys, given, message):
    (tmp_path / "in.fr").write_text("le chat .\nil dort .\n")
    (tmp_path / "in.en").write_text("the cat .\nhe sleeps\n")
    if given is not None:
        (tmp_path / "given").write_text(given)
    epochs = [] if "only with" in message else ["--adapt-epochs", "1"]
    args = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en"), *epochs]
    code, out, err = run_align([*args, "--adapt-links", str(tmp_path / "given")], capsys)
    last = err.strip().splitlines()[-1]
    assert code != 0 and not out and message in last and last.startswith("error: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "more,message",
    [
        (["--adapt-epochs", "-1"], "--adapt-epochs=-1: must be an integer >= 0"),
        (["--adapt-epochs", "2", "--adapt-lr", "0"], "--adapt-lr=0.0: must be a number in (0, 1]"),
        (
            ["--adapt-epochs", "2", "--adapt-links", "eflomal", "--adapt-align-weight", "0"],
            "--adapt-align-weight=0.0: must be a number in (0, 100]",
        ),
        (["--adapt-epochs", "2", "--adapt-draws", "3"], "--adapt-draws: only with --adapt-links eflomal"),
        (
            ["--adapt-epochs", "2", "--adapt-links", "eflomal", "--adapt-draws", "0"],
            "--adapt-draws=0: must be an integer >= 1",
        ),
        (["--adapt-epochs", "2", "--ensemble"], "--adapt-epochs: Ensemble cannot adapt: give one checkpoint"),
    ],
)
def test_adaptation_options_out_of_range_are_one_line(ckpt, tmp_path, capsys, more, message):
    (tmp_path / "in.fr").write_text("le chat .\n")
    (tmp_path / "in.en").write_text("the cat .\n")
    args = ["--ckpt", ckpt, *([ckpt] if "--ensemble" in more else []), "--input", str(tmp_path / "in.fr")]
    args += ["--align-to", str(tmp_path / "in.en")]
    code, out, err = run_align([*args, *[m for m in more if m != "--ensemble"]], capsys)
    assert code != 0 and not out and err.strip().splitlines()[-1].startswith(f"error: {message}"), err
    assert "Traceback" not in err


def test_a_beam_beyond_the_model_s_vocabulary_is_one_line_whose_advice_works(ckpt, tmp_path, capsys, monkeypatch):
    """A search step takes the 2 x beam best tokens: a beam over half the target vocabulary is refused once the model
    is loaded, before any line is translated, naming the largest that works (a vocabulary of 20 made to look so)."""
    from nmt.cli import translate as translate_cli

    class Twenty:
        """The model's tokenizer, but for the size of its target vocabulary."""

        tgt_vocab_size = 20

        def __init__(self, tok):
            self.tok = tok

        def __getattr__(self, name):
            return getattr(self.tok, name)

    load = translate_cli.translation_model

    def loaded(args):
        model = load(args)
        return replace(model, tokenizer=Twenty(model.tokenizer))

    monkeypatch.setattr(translate_cli, "translation_model", loaded)
    (tmp_path / "in.fr").write_text("Le chat dort.\n")
    args = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--output", str(tmp_path / "out.en")]
    code, out, err = run_cli([*args, "--beam-size", "11"], capsys=capsys)
    assert code == 1 and out == "" and err.strip().splitlines() == [
        "error: --beam-size=11: must be at most 10 for this model (half its target vocabulary of 20)"
    ]
    assert not (tmp_path / "out.en").exists()
    assert run_cli([*args, "--beam-size", "10"], capsys=capsys)[0] == 0  # followed
    assert (tmp_path / "out.en").read_text().strip()


def test_an_output_that_cannot_be_written_is_refused_before_the_model_translates(ckpt, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Le chat dort.\nIl mange.\n")
    (tmp_path / "a_file").write_text("")
    src = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr")]
    for more, says in [
        (["--alignments", str(tmp_path / "missing" / "x.align")], "--alignments"),
        (["--html", str(tmp_path / "a_file" / "r.html")], "--html"),
        (["--attention-dir", str(tmp_path / "a_file")], "--attention-dir"),
        (["--output", str(tmp_path)], "--output"),
    ]:
        code, out, err = run_cli([*src, *more], capsys=capsys)
        assert code == 1 and out == "" and err.startswith(f"error: {says} {more[1]}: "), err
        assert "translating" not in err and ".part" not in err and ".translate-" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "in.fr"]


@pytest.mark.parametrize("option", ["--output", "--html", "--alignments"])
def test_an_output_into_a_named_pipe_is_written_into_it_never_replaced(ckpt, tmp_path, capsys, option):
    """A device or a pipe (/dev/null, /dev/stdout, a FIFO) is written into: the whole-or-nothing temporary file
    renamed over it would replace it with a file (as root, /dev/null itself)."""
    import stat
    import threading

    (tmp_path / "in.fr").write_text("Le chat dort.\n")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()), daemon=True)
    reader.start()
    code, _, _ = run_cli(["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), option, str(pipe)], capsys=capsys)
    reader.join(30)
    assert code == 0 and stat.S_ISFIFO(pipe.stat().st_mode)  # still the pipe
    assert got and got[0].strip(), got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.fr", "pipe"]
