"""Fetching the Tatoeba / manythings.org ``fra-eng`` corpus (CC-BY 2.0 FR, see data/README.md)."""

from __future__ import annotations

import hashlib
import logging
import shutil
import urllib.request
import zipfile
from pathlib import Path

from nmt.data.readers import CorpusError

log = logging.getLogger(__name__)

# d2l.ai's copy of manythings.org's fra-eng.zip (member fra-eng/fra.txt), fixed by its SHA-1
TATOEBA_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
TATOEBA_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"


def sha1_of(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_tatoeba(
    root: str | Path, url: str = TATOEBA_URL, sha1: str | None = TATOEBA_SHA1, timeout: float = 30.0
) -> Path:
    """Return ``root/fra.txt``, downloading, verifying and unpacking the zip if it is missing."""
    root = Path(root)
    target = root / "fra.txt"
    if target.is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    archive = root / "fra-eng.zip"
    partial = archive.with_suffix(".zip.part")
    log.info("downloading %s", url)
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "nmt-attention/1.0"})
        with urllib.request.urlopen(request, timeout=timeout) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise CorpusError(
            f"could not download {url} ({e}); put the file fra.txt (from fra-eng.zip, manythings.org/anki) at {target}"
        ) from None
    if sha1 and (got := sha1_of(partial)) != sha1:
        partial.unlink()
        raise CorpusError(f"{url}: SHA-1 {got} does not match the expected {sha1}; the download is corrupt or changed")
    partial.replace(archive)
    try:
        with zipfile.ZipFile(archive) as z:
            member = next((n for n in z.namelist() if n.endswith("fra.txt")), None)
            if member is None:
                raise CorpusError(f"{archive}: no fra.txt inside the zip")
            with z.open(member) as src, open(target.with_suffix(".part"), "wb") as out:
                shutil.copyfileobj(src, out)
    except zipfile.BadZipFile:
        raise CorpusError(f"{archive}: not a valid zip file") from None
    target.with_suffix(".part").replace(target)
    return target
