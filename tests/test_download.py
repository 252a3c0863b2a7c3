import hashlib
import http.server
import io
import threading
import zipfile

import pytest

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
