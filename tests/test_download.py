import hashlib
import http.server
import io
import subprocess
import sys
import threading
import zipfile

import pytest

from conftest import ROOT, tiny_model_overrides
from nmt.data.download import fetch_tatoeba
from nmt.data.readers import CorpusError

FRA = "Go.\tVa !\nHi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\n"


def make_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("fra-eng/_about.txt", "about")
        z.writestr("fra-eng/fra.txt", FRA)
    return buf.getvalue()


@pytest.fixture
def server():
    payload = {"/fra-eng.zip": make_zip(), "/broken.zip": b"not a zip"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = payload.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", payload
    httpd.shutdown()


def test_download_verify_unpack(tmp_path, server):
    url, payload = server
    sha1 = hashlib.sha1(payload["/fra-eng.zip"]).hexdigest()
    path = fetch_tatoeba(tmp_path, f"{url}/fra-eng.zip", sha1)
    assert path.read_text() == FRA
    # present now: no second download, even from a dead URL
    assert fetch_tatoeba(tmp_path, f"{url}/missing.zip", sha1) == path


def test_checksum_mismatch_is_an_error(tmp_path, server):
    url, _ = server
    with pytest.raises(CorpusError, match="SHA-1"):
        fetch_tatoeba(tmp_path, f"{url}/fra-eng.zip", "0" * 40)
    assert not (tmp_path / "fra.txt").exists()


def test_not_a_zip(tmp_path, server):
    url, _ = server
    with pytest.raises(CorpusError, match="not a valid zip"):
        fetch_tatoeba(tmp_path, f"{url}/broken.zip", None)


def test_offline_says_where_to_put_the_file(tmp_path, server):
    url, _ = server
    with pytest.raises(CorpusError, match=r"put the file fra\.txt .* at .*fra\.txt"):
        fetch_tatoeba(tmp_path, f"{url}/missing.zip", None, timeout=5)
    with pytest.raises(CorpusError, match="could not download"):
        fetch_tatoeba(tmp_path, "http://127.0.0.1:9/fra-eng.zip", None, timeout=5)


def tatoeba_lines(n: int) -> list[tuple[str, str]]:
    """``n`` (English, French) pairs of the built-in corpus's grammar: a stand-in for the Tatoeba download."""
    from nmt.data.toy.grammar import Grammar

    grammar = Grammar(seed=3)
    return [(p.en, p.fr) for p in (grammar.pair(3, 12) for _ in range(n))]


EXPERIMENT = [  # tatoeba_luong itself at tiny sizes, so that 20 updates take seconds on a CPU
    "experiment=tatoeba_luong",
    "trainer.max_steps=20",
    "trainer.val_check_interval=10",
    "trainer.max_epochs=100",
    "data.prepare.spm.vocab_size=200",
    "data.max_tokens=600",
    "run_test=false",
    "callbacks.heatmaps.num_sentences=2",
    "trainer.enable_progress_bar=false",
    *tiny_model_overrides("model=luong"),  # the experiment's family
]


@pytest.mark.slow
def test_a_reference_experiment_trains_on_a_fresh_machine_from_the_download(tmp_path):
    """`train.py experiment=tatoeba_luong` with nothing beside the repository: the corpus is downloaded once (here
    from a local server standing in for its address), split by hash, and training starts."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("fra-eng/fra.txt", "".join(f"{en}\t{fr}\tCC-BY 2.0 (France)\n" for en, fr in tatoeba_lines(3000)))
    payload = buf.getvalue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/fra-eng.zip"
        sha1 = hashlib.sha1(payload).hexdigest()
        cmd = [sys.executable, str(ROOT / "train.py"), f"paths.runs={tmp_path / 'runs'}"]
        cmd += [f"paths.data_cache={tmp_path / 'data'}", f"data.source.url={url}", f"data.source.sha1={sha1}"]
        done = subprocess.run([*cmd, *EXPERIMENT], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    finally:
        httpd.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "data" / "fra-eng" / "fra.txt").is_file()
    [run] = (tmp_path / "runs").iterdir()
    assert run.name.endswith("_luong") and (run / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow
def test_a_reference_experiment_trains_on_given_splits_with_one_override(tmp_path):
    """paths.tatoeba_splits=DIR: the splits in DIR, as they are (no download, no split by hash); a folder without
    them is refused in one line naming the key."""
    pairs = tatoeba_lines(1200)
    splits = tmp_path / "fra-eng"
    splits.mkdir()
    for name, part in (("train", pairs[:1000]), ("valid", pairs[1000:1100]), ("test", pairs[1100:])):
        (splits / f"{name}.tsv").write_text("".join(f"{fr}\t{en}\n" for en, fr in part))
    cmd = [sys.executable, str(ROOT / "train.py"), f"paths.runs={tmp_path / 'runs'}"]
    cmd += [f"paths.data_cache={tmp_path / 'data'}"]
    done = subprocess.run([*cmd, *EXPERIMENT, f"paths.tatoeba_splits={splits}"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "data" / "fra-eng").exists()  # nothing downloaded
    log = next((tmp_path / "runs").iterdir()) / "train.log"
    assert "'valid': {'read': 100" in log.read_text() and "'train': {'read': 1000" in log.read_text()
    (splits / "test.tsv").unlink()
    bad = subprocess.run([*cmd, *EXPERIMENT, f"paths.tatoeba_splits={splits}"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)  # fmt: skip
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode != 0 and last.startswith(f"error: paths.tatoeba_splits={splits}: no test.tsv there"), last
