"""The translations a quality record was scored on, kept beside it so that it can be scored again (a new split of its
references, another metric) without training again: ``bench/results/hypotheses/<record>.<search>.en.gz``, one line a
test pair, gzipped with no timestamp (the same translations give the same bytes).

    kept = write(Path("bench/results/quality_tatoeba_fast.json"), "beam 5", hyps)   # the path the record names
    hyps = read(kept)
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

FOLDER = "hypotheses"


def path_for(record: Path, search: str) -> Path:
    """Where the translations of ``search`` (e.g. ``beam 5``) of the record at ``record`` are kept."""
    return record.parent / FOLDER / f"{record.stem}.{search.replace(' ', '')}.en.gz"


def write(record: Path, search: str, hyps: list[str]) -> str:
    """``hyps`` kept for the record at ``record``; the path written, as the record names it."""
    path = path_for(record, search)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as f:
        f.write("".join(h.replace("\n", " ") + "\n" for h in hyps).encode("utf-8"))
    path.write_bytes(buffer.getvalue())
    return str(path)


def read(path: str | Path) -> list[str]:
    """The translations kept at ``path``, one a test pair."""
    return gzip.decompress(Path(path).read_bytes()).decode("utf-8").splitlines()
