"""The effect of each command option that no other test observed (tests/option_effects.py places every option): the
option given through the command's own parsing, and an assertion that fails where the option is dropped or ignored.
The server is run in-process from ``nmt.cli.serve.prepared_server`` (its socket bound, its model loaded, as ``serve.py``
starts it) and asked through FastAPI's test client."""

from __future__ import annotations

import io
import socket
import sys
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch

from nmt import checkpoint
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.cli import align as align_cli
from nmt.cli import serve as serve_cli
from nmt.cli import translate as translate_cli
from nmt.errors import run
from nmt.inference import loading
from nmt.inference.translator import Translator

SENTENCES = ["le chat mange la pomme rouge .", "il dort .", "le petit chien voit la grande maison rouge .",
             "elle aime le chat ."]  # fmt: skip
REFERENCES = ["the cat eats the red apple .", "he sleeps .", "the small dog sees the big red house .",
              "she likes the cat ."]  # fmt: skip


@pytest.fixture(scope="module")
def ckpt(trained) -> str:
    return str(trained["transformer"] / "checkpoints" / "last.ckpt")


@pytest.fixture
def files(tmp_path) -> SimpleNamespace:
    (tmp_path / "in.fr").write_text("".join(s + "\n" for s in SENTENCES))
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in REFERENCES))
    return SimpleNamespace(fr=str(tmp_path / "in.fr"), en=str(tmp_path / "in.en"), dir=tmp_path)


@pytest.fixture
def threads():
    """torch's thread count as it was, after a test that sets it through ``--threads``."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def translated(capsys, *argv: str) -> list[str]:
    assert translate_cli.main(list(argv)) == 0
    return capsys.readouterr().out.split("\n")[:-1]


def aligned(capsys, *argv: str) -> list[str]:
    assert align_cli.main(list(argv)) == 0
    return capsys.readouterr().out.split("\n")[:-1]


@contextmanager
def served(*argv: str):
    """``serve.py`` with these options, prepared as it starts (any free port), and a client of its app."""
    from fastapi.testclient import TestClient

    ready = serve_cli.prepared_server(serve_cli._parse_args(["--port", "0", *argv]))
    try:
        with TestClient(ready.app) as client:
            yield ready, client
    finally:
        ready.sock.close()


def loads(monkeypatch) -> list:
    """Each model a command loads, with torch's thread count just after (a spy on the one loader)."""
    seen, real = [], loading.load_model

    def load(*args, **kwargs):
        model = real(*args, **kwargs)
        seen.append(SimpleNamespace(model=model, threads=torch.get_num_threads()))
        return model

    monkeypatch.setattr(loading, "load_model", load)
    return seen


def batch_sizes(monkeypatch) -> list[list[int]]:
    """The lines of each batch of each ``Translator.translate`` call."""
    seen, real = [], Translator._batches

    def cut(self, items):
        batches = real(self, items)
        seen.append([len(b) for b in batches])
        return batches

    monkeypatch.setattr(Translator, "_batches", cut)
    return seen


# --- what every command loads: --device, --threads -----------------------------------------------------------------

COMMANDS = ("translate", "align", "serve")


def run_command(name: str, files: SimpleNamespace, *argv: str) -> int:
    """The command on the test's files; the server only prepared (its model loaded), not run."""
    if name == "translate":
        return translate_cli.main(["--input", files.fr, "--output", str(files.dir / "out"), *argv])
    if name == "align":
        given = ["--input", files.fr, "--align-to", files.en, "--alignments", str(files.dir / "a")]
        return align_cli.main([*given, *argv])
    return run(lambda: serve_cli.prepared_server(serve_cli._parse_args(["--port", "0", *argv])).sock.close())


@pytest.mark.parametrize("name", COMMANDS)
def test_device_and_threads_are_what_the_model_runs_with(name, ckpt, files, monkeypatch, threads, capsys):
    seen = loads(monkeypatch)
    torch.set_num_threads(2)
    assert run_command(name, files, "--ckpt", ckpt, "--device", "cpu", "--threads", "1") == 0
    assert seen[-1].model.model.device == torch.device("cpu") and seen[-1].threads == 1
    if torch.cuda.is_available():
        assert run_command(name, files, "--ckpt", ckpt, "--device", "cuda:0") == 0
        assert seen[-1].model.model.device == torch.device("cuda:0")
    else:
        capsys.readouterr()
        assert run_command(name, files, "--ckpt", ckpt, "--device", "cuda") == 1
        assert capsys.readouterr().err.strip().startswith("error: --device=cuda: not available here")


# --- translate.py: the search, the batches, the prompt -------------------------------------------------------------


def test_the_length_penalty_changes_the_scores_and_the_output_budget_the_length(ckpt, files, capsys):
    from nmt.inference.search import SearchOptions

    base = ["--ckpt", ckpt, "--input", files.fr]
    nbest = {alpha: translated(capsys, *base, "--beam-size", "3", "--nbest", "3", "--length-penalty", alpha)
             for alpha in ("0", "2")}  # fmt: skip
    scores = {alpha: [row.split("\t")[1] for row in rows] for alpha, rows in nbest.items()}
    assert scores["0"] != scores["2"]
    loaded = loading.load_model([ckpt], torch.device("cpu"))
    plain = translated(capsys, *base)
    for a, b in (("0", "3"), ("0.2", "1")):  # a budget of a x source length + b tokens
        search = SearchOptions(max_len_a=float(a), max_len_b=int(b))
        expected = [r.text for r in Translator(loaded.model, loaded.tokenizer, search).translate(SENTENCES)]
        assert translated(capsys, *base, "--max-len-a", a, "--max-len-b", b) == expected != plain, (a, b)


def test_batch_size_and_batch_type_cut_the_batches_and_leave_the_translations(ckpt, files, capsys, monkeypatch):
    seen = batch_sizes(monkeypatch)
    base = ["--ckpt", ckpt, "--input", files.fr]
    plain = translated(capsys, *base)
    assert seen[-1] == [4]  # 4,000 source tokens x beam: one batch
    for more, sizes in (
        (["--batch-type", "sentences", "--batch-size", "3"], [3, 1]),
        (["--batch-size", "3"], [1, 1, 1, 1]),  # 3 tokens: every line alone
        (["--batch-type", "sentences", "--batch-size", "1"], [1, 1, 1, 1]),
    ):
        assert translated(capsys, *base, *more) == plain and seen[-1] == sizes, more


def test_interactive_translates_each_line_typed_at_the_prompt(ckpt, files, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(s + "\n" for s in SENTENCES[:2])))
    assert translate_cli.main(["--ckpt", ckpt, "--interactive"]) == 0
    typed = capsys.readouterr()
    assert typed.err.count("fr> ") == 3  # two lines, then the end of the input
    assert typed.out.split("\n")[:-1] == translated(capsys, "--ckpt", ckpt, "--input", files.fr)[:2]


# --- align.py: the viewer, the scores it shows, eflomal's settings -------------------------------------------------


def test_align_py_s_viewer_shows_the_given_pairs_with_the_scores_its_length_penalty_gives(ckpt, files, capsys):
    import json

    base = ["--ckpt", ckpt, "--input", files.fr, "--align-to", files.en]
    scores = {}
    for alpha in ("0", "2"):
        page, folder = files.dir / f"{alpha}.html", files.dir / f"att-{alpha}"
        aligned(capsys, *base, "--html", str(page), "--attention-dir", str(folder), "--length-penalty", alpha)
        shown = [json.loads((folder / f"{i}.json").read_text()) for i in range(len(SENTENCES))]
        assert [s["translation"] for s in shown] == REFERENCES  # the given translations, not the model's
        scores[alpha] = [s["parts"][0]["hypotheses"][0]["score"] for s in shown]
        text = page.read_text()
        assert all(json.dumps(r)[1:-1] in text for r in REFERENCES)  # the viewer's pairs: the given ones
    assert scores["0"] != scores["2"]


def test_eflomal_s_options_reach_the_links_that_guide_adapting(ckpt, files, capsys, monkeypatch):
    from nmt.inference import pair_links

    seen = {}

    def guide(given, sources, targets, corpus, settings, languages):
        seen.update(given=given, corpus=corpus, settings=settings)
        return [{(0, 0)} for _ in sources]  # eflomal itself: tests/test_eflomal.py

    monkeypatch.setattr(pair_links, "pair_links", guide)
    corpus = files.dir / "corpus.tsv"
    corpus.write_text("".join(f"{s}\t{r}\n" for s, r in zip(SENTENCES, REFERENCES)))
    base = ["--ckpt", ckpt, "--input", files.fr, "--align-to", files.en, "--adapt-epochs", "1"]
    aligned(capsys, *base, "--adapt-links", "eflomal")
    default = seen["settings"]
    assert seen["corpus"] is None
    aligned(capsys, *base, "--adapt-links", "eflomal", "--adapt-corpus", str(corpus), "--adapt-draws", "3",
            "--adapt-lines", "raw")  # fmt: skip
    assert seen["given"] == "eflomal" and seen["corpus"] == str(corpus)
    assert (seen["settings"].draws, seen["settings"].lines) == (3, "raw") != (default.draws, default.lines)


# --- serve.py: the search, the batches, the attention read, the limits and the socket ------------------------------


def test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does(ckpt, files, capsys, monkeypatch):
    options = ["--beam-size", "3", "--nbest", "2", "--length-penalty", "2", "--max-len-a", "0.5", "--max-len-b", "3",
               "--max-src-len", "4", "--long-lines", "truncate", "--batch-type", "sentences", "--batch-size", "3"]
    rows = [r.split("\t") for r in translated(capsys, "--ckpt", ckpt, "--input", files.fr, *options)]
    expected = [[(text, score) for i, score, text in rows if int(i) == n] for n in range(len(SENTENCES))]
    seen = batch_sizes(monkeypatch)
    answers = {}
    for name, more in (("given", options), ("default", [])):
        with served("--ckpt", ckpt, *more) as (_, client):
            got = client.post("/translate", json={"src": SENTENCES}).json()["translations"]
        answers[name] = [[(h["tgt"], f"{h['score']:.4f}") for h in t["nbest"]] for t in got]
        if name == "given":
            assert seen[-1] == [3, 1]  # one request's four lines, three a batch
    assert answers["given"] == expected != answers["default"]


def test_the_server_reads_the_attention_its_options_choose_as_align_py_does(ckpt, trained_reverse, files, capsys):
    recorded = checkpoint.load_checkpoint(ckpt).checkpoint.alignment.links
    other = next(c for c in COMBINATIONS if c != recorded)
    choice = ["--align-layer", "0", "--align-head", "1", "--align-readout", "input", "--align-links", other]
    pair = ["--reverse-ckpt", str(trained_reverse), "--symmetrisation", "union"]
    base = ["--ckpt", ckpt, "--input", files.fr, "--align-to", files.en]
    links = {}
    for name, more in (("default", []), ("chosen", choice), ("pair", [*choice, *pair])):
        with served("--ckpt", ckpt, *more) as (_, client):
            got = client.post("/translate", json={"src": SENTENCES, "ref": REFERENCES}).json()["translations"]
        links[name] = [" ".join(f"{i}-{j}" for i, j in a["links"]) for a in got]
        assert links[name] == aligned(capsys, *base, *more), name
    assert len({tuple(v) for v in links.values()}) == 3


def test_the_server_s_limits_are_its_options(ckpt):
    limits = ["--max-lines", "2", "--max-body", "400", "--beam-size", "2", "--max-beam", "2"]
    with served("--ckpt", ckpt, *limits) as (_, client):
        assert client.post("/translate", json={"src": SENTENCES[:2]}).status_code == 200
        assert client.post("/translate", json={"src": SENTENCES[:3]}).status_code == 413  # --max-lines
        assert client.post("/translate", json={"src": [SENTENCES[0] * 20], "beam_size": 1}).status_code == 413
        assert client.post("/translate", json={"src": SENTENCES[:1], "beam_size": 3}).status_code == 422  # --max-beam
    with served("--ckpt", ckpt) as (_, client):  # the defaults let each through
        assert client.post("/translate", json={"src": SENTENCES[:3]}).status_code == 200
        assert client.post("/translate", json={"src": [SENTENCES[0] * 20], "beam_size": 1}).status_code == 200
        assert client.post("/translate", json={"src": SENTENCES[:1], "beam_size": 3}).status_code == 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_listens_gathers_and_logs_as_its_options_say(ckpt):
    port = free_port()
    given = ["--host", "127.0.0.1", "--port", str(port), "--max-wait-ms", "50", "--batch-tokens", "64",
             "--no-access-log"]  # fmt: skip
    with served("--ckpt", ckpt, *given) as (ready, _):
        assert ready.sock.getsockname()[:2] == ("127.0.0.1", port)
        assert (ready.batcher.max_wait, ready.batcher.max_tokens, ready.batcher.enabled) == (0.05, 64, True)
        assert ready.config.access_log is False
    with served("--ckpt", ckpt, "--no-batching") as (ready, _):
        assert ready.batcher.enabled is False and ready.config.access_log is True
        assert (ready.batcher.max_wait, ready.batcher.max_tokens) != (0.05, 64)


def test_every_request_is_answered_alone_without_batching(ckpt):
    """--no-batching: two requests at once are two batches; gathered, they are one."""
    from concurrent.futures import ThreadPoolExecutor

    for more, batches in ((["--max-wait-ms", "300"], 1), (["--no-batching"], 2)):
        with served("--ckpt", ckpt, *more) as (ready, client):
            ask = lambda line: client.post("/translate", json={"src": [line]}).status_code  # noqa: E731
            with ThreadPoolExecutor(2) as pool:
                assert list(pool.map(ask, SENTENCES[:2])) == [200, 200]
            assert ready.batcher.stats.batches == batches, more
