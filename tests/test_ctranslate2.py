"""export.py and the CTranslate2 engine behind translate.py and serve.py: the same answers as the PyTorch path."""

import copy
import json
from pathlib import Path

import pytest
import torch

from nmt import checkpoint
from nmt.cli import align as align_cli
from nmt.cli import export as export_cli
from nmt.cli import translate as cli
from nmt.ct2_export import head_first
from nmt.inference.loading import load_model
from nmt.inference.search import SearchOptions, length_penalty
from nmt.inference.translator import Translator
from nmt.models.transformer import MultiHeadAttention, key_mask
from nmt.specials import BOS, EOS, PAD

pytest.importorskip("ctranslate2")

LINES = ["Le chat mange la pomme rouge.", "", "Est-ce que tu dors ?", "Je ne mange pas.", "la tasse rouge", "Il dort."]


@pytest.fixture(scope="module")
def ckpt(trained, tmp_path_factory):
    """The tiny trained Transformer, its end of sentence made likelier (after 16 updates it would run every output to
    the length budget: so, hypotheses end at many lengths, by the model's choice and by the budget) and <pad> and <s>
    as unlikely as training makes them (neither is ever a target)."""
    saved = checkpoint.read(trained["transformer"] / "checkpoints" / "last.ckpt")
    bias = saved["state_dict"]["model.output.bias"]
    bias[EOS] += 2.0
    bias[[PAD, BOS]] -= 30.0
    return str(checkpoint.write(tmp_path_factory.mktemp("eos") / "ends.ckpt", saved))


@pytest.fixture(scope="module")
def exported(ckpt, tmp_path_factory):
    """The tiny Transformer exported in float32 with head 1 of layer 0 (not the first head: it must be moved)."""
    out = tmp_path_factory.mktemp("export") / "f32"
    assert export_cli.main(["--ckpt", ckpt, "--out", str(out), "--align-layer", "0", "--align-head", "1"]) == 0
    return out


def run(args, capsys, main=cli.main):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_head_first_keeps_the_layer_and_moves_the_head():
    torch.manual_seed(0)
    att = MultiHeadAttention(d_model=16, heads=4, dropout=0.0).eval()
    moved = copy.deepcopy(att)
    head_first(moved, 2)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    lens = torch.tensor([7, 4])
    before, w_before = att(x, *att.keys_values(memory), mask=key_mask(lens, 7), need_weights=True)
    after, w_after = moved(x, *moved.keys_values(memory), mask=key_mask(lens, 7), need_weights=True)
    torch.testing.assert_close(after, before, atol=1e-6, rtol=1e-5)  # the same function
    torch.testing.assert_close(w_after[:, 0], w_before[:, 2])  # head 2 is now first
    torch.testing.assert_close(w_after[:, 1:], w_before[:, [0, 1, 3]])  # the others keep their order


def test_the_engine_searches_and_scores_as_the_pytorch_path(ckpt, exported):
    """Greedy: the same hypotheses, token by token, and scores. Beam: every hypothesis the engine returns scored as
    our model scores it (GNMT penalty, end of sentence included), best first; the engine's beam search is not ours
    (it keeps every finished candidate it meets, ours those among the K best): on every line the engine's best is
    ours or a better-scored one (bench/serving/engine.py), both scored by our model."""
    torch_side, engine_side = checkpoint.load_checkpoint(ckpt), load_model([str(exported)], torch.device("cpu"))
    worse, ends = [], set()
    for beam in (1, 3):
        search = SearchOptions(beam_size=beam, nbest=beam)
        ours = Translator(torch_side.model, torch_side.tokenizer, search).translate(LINES)
        theirs = Translator(engine_side.model, engine_side.tokenizer, search).translate(LINES)
        for a, b in zip(ours, theirs):
            for (ids, hyps_a), (_, hyps_b) in zip(a.parts, b.parts, strict=True):
                if beam == 1:
                    assert [h.tokens for h in hyps_b] == [h.tokens for h in hyps_a]
                    assert hyps_b[0].score == pytest.approx(hyps_a[0].score, abs=1e-3)
                    continue
                src, n = torch.tensor([ids]), torch.tensor([len(ids)])
                for h in hyps_b:
                    logp = float(torch_side.model.read(src, n, h.tokens)[0].sum())
                    assert h.score == pytest.approx(logp / length_penalty(len(h.tokens) + 1, 0.6), abs=1e-3)
                assert [h.score for h in hyps_b] == sorted((h.score for h in hyps_b), reverse=True)
                if hyps_b[0].tokens != hyps_a[0].tokens and hyps_b[0].score < hyps_a[0].score - 1e-3:
                    worse.append((ids, hyps_a[0].score, hyps_b[0].score))
                ends |= {len(h.tokens) for h in hyps_b}
    assert not worse and len(ends) > 3  # hypotheses of many lengths: ended by EOS and the budget


def test_translate_py_on_the_engine_prints_what_it_prints_on_the_checkpoint(ckpt, exported, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    common = ["--input", str(tmp_path / "in.fr"), "--beam-size", "1", "--max-src-len", "4"]
    outputs = [run(["--ckpt", model, *common], capsys)[:2] for model in (ckpt, str(exported))]
    assert outputs[0] == outputs[1] and outputs[0][0] == 0


@pytest.mark.parametrize(
    "norm, positions, tie", [("post", "learned", False), ("pre", "learned", True), ("post", "sinusoidal", False)]
)
def test_every_transformer_variant_exports_as_the_same_function(trained, tmp_path, norm, positions, tie):
    """Post-norm (no final layer norms), learned positions, an untied output layer: each checkpoint's export reads
    every line as the checkpoint does (log-probabilities and the attention of the exported head)."""
    from nmt.models.seq2seq import build_model

    saved = checkpoint.read(trained["transformer"] / "checkpoints" / "last.ckpt")
    settings = copy.deepcopy(saved["hyper_parameters"]["model"])
    settings["tie_embeddings"] = tie
    for part in ("encoder", "decoder"):
        settings[part] |= {"norm": norm, "positions": positions, "max_positions": 64}
    tok = checkpoint.tokenizer(saved["nmt"]["tokenizer"], "test")
    torch.manual_seed(1)
    model = build_model(src_vocab_size=tok.src_vocab_size, tgt_vocab_size=tok.tgt_vocab_size, **settings)
    saved["hyper_parameters"] = {**saved["hyper_parameters"], "model": settings}
    saved["state_dict"] = {"model." + k: v for k, v in model.state_dict().items()}
    ckpt = checkpoint.write(tmp_path / "variant.ckpt", saved)
    assert export_cli.main(["--ckpt", str(ckpt), "--out", str(tmp_path / "ct2"), "--align-head", "2"]) == 0
    torch_side, engine_side = checkpoint.load_checkpoint(ckpt), load_model([str(tmp_path / "ct2")], torch.device("cpu"))
    layer = engine_side.recorded.layer
    for line, target in zip(LINES, ["The cat eats the red apple.", "", "Are you asleep?", "I do not eat.", "x", "Hi."]):
        ids, tokens = tok.encode_src([line])[0], tok.encode_tgt([target])[0]
        src, n = torch.tensor([ids or [5]]), torch.tensor([len(ids or [5])])
        logp, cross, _ = torch_side.model.read(src, n, tokens)
        logp_engine, cross_engine, _ = engine_side.model.read(src, n, tokens)
        torch.testing.assert_close(logp_engine, logp, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(cross_engine[0, 0], cross[layer, 2], atol=1e-4, rtol=1e-3)


def test_the_engine_attention_is_the_exported_head(ckpt, exported):
    torch_side = checkpoint.load_checkpoint(ckpt)
    engine_side = load_model([str(exported)], torch.device("cpu"))
    chosen = engine_side.recorded
    assert (chosen.layer, chosen.head) == (0, 1)
    search = SearchOptions(beam_size=1)
    ours = Translator(torch_side.model, torch_side.tokenizer, search, alignment=chosen).translate(LINES)
    theirs = Translator(engine_side.model, engine_side.tokenizer, search, alignment=engine_side.resolve(chosen))
    for a, b in zip(ours, theirs.translate(LINES)):
        for (_, hyps_a), (_, hyps_b) in zip(a.parts, b.parts):
            expected = hyps_a[0].attention[0, 1]  # (T + 1, S): layer 0, head 1
            torch.testing.assert_close(hyps_b[0].attention[0, 0], expected, atol=1e-4, rtol=1e-3)


def test_a_head_mean_exports_as_all_heads_of_the_layer(ckpt, tmp_path):
    choice = ["--align-layer", "-1", "--align-head", "mean"]
    assert export_cli.main(["--ckpt", ckpt, "--out", str(tmp_path / "mean"), *choice]) == 0
    torch_side = checkpoint.load_checkpoint(ckpt)
    engine_side = load_model([str(tmp_path / "mean")], torch.device("cpu"))
    assert engine_side.recorded.head is None
    tok = torch_side.tokenizer
    ids, tokens = tok.encode_src(["Le chat mange la pomme rouge."])[0], tok.encode_tgt(["The cat eats."])[0]
    src, n = torch.tensor([ids]), torch.tensor([len(ids)])
    cross = torch_side.model.read(src, n, tokens)[1]  # (layers, heads, T + 1, S)
    torch.testing.assert_close(engine_side.model.read(src, n, tokens)[1][0, 0], cross[-1].mean(0), atol=1e-4, rtol=1e-3)


def test_alignments_and_forced_alignment_agree(ckpt, exported, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    references = ["The cat eats the red apple.", "", "Are you sleeping?", "I don't eat.", "the red cup", "He sleeps."]
    (tmp_path / "ref.en").write_text("\n".join(references) + "\n")
    outputs = {}
    for name, model in (("pytorch", ckpt), ("engine", str(exported))):
        common = ["--ckpt", model, "--input", str(tmp_path / "in.fr"), "--align-layer", "0", "--align-head", "1"]
        code, forced, _ = run([*common, "--align-to", str(tmp_path / "ref.en")], capsys, align_cli.main)
        assert code == 0
        links = tmp_path / f"{name}.align"
        code, _, _ = run([*common, "--beam-size", "1", "--alignments", str(links), "--align-readout", "input"], capsys)
        assert code == 0
        outputs[name] = (forced, links.read_text())
    assert outputs["engine"] == outputs["pytorch"]
    assert any(outputs["engine"][0].split("\n"))


def test_a_quantised_export_translates(ckpt, tmp_path, capsys):
    out = tmp_path / "int8"
    assert export_cli.main(["--ckpt", ckpt, "--out", str(out), "--quantization", "int8"]) == 0
    assert json.loads((out / "nmt.json").read_text())["quantization"] == "int8"
    assert capsys.readouterr().out.strip() == str(out)  # export.py prints the folder
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    code, text, _ = run(["--ckpt", str(out), "--input", str(tmp_path / "in.fr"), "--beam-size", "2"], capsys)
    assert code == 0 and len(text.splitlines()) == len(LINES) and text.splitlines()[0]


def test_refusals_are_one_line_and_leave_nothing(trained, ckpt, exported, tmp_path, capsys, monkeypatch):
    rnn = str(trained["luong"] / "checkpoints" / "last.ckpt")
    cases = [
        (["--ckpt", rnn, "--out", str(tmp_path / "a")], "Transformers only"),
        (["--ckpt", str(tmp_path / "none.ckpt"), "--out", str(tmp_path / "b")], "checkpoint not found"),
        (["--ckpt", ckpt, "--out", str(exported)], "already exists"),
        (["--ckpt", ckpt, "--out", str(tmp_path / "no" / "c")], "does not exist"),
    ]
    for args, says in cases:
        assert export_cli.main(args) == 1
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert (exported / "model.bin").is_file()

    from ctranslate2.specs import transformer_spec

    def broken(self, output_dir):
        (Path(output_dir) / "model.bin").write_bytes(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(transformer_spec.TransformerSpec, "save", broken)
    assert export_cli.main(["--ckpt", ckpt, "--out", str(tmp_path / "d")]) == 1
    assert "conversion failed" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary one


def test_translate_refuses_what_the_engine_cannot_give(ckpt, exported, tmp_path, capsys):
    (tmp_path / "in.fr").write_text("Il dort.\n")
    base, links = ["--input", str(tmp_path / "in.fr")], ["--alignments", str(tmp_path / "links")]
    cases = [
        (["--ckpt", str(exported), str(exported)], "ensembles run on PyTorch only"),
        (["--ckpt", ckpt, str(exported)], "ensembles run on PyTorch only"),
        (["--ckpt", str(exported), "--align-head", "0", *links], "export.py --align-layer 0 --align-head 0"),
        (["--ckpt", str(exported), "--align-layer", "1", "--align-head", "1", *links], "returns only the attention"),
        (["--ckpt", ckpt, "--compute-type", "int8"], "applies to a model export.py wrote"),
        (["--ckpt", str(exported), "--compute-type", "int3"], "--compute-type"),
    ]
    for args, says in cases:
        code, out, err = run([*args, *base], capsys)
        assert code == 1 and not out and says in err and len(err.strip().splitlines()) == 1, err


def test_the_server_on_the_engine_answers_what_the_cli_answers(exported, tmp_path, capsys):
    from fastapi.testclient import TestClient

    from nmt.serving.batcher import Batcher
    from nmt.serving.server import create_app
    from nmt.serving.service import TranslationService

    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    options = ["--input", str(tmp_path / "in.fr"), "--beam-size", "2", "--nbest", "2"]
    code, out, _ = run(["--ckpt", str(exported), *options], capsys)
    assert code == 0
    cli_rows = [line.split("\t") for line in out.splitlines()]
    service = TranslationService(load_model([str(exported)], torch.device("cpu")))
    with TestClient(create_app(service, Batcher(service.run, service.cost))) as client:
        got = client.post("/translate", json={"src": LINES, "beam_size": 2, "nbest": 2, "attention": True}).json()
        info = client.get("/model").json()
    answered = [(i, h) for i, t in enumerate(got["translations"]) for h in t["nbest"] if LINES[i]]
    rows = [[str(i), f"{h['score']:.4f}", h["tgt"]] for i, h in answered]
    assert rows == cli_rows
    assert info["engine"] == "ctranslate2" and info["attention"]["exported"]["head"] == 1
    views = got["translations"][0]["attention"][0]["hypotheses"][0]
    assert views["text"] == got["translations"][0]["tgt"]


# a line far longer than the short table below: about 60 pieces
LONG_FR = " ".join(["Le chat mange la pomme rouge."] * 7)
LONG_EN = " ".join(["The cat eats the red apple."] * 7)
FITS = ["--max-src-len", "8", "--max-len-a", "1", "--max-len-b", "10"]  # lines of 8 pieces, outputs of 18: within 24


@pytest.fixture(scope="module")
def short_table(ckpt, tmp_path_factory):
    """The tiny Transformer exported with position tables of 24 rows (the checkpoint, sinusoidal, has no limit)."""
    out = tmp_path_factory.mktemp("export") / "short"
    assert export_cli.main(["--ckpt", ckpt, "--out", str(out), "--max-positions", "24"]) == 0
    assert json.loads((out / "nmt.json").read_text())["positions"] == 24
    return out


def test_lines_past_the_engine_s_table_are_cut_as_long_lines_says_or_refused_up_front(
    ckpt, short_table, tmp_path, capsys
):
    """What the table cannot hold is refused before anything runs, naming the limit and the options; within it, a
    long line is split or truncated on the engine exactly as on the checkpoint."""
    (tmp_path / "in.fr").write_text(f"{LONG_FR}\nIl dort.\n")
    given = ["--input", str(tmp_path / "in.fr"), "--beam-size", "1"]
    advice = (
        ": the model takes at most 24 positions (its exported position tables): give "
        "--max-src-len 9 or less, its output by --max-len-a 1.5 --max-len-b 10 included; longer lines are split or "
        "truncated as --long-lines says"
    )
    for m in ("256", "10"):  # 9 pieces may take 1.5 x 9 + 10 = 23 output positions, 10 would take 25
        code, out, err = run(["--ckpt", str(short_table), *given, "--max-src-len", m], capsys)
        assert code == 1 and out == "" and err.strip() == f"error: --max-src-len {m}{advice}"
    code, out, err = run(["--ckpt", str(short_table), *given, "--max-src-len", "9"], capsys)
    assert code == 0 and len(out.splitlines()) == 2  # the advice, followed, works
    for long_lines in ("split", "truncate"):
        cut = [*given, *FITS, "--long-lines", long_lines]
        outputs = [run(["--ckpt", model, *cut], capsys)[:2] for model in (ckpt, str(short_table))]
        assert outputs[0] == outputs[1] and outputs[0][0] == 0 and len(outputs[0][1].splitlines()) == 2


@pytest.mark.slow  # long lines through the real commands
def test_aligning_on_the_engine_reads_long_pairs_as_long_lines_says(ckpt, short_table, tmp_path, capsys):
    """A pair is aligned whole: past --max-src-len it is refused in one line (split) or cut (truncate), on the
    engine as on the checkpoint, never past the table and never by the engine's own input truncation."""
    (tmp_path / "in.fr").write_text(f"{LONG_FR}\nIl dort.\n")
    (tmp_path / "in.en").write_text(f"{LONG_EN}\nHe sleeps.\n")
    given = ["--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en")]
    code, out, err = run(["--ckpt", str(short_table), *given], capsys, align_cli.main)  # pairs must fit
    assert code == 1 and err.strip().startswith("error: --max-src-len 256: the model takes at most 24 positions")
    assert "give --max-src-len 23 or less;" in err
    given += ["--max-src-len", "8"]
    for model in (ckpt, str(short_table)):
        code, out, err = run(["--ckpt", model, *given], capsys, align_cli.main)
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("error: line 1: a pair of ") and "give --long-lines truncate to align its first 8" in err
    cut = [*given, "--long-lines", "truncate"]
    outputs = [run(["--ckpt", model, *cut], capsys, align_cli.main)[:2] for model in (ckpt, str(short_table))]
    assert outputs[0][0] == outputs[1][0] == 0
    links = [[line.split() for line in o[1].splitlines()] for o in outputs]
    assert len(links[0]) == len(links[1]) == 2 and all(links[0][0]) and links[0] == links[1]
    assert max(int(link.split("-")[0]) for link in links[1][0]) < 8  # only the words of the first 8 pieces


def test_the_server_on_a_short_table_refuses_at_start_or_answers_every_line(short_table):
    """serve.py with options the table cannot hold stops at start in one line; within it, a long line is answered
    (split) as translate.py answers it, and a pair too long to read whole is a 422 naming it, not a 500."""
    from fastapi.testclient import TestClient

    from nmt.inference.translator import Batching
    from nmt.serving.batcher import Batcher
    from nmt.serving.server import create_app
    from nmt.serving.service import TranslationService

    loaded = load_model([str(short_table)], torch.device("cpu"))
    with pytest.raises(ValueError, match=r"^--max-src-len 256: the model takes at most 24 positions"):
        TranslationService(loaded)
    search = SearchOptions(beam_size=1, max_len_a=1, max_len_b=10)
    service = TranslationService(loaded, search, Batching(max_src_len=8))
    with TestClient(create_app(service, Batcher(service.run, service.cost))) as client:
        answer = client.post("/translate", json={"src": [LONG_FR, "Il dort."]})
        pair = client.post("/translate", json={"src": [LONG_FR], "ref": [LONG_EN]})
    assert answer.status_code == 200 and all(t["tgt"] for t in answer.json()["translations"])
    expected = Translator(loaded.model, loaded.tokenizer, search, Batching(max_src_len=8)).translate([LONG_FR])
    assert answer.json()["translations"][0]["tgt"] == expected[0].text
    assert pair.status_code == 422 and pair.json()["error"].startswith("src[0]: a pair of ")


@pytest.mark.slow  # long lines through the real commands
def test_the_engine_scores_a_source_past_1024_pieces_whole(ckpt, tmp_path):
    """Forced decoding reads the whole source (CTranslate2's scoring would cut it at 1,024 pieces by default, while
    the attention read beside it does not): its log-probs are the checkpoint's."""
    assert export_cli.main(["--ckpt", ckpt, "--out", str(tmp_path / "wide"), "--max-positions", "1100"]) == 0
    torch_side = checkpoint.load_checkpoint(ckpt)
    engine_side = load_model([str(tmp_path / "wide")], torch.device("cpu"))
    [ids] = torch_side.tokenizer.encode_src([" ".join([LONG_FR] * 20)])
    src, n = torch.tensor([ids[:1050]]), torch.tensor([1050])
    [tokens] = torch_side.tokenizer.encode_tgt(["The cat eats the red apple."])
    logp, cross, _ = engine_side.model.read(src, n, tokens)
    expected, expected_cross, _ = torch_side.model.read(src, n, tokens)
    assert cross.shape[-1] == 1050
    torch.testing.assert_close(logp, expected, atol=2e-3, rtol=1e-3)


def test_the_readout_and_links_exported_are_how_the_engine_s_links_are_read(ckpt, tmp_path, capsys):
    from nmt.alignment.choice import READOUTS
    from nmt.alignment.symmetrisation import COMBINATIONS

    recorded = checkpoint.load_checkpoint(ckpt).checkpoint.alignment
    readout = next(r for r in READOUTS if r != recorded.readout)
    links = next(c for c in COMBINATIONS if c != recorded.links)
    head, read = ["--align-layer", "0", "--align-head", "1"], ["--align-readout", readout, "--align-links", links]
    out = tmp_path / "chosen"
    assert export_cli.main(["--ckpt", ckpt, "--out", str(out), *head, *read]) == 0
    exported_choice = load_model([str(out)], torch.device("cpu")).recorded
    assert (exported_choice.readout, exported_choice.links) == (readout, links)
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    written = {}
    for name, model in (("engine", [str(out)]), ("checkpoint", [ckpt, *head, *read]), ("recorded", [ckpt, *head])):
        path = tmp_path / f"{name}.align"
        code, _, _ = run(["--ckpt", *model, "--input", str(tmp_path / "in.fr"), "--beam-size", "1",
                          "--alignments", str(path)], capsys)  # fmt: skip
        assert code == 0
        written[name] = path.read_text()
    assert written["engine"] == written["checkpoint"] != written["recorded"]


def test_the_compute_type_is_the_engine_s_in_every_command(exported, tmp_path, monkeypatch):
    """--compute-type reaches the engine translate.py, align.py and serve.py load (float32 as exported by default)."""
    from nmt.cli import serve as serve_cli
    from nmt.inference import loading

    engines, real = [], loading.load_model
    monkeypatch.setattr(loading, "load_model", lambda *a, **k: engines.append(m := real(*a, **k)) or m)
    (tmp_path / "in.fr").write_text("Le chat dort.\n")
    (tmp_path / "in.en").write_text("The cat sleeps.\n")
    files = ["--input", str(tmp_path / "in.fr"), "--output", str(tmp_path / "out")]
    commands = {
        "translate": lambda *a: cli.main([*files, *a]),
        "align": lambda *a: align_cli.main([*files[:2], "--align-to", str(tmp_path / "in.en"), *a]),
        "serve": lambda *a: serve_cli.prepared_server(serve_cli._parse_args(["--port", "0", *a])).sock.close() or 0,
    }
    for name, command in commands.items():
        for given, compute in (([], "float32"), (["--compute-type", "int8"], "int8")):
            assert command("--ckpt", str(exported), *given) == 0
            assert engines[-1].model.translator.compute_type.startswith(compute), (name, given)
