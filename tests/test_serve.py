"""The translation server: its batcher, its API in-process, a real server on a loopback port under concurrent
load and shutdown, and its page in a real browser. Every answer is checked against translate.py's."""

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from forked import run_script

from conftest import ROOT, TRAIN_ENV, headless_chromium
from nmt.cli import align as align_cli
from nmt.cli import translate as cli
from nmt.cli.view_files import html_sentences
from nmt.inference.loading import load_model
from nmt.serving.batcher import Batcher, QueueFull
from nmt.serving.server import Limits, create_app
from nmt.serving.service import TranslationService
from nmt.views.translation_attention import sentence_attention

WORDS = "le chat chien mange dort la pomme rouge petit grand il elle voit aime".split()
SENTENCES = [" ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(3 + i % 6)) + " ." for i in range(40)]


@pytest.fixture(scope="module")
def ckpt(trained):
    return str(trained["transformer"] / "checkpoints" / "last.ckpt")


@pytest.fixture(scope="module")
def service(ckpt):
    return TranslationService(load_model([ckpt], torch.device("cpu")))


def reference(ckpt, tmp_path, lines, beam, nbest=1, *more: str) -> list[str]:
    """translate.py's output for ``lines``, as a separate process would print it."""
    (tmp_path / "in.fr").write_text("\n".join(lines) + "\n")
    args = ["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--output", str(tmp_path / "out"), *more]
    assert cli.main([*args, "--beam-size", str(beam), "--nbest", str(nbest)]) == 0
    return (tmp_path / "out").read_text().split("\n")[:-1]


# --- the batcher, with a stand-in for the model -------------------------------------------------------------------


def test_concurrent_requests_share_batches_and_each_gets_its_own_lines():
    batches = []

    def run(key, lines):
        batches.append((key, list(lines)))
        time.sleep(0.01)
        return [f"{key}:{line.upper()}" for line in lines]

    async def main():
        batcher = Batcher(run, cost=len, max_wait=0.02, max_tokens=40)
        await batcher.start()
        requests = [(i % 2, [f"r{i}a", f"r{i}b"]) for i in range(24)]
        answers = await asyncio.gather(*(batcher.submit(k, lines) for k, lines in requests))
        await batcher.stop()
        return requests, answers, batcher.stats

    requests, answers, stats = asyncio.run(main())
    for (key, lines), got in zip(requests, answers):
        assert got == [f"{key}:{line.upper()}" for line in lines]  # its own lines, in order, nothing swapped
    assert len(batches) < len(requests)  # requests that came together ran together
    for key, lines in batches:  # one key a batch, within the token budget (each request costs 2 x 4 = 8 tokens)
        assert all(line.startswith("r") for line in lines) and sum(map(len, lines)) <= 40
        assert all(int(line[1:-1]) % 2 == key for line in lines)
    assert stats.requests == 24 and stats.lines == 48 and stats.waiting == 0
    assert stats.batches == len(batches) and stats.busy_s >= 0.01 * len(batches)


def test_without_batching_every_request_runs_alone():
    sizes = []

    async def main():
        batcher = Batcher(lambda k, lines: sizes.append(len(lines)) or lines, max_wait=0.05, enabled=False)
        await batcher.start()
        await asyncio.gather(*(batcher.submit(0, ["a", "b"]) for _ in range(6)))
        await batcher.stop()

    asyncio.run(main())
    assert sizes == [2] * 6


def test_a_full_queue_refuses_and_a_failed_batch_fails_only_its_requests():
    gate = threading.Event()

    def run(key, lines):
        gate.wait(5)
        if "boom" in lines:
            raise RuntimeError("boom")
        return lines

    async def main():
        batcher = Batcher(run, max_wait=0, max_tokens=1, max_queue=4)
        await batcher.start()
        first = asyncio.ensure_future(batcher.submit(0, ["a"]))  # runs, held at the gate
        await asyncio.sleep(0.05)
        queued = [asyncio.ensure_future(batcher.submit(0, [x, x])) for x in ("b", "boom")]
        await asyncio.sleep(0.01)
        with pytest.raises(QueueFull):  # 4 lines wait: no room for one more
            await batcher.submit(0, ["c"])
        gate.set()
        results = await asyncio.gather(first, *queued, return_exceptions=True)
        after = await batcher.submit(0, ["d"])  # the worker goes on after a failed batch
        await batcher.stop()
        return results, after

    (first, b, boom), after = asyncio.run(main())
    assert first == ["a"] and b == ["b", "b"] and isinstance(boom, RuntimeError) and after == ["d"]


# --- the API, in-process ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(service):
    from fastapi.testclient import TestClient

    app = create_app(service, Batcher(service.run, service.cost), Limits(max_lines=8, max_chars=300, max_beam=8))
    with TestClient(app) as c:
        yield c


def test_answers_are_translate_py_s(client, ckpt, tmp_path):
    lines = SENTENCES[:6]
    got = client.post("/translate", json={"src": lines, "beam_size": 3, "nbest": 2}).json()["translations"]
    rows = [r.split("\t") for r in reference(ckpt, tmp_path, lines, beam=3, nbest=2)]
    assert [[(h["tgt"], f"{h['score']:.4f}") for h in t["nbest"]] for t in got] == [
        [(text, score) for i, score, text in rows if int(i) == n] for n in range(len(lines))
    ]
    assert [t["tgt"] for t in got] == [t["nbest"][0]["tgt"] for t in got] and [t["src"] for t in got] == lines
    greedy = client.post("/translate", json={"src": lines, "beam_size": 1}).json()["translations"]
    assert [t["tgt"] for t in greedy] == reference(ckpt, tmp_path, lines, beam=1)


def test_attention_is_the_viewer_s(client, service):
    [answer] = client.post("/translate", json={"src": [SENTENCES[3]], "attention": True}).json()["translations"]
    translator = service.translator(service.defaults)
    [result] = translator.translate([SENTENCES[3]])
    views = sentence_attention(service.model, service.tok, result.source, result.parts, choice=service.alignment)
    assert answer["attention"] == json.loads(json.dumps([v.to_json() for v in views]))
    assert len(answer["attention"][0]["hypotheses"][0]["heads"]) == 2  # every layer (the tiny model has 2)


def test_opennmt_clients_get_opennmt_s_answer(client, ckpt, tmp_path):
    lines = SENTENCES[:3]
    got = client.post("/translator/translate", json=[{"src": s, "id": 100} for s in lines]).json()
    assert [[set(a) for a in rank] for rank in got] == [[{"src", "tgt", "n_best", "pred_score"}] * 3]
    assert [a["tgt"] for a in got[0]] == reference(ckpt, tmp_path, lines, beam=5)
    assert [a["src"] for a in got[0]] == lines and all(a["n_best"] == 1 for a in got[0])


# every kind of line translate.py accepts: empty, whitespace, characters sentencepiece drops, control characters
# and other whitespace inside a line, a line long enough to be split (--max-src-len 12 below)
ODD_LINES = ["le chat dort .", "", " \t ", "je ne sais pas .", "\u200b\ufeff", "le\x07 chat\x0b dort\x1f .",
             " ".join(SENTENCES[:4]), "il\u00a0dort\u2028 .", "\x00"]  # fmt: skip


@pytest.mark.parametrize("long_lines", ["split", "truncate"])
def test_every_kind_of_line_is_answered_as_translate_py_answers_it(ckpt, tmp_path, long_lines):
    from fastapi.testclient import TestClient

    from nmt.inference.translator import Batching

    service = TranslationService(
        load_model([ckpt], torch.device("cpu")), batching=Batching(max_src_len=12, long_lines=long_lines)
    )
    more = ("--max-src-len", "12", "--long-lines", long_lines)
    with TestClient(create_app(service, Batcher(service.run, service.cost))) as client:
        got = client.post("/translate", json={"src": ODD_LINES, "beam_size": 2, "nbest": 2}).json()["translations"]
        onmt = client.post("/translator/translate", json=[{"src": s} for s in ODD_LINES]).json()
        seen = client.post("/translate", json={"src": ODD_LINES, "attention": True}).json()["translations"]
    # the attention: what translate.py --html draws of the same lines (nothing for a line with nothing in it)
    translator = service.translator(service.defaults)
    drawn = html_sentences(translator.translate(ODD_LINES), translator)
    assert [v for t in seen for v in t["attention"]] == json.loads(json.dumps(drawn))
    assert [len(t["attention"]) == 0 for t in seen] == [t["tgt"] == "" for t in seen]
    assert [t["tgt"] for t in got] == reference(ckpt, tmp_path, ODD_LINES, 2, 1, *more)
    rows = [r.split("\t") for r in reference(ckpt, tmp_path, ODD_LINES, 2, 2, *more)]
    for n, t in enumerate(got):  # translate.py --nbest writes no row for a line with nothing to translate
        expected = [(text, score) for i, score, text in rows if int(i) == n] or [("", "0.0000")] * 2
        assert [(h["tgt"], f"{h['score']:.4f}") for h in t["nbest"]] == expected
        assert t["src"] == ODD_LINES[n] and t["tgt"] == t["nbest"][0]["tgt"] and t["score"] == t["nbest"][0]["score"]
    assert {n for n, t in enumerate(got) if t["tgt"] == ""} == {1, 2, 4}  # and only those are empty
    assert [a["tgt"] for a in onmt[0]] == reference(ckpt, tmp_path, ODD_LINES, 5, 1, *more)
    assert all(onmt[0][n]["pred_score"] == 0.0 for n in (1, 2, 4))


def test_health_and_model(client, ckpt):
    assert client.get("/health").json()["status"] == "ok"
    info = client.get("/model").json()
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert info["kind"] == "transformer" and info["attention"] == {"layers": 2, "heads": 4}
    [member] = info["checkpoints"]
    assert member["file"] == "last.ckpt" and member["step"] == saved["global_step"]
    best = next(v for k, v in saved["callbacks"].items() if "RunCheckpoint" in k)["best_model_score"]
    assert member["validation_bleu"] == round(float(best), 2)
    assert info["vocabulary"]["target"] == saved["hyper_parameters"]["tgt_vocab_size"]
    assert info["languages"] == {"source": "fr", "target": "en"}
    assert "/translate" in client.get("/openapi.json").json()["paths"]


def test_a_reference_per_line_is_aligned_as_align_py_aligns_it(client, ckpt, tmp_path):
    src, ref = SENTENCES[:3] + ["", "le chat ."], ["the cat eats the apple .", "he sleeps .", "", "the dog .", "a"]
    got = client.post("/translate", json={"src": src, "ref": ref, "attention": True}).json()["translations"]
    (tmp_path / "in.fr").write_text("\n".join(src) + "\n")
    (tmp_path / "in.en").write_text("\n".join(ref) + "\n")
    out = tmp_path / "links"
    assert align_cli.main(["--ckpt", ckpt, "--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en"),
                           "--alignments", str(out), "--attention-dir", str(tmp_path / "att")]) == 0  # fmt: skip
    assert [" ".join(f"{i}-{j}" for i, j in a["links"]) for a in got] == out.read_text().split("\n")[:-1]
    assert [a["tgt"] for a in got] == ref and all(len(a["nbest"]) == 1 for a in got)
    for k, a in enumerate(got):  # the attention shown is that of the given translation
        parts = json.loads((tmp_path / "att" / f"{k}.json").read_text())["parts"] if a["attention"] else []
        assert a["attention"] == parts
    assert got[0]["links"] and got[2]["links"] == got[3]["links"] == []  # an empty side: nothing to align


def test_with_a_model_trained_the_other_way_a_reference_is_aligned_by_both_as_align_py_does(
    ckpt, trained_reverse, tmp_path
):
    from fastapi.testclient import TestClient

    src = SENTENCES[:4] + ["", "le chat ."]
    ref = ["the cat eats the apple .", "he sleeps .", "a dog", "", "x", "the cat ."]
    (tmp_path / "in.fr").write_text("\n".join(src) + "\n")
    (tmp_path / "in.en").write_text("\n".join(ref) + "\n")
    for rule in ("grow-diag-final-and", "intersection", "union"):
        reverse = load_model([str(trained_reverse)], torch.device("cpu"))
        service = TranslationService(load_model([ckpt], torch.device("cpu")), reverse=reverse, symmetrisation=rule)
        with TestClient(create_app(service, Batcher(service.run, service.cost), Limits(max_lines=8))) as client:
            got = client.post("/translate", json={"src": src, "ref": ref}).json()["translations"]
            info = client.get("/model").json()
        out = tmp_path / f"links-{rule}"
        assert align_cli.main(["--ckpt", ckpt, "--reverse-ckpt", str(trained_reverse), "--symmetrisation", rule,
                               "--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en"),
                               "--alignments", str(out)]) == 0  # fmt: skip
        assert [" ".join(f"{i}-{j}" for i, j in a["links"]) for a in got] == out.read_text().split("\n")[:-1], rule
        assert info["reverse"]["languages"] == {"source": "en", "target": "fr"}
        assert info["reverse"]["symmetrisation"] == rule
    assert [a["tgt"] for a in got] == ref and got[0]["links"] and got[4]["links"] == []


BAD = [  # body, status, what the one line must name
    (b'{"src": ["le chat"', 400, "invalid JSON"),
    (b'{"src": ["\xff\xfe le chat"]}', 400, "UTF-8"),
    (b'{"src": "le chat"}', 422, "src"),
    (b'{"src": [3]}', 422, "src[0]"),
    (b'{"src": []}', 422, "src"),
    (json.dumps({"src": ["a" * 1_000_000]}).encode(), 413, "body"),
    (json.dumps({"src": ["le chat"] * 10_000}).encode(), 413, "src"),
    (json.dumps({"src": ["le chat " * 40]}).encode(), 413, "src[0]"),
    (b'{"src": ["le chat"], "file": "/etc/passwd"}', 422, "file"),
    (b'{"src": ["le chat"], "beam_size": 0}', 422, "beam_size"),
    (b'{"src": ["le chat"], "beam_size": 10000}', 422, "beam_size"),
    (b'{"src": ["le chat"], "beam_size": "5"}', 422, "beam_size"),
    (b'{"src": ["le chat"], "beam_size": 2, "nbest": 3}', 422, "nbest"),
    (b'[{"src": "le chat"}]', 422, "body"),
    (b'{"src": ["le chat", "il dort"], "ref": ["the cat"]}', 422, "ref"),
    (json.dumps({"src": ["le chat"], "ref": ["the cat " * 300]}).encode(), 413, "ref[0]"),
    (b'{"src": ["le chat"], "ref": "the cat"}', 422, "ref"),
    # a field the request's work would not use: a pair is aligned, not searched (align.py has neither)
    (b'{"src": ["le chat"], "ref": ["the cat"], "beam_size": 2}', 422, "beam_size: not with ref"),
    (b'{"src": ["le chat"], "ref": ["the cat"], "nbest": 1}', 422, "nbest: not with ref"),
    (b'{"src": ["le chat"], "ref": ["the cat"], "beam_size": 1, "nbest": 1}', 422, "beam_size: not with ref"),
]


@pytest.mark.parametrize("body,status,field", BAD, ids=[f"{i}-{s}-{f}" for i, (_, s, f) in enumerate(BAD)])
def test_bad_input_is_one_line_naming_the_field_and_the_server_goes_on(client, body, status, field):
    r = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    message = r.json()["error"]
    assert field in message and "\n" not in message and len(message) < 300
    assert client.post("/translate", json={"src": ["le chat dort ."]}).status_code == 200


# --- a real server ------------------------------------------------------------------------------------------------


class Server:
    """``serve.py`` in its own process on a free loopback port."""

    def __init__(self, *args: str):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        cmd = [sys.executable, str(ROOT / "serve.py"), "--port", "0", "--no-access-log", *args]
        sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731 - Ctrl-C even where we ignore it
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, preexec_fn=sigint)
        self.log = []
        for line in self.proc.stderr:
            self.log.append(line)
            if m := re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line):
                self.port = int(m.group(1))
                break
        else:
            raise AssertionError("serve.py did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        self.wait_ready()

    def wait_ready(self):
        for _ in range(200):
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("serve.py does not answer")

    def request(self, method, path, body=None, conn=None):
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})  # fmt: skip
        r = conn.getresponse()
        return r.status, json.loads(r.read()), dict(r.getheaders())

    def stop(self, sig=signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(60)


@pytest.mark.slow
def test_32_clients_get_translate_py_s_answers(ckpt, tmp_path):
    expected = dict(zip(SENTENCES, reference(ckpt, tmp_path, SENTENCES, beam=2)))
    server = Server("--ckpt", ckpt, "--beam-size", "2")
    try:

        def client(c: int) -> list[tuple[str, str]]:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)  # keep-alive, as clients do
            got = []
            for r in range(20):
                line = SENTENCES[(c * 20 + r) % len(SENTENCES)]
                status, body, _ = server.request("POST", "/translate", {"src": [line]}, conn)
                assert status == 200, body
                got.append((line, body["translations"][0]["tgt"]))
            return got

        with ThreadPoolExecutor(32) as pool:
            answers = [a for got in pool.map(client, range(32), timeout=240) for a in got]
        assert len(answers) == 640 and all(tgt == expected[src] for src, tgt in answers)
        health = server.request("GET", "/health")[1]
        assert health["requests"] == 640 and health["batches"] < 640  # concurrent requests shared batches
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_a_full_queue_answers_503_with_retry_after(ckpt):
    server = Server("--ckpt", ckpt, "--max-queue", "8", "--max-lines", "8", "--beam-size", "2")
    try:
        request = {"src": SENTENCES[:8]}  # one request fills the queue while another runs
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: server.request("POST", "/translate", request), range(16), timeout=240))
        refused = [(body, headers) for status, body, headers in answers if status == 503]
        assert refused and all(status in (200, 503) for status, _, _ in answers)
        assert all("queue is full" in body["error"] and headers["retry-after"] == "1" for body, headers in refused)
        assert server.request("POST", "/translate", {"src": ["le chat dort ."]})[0] == 200  # and it goes on
    finally:
        assert server.stop() == 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_answers_what_is_in_flight_then_exits_0(ckpt, tmp_path, sig):
    lines = SENTENCES[:8]
    expected = reference(ckpt, tmp_path, lines, beam=2)
    server = Server("--ckpt", ckpt, "--beam-size", "2")
    with ThreadPoolExecutor(6) as pool:
        pending = [pool.submit(server.request, "POST", "/translate", {"src": lines}) for _ in range(6)]
        while (health := server.request("GET", "/health")[1])["requests"] < 6:
            time.sleep(0.005)
        assert health["lines"] < 6 * len(lines)  # not all answered yet: some are in flight
        code = server.stop(sig)
        answers = [p.result(60) for p in pending]
    assert code == 0, "".join(server.log)
    assert all(status == 200 and [t["tgt"] for t in body["translations"]] == expected for status, body, _ in answers)
    with pytest.raises(OSError):  # it no longer listens
        server.request("GET", "/health")


@pytest.mark.slow
def test_bad_options_and_a_taken_port_are_one_line(ckpt, tmp_path):
    env = TRAIN_ENV
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    for args, named in (
        (["--ckpt", ckpt, "--beam-size", "0"], "--beam-size"),
        (["--ckpt", ckpt, "--beam-size", "20"], "--max-beam"),
        (["--ckpt", ckpt, "--max-lines", "99", "--max-queue", "10"], "--max-lines"),
        (["--ckpt", ckpt, "--port", "70000"], "--port"),
        (["--ckpt", str(junk), "--port", "0"], "junk.ckpt"),
        (["--ckpt", ckpt, "--reverse-ckpt", ckpt, "--port", "0"], f"--reverse-ckpt {ckpt}: translates fr→en"),
    ):
        proc = run_script([sys.executable, "serve.py", *args], ROOT, env)
        assert proc.returncode == 1 and named in proc.stderr, proc.stderr
        assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


# --- the page, in a real browser -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_person_types_french_and_sees_the_translation_and_its_attention(ckpt, service, tmp_path):
    from nmt.alignment.choice import AttentionChoice, attention_map
    from nmt.serving.service import Options

    server = Server("--ckpt", ckpt, "--beam-size", "3", "--max-chars", "300")
    driver = headless_chromium(tmp_path)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    try:
        driver.get(f"http://127.0.0.1:{server.port}/")
        assert not driver.find_elements(By.CSS_SELECTOR, "svg.heatmap")
        hostile = '<img src=x onerror="document.title=1">'
        driver.find_element(By.ID, "src").send_keys(SENTENCES[5] + "\n" + hostile)
        nbest = driver.find_element(By.ID, "nbest")
        nbest.clear()
        nbest.send_keys("2")
        driver.find_element(By.ID, "go").click()
        WebDriverWait(driver, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "div.hyp")) == 4)
        expected = service.translator(Options(3, 2)).translate([SENTENCES[5], hostile])
        metas = [m.text for m in driver.find_elements(By.CSS_SELECTOR, "div.hyp > .meta")]
        shown = [re.match(r"(?:#\d )?(.*?)\s+\(score", m).group(1) for m in metas]
        assert shown == [t for r in expected for t in r.texts]  # the n-best of each line, as translate.py's
        headings = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
        assert headings[1] == f"2. {hostile}" and not driver.find_elements(By.CSS_SELECTOR, "#sentences img")
        assert driver.find_elements(By.CSS_SELECTOR, "div.hyp line.link")

        # the selector: layer 0, head 2 draws that head's map of the answer's attention
        layer, head = Select(driver.find_element(By.ID, "layer")), Select(driver.find_element(By.ID, "head"))
        assert [o.get_attribute("value") for o in layer.options] == ["0", "1"]
        layer.select_by_value("0")
        head.select_by_value("2")
        body = {"src": [SENTENCES[5]], "beam_size": 3, "nbest": 2, "attention": True}
        hyp = server.request("POST", "/translate", body)[1]["translations"][0]["attention"][0]["hypotheses"][0]
        readout = Select(driver.find_element(By.ID, "readout")).first_selected_option.get_attribute("value")
        want = attention_map(torch.tensor(hyp["heads"]), AttentionChoice(0, 2, readout))
        box = driver.find_element(By.CSS_SELECTOR, "div.hyp")
        cells = box.find_elements(By.CSS_SELECTOR, "svg.heatmap rect.cell")
        drawn = torch.tensor([float(c.get_attribute("data-weight")) for c in cells]).view(want.shape)
        assert torch.allclose(drawn, want, atol=6e-4)
        driver.find_element(By.ID, "words").click()  # word level
        assert driver.find_elements(By.CSS_SELECTOR, 'div.hyp svg.heatmap[data-kind="words"]')
        assert driver.title != "1"

        driver.find_element(By.ID, "src").clear()  # a refusal is shown, in one line
        driver.find_element(By.ID, "src").send_keys("x" * 400)
        driver.find_element(By.ID, "go").click()
        WebDriverWait(driver, 30).until(lambda d: "characters" in d.find_element(By.ID, "status").text)
        assert "src[0]" in driver.find_element(By.ID, "status").text
    finally:
        driver.quit()
        assert server.stop() == 0


# --- hostile and slow clients, against a real server -------------------------------------------------------------


def raw_exchange(port: int, data: bytes, shut: bool = False, timeout: float = 30) -> tuple[int | None, bytes]:
    """Send ``data`` as it is on a fresh connection (``shut``: then close the sending side) and read the answer:
    its status and body, or (None, b"") where the server closed without one."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"content-length: (\d+)", head, re.I)
            if length and len(body) >= int(length.group(1)):
                break
    if not answer:
        return None, b""
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def post_bytes(body: bytes, length: int | None = None) -> bytes:
    head = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    return head % (len(body) if length is None else length) + body


@pytest.mark.slow
def test_hostile_clients_get_one_line_and_the_others_their_answers(ckpt, tmp_path):
    odd = ["le \x00 chat dort .", "le chat\u2028dort .", "il dort\x85 ."]
    expected = dict(zip(SENTENCES + odd, reference(ckpt, tmp_path, SENTENCES + odd, beam=2)))
    server = Server("--ckpt", ckpt, "--beam-size", "2", "--body-timeout", "1")
    try:
        with ThreadPoolExecutor(24) as pool:  # 16 clients that send half a body and wait, beside a real one
            slow = [pool.submit(raw_exchange, server.port, post_bytes(b'{"src": ["le', 40)) for _ in range(16)]
            status, body, _ = server.request("POST", "/translate", {"src": SENTENCES[:4]})
            assert status == 200 and [t["tgt"] for t in body["translations"]] == [expected[s] for s in SENTENCES[:4]]
            for answer in slow:  # each one answered 408 in one line once its time was up, its connection closed
                status, body = answer.result(30)
                assert status == 408 and json.loads(body) == {"error": "body: not received in full within 1 s"}
        cases = [  # what was sent, the status, what the one line says
            (post_bytes(b'{"src": ["le chat dort ."]}', 5), 400, "body: invalid JSON"),  # a length too short
            (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", 400, "Invalid HTTP request"),
            (post_bytes(b'{"src": ["le chat \\ud800 dort"]}'), 422, "src[0]: not valid Unicode (a lone surrogate"),
            (post_bytes(b'{"src": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 400, "body: JSON nested too deeply"),
            (post_bytes(b'{"src": ["a"], "x": ' + b'{"a":' * 5000 + b"1" + b"}" * 5001), 400, "nested too deeply"),
        ]
        for data, status, message in cases:
            got, body = raw_exchange(server.port, data)
            assert got == status and message in body.decode() and b"\n" not in body.strip(), (data[:80], body)
        # a length longer than what is sent, then the client closes: nothing to answer, nothing held
        assert raw_exchange(server.port, post_bytes(b'{"src": ["le chat"]}', 100), shut=True)[0] in (None, 400, 408)
        # valid but unusual JSON: NUL, U+2028, U+0085 inside a line are translated as translate.py translates them
        status, body, _ = server.request("POST", "/translate", {"src": odd})
        assert status == 200 and [t["tgt"] for t in body["translations"]] == [expected[s] for s in odd]
        assert server.request("GET", "/health")[0] == 200  # and it goes on
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_96_concurrent_requests_each_get_their_own_lines(ckpt, tmp_path):
    expected = dict(zip(SENTENCES, reference(ckpt, tmp_path, SENTENCES, beam=2)))
    requests = [[SENTENCES[(r * 5 + k) % len(SENTENCES)] for k in range(1 + r % 8)] for r in range(96)]
    server = Server("--ckpt", ckpt, "--beam-size", "2")
    try:
        with ThreadPoolExecutor(96) as pool:
            answers = list(pool.map(lambda lines: server.request("POST", "/translate", {"src": lines}), requests))
        for lines, (status, body, _) in zip(requests, answers):
            assert status == 200 and [t["src"] for t in body["translations"]] == lines
            assert [t["tgt"] for t in body["translations"]] == [expected[s] for s in lines]
    finally:
        assert server.stop() == 0


@pytest.mark.slow
def test_sigterm_with_a_long_request_and_a_stalled_client_in_flight(ckpt, tmp_path):
    long_lines = [" ".join(SENTENCES[k : k + 6]) for k in range(8)]  # translated in parts (--max-src-len 12)
    expected = reference(ckpt, tmp_path, long_lines, 4, 1, "--max-src-len", "12")
    server = Server("--ckpt", ckpt, "--beam-size", "4", "--max-src-len", "12", "--body-timeout", "3")
    with ThreadPoolExecutor(2) as pool:
        stalled = pool.submit(raw_exchange, server.port, post_bytes(b'{"src": ["le', 40))
        pending = pool.submit(server.request, "POST", "/translate", {"src": long_lines})
        while server.request("GET", "/health")[1]["requests"] < 1:
            time.sleep(0.005)
        started = time.monotonic()
        code = server.stop()
        status, body, _ = pending.result(60)
        assert stalled.result(60)[0] in (408, None)  # answered 408 at its time, or closed by the shutdown
    assert code == 0 and time.monotonic() - started < 30, "".join(server.log)
    assert status == 200 and [t["tgt"] for t in body["translations"]] == expected
