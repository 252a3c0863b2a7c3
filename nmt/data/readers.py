"""Reading parallel corpora: TSV files and pairs of plain-text files.

Every problem names the file and line. Per-line problems (a missing column, invalid
UTF-8) raise :class:`CorpusError` or, with ``on_bad_line="skip"``, are counted and logged;
whole-file problems (missing, empty, mismatched line counts) always raise.
"""

from __future__ import annotations

import logging
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


class CorpusError(ValueError):
    """A corpus that cannot be read as asked; the message is one line naming file and line."""


def normalize(text: str) -> str:
    """Unicode NFC, whitespace runs (tabs, non-breaking spaces ...) to one space, stripped."""
    return " ".join(unicodedata.normalize("NFC", text).split())


@dataclass
class Pairs:
    """Sentence pairs of one split, with gold alignments where the corpus has them."""

    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    sure: list[str] | None = None  # "i-j i-j ..." per pair (French word i, English word j)
    possible: list[str] | None = None

    def __len__(self) -> int:
        return len(self.src)

    def select(self, keep: list[int]) -> Pairs:
        pick = lambda xs: None if xs is None else [xs[i] for i in keep]  # noqa: E731
        return Pairs(pick(self.src), pick(self.tgt), pick(self.sure), pick(self.possible))


class _Skips:
    """Counts skipped lines per reason and logs the first few line numbers."""

    def __init__(self, path: Path, on_bad_line: str, hint: str = " (set data.on_bad_line=skip to skip such lines)"):
        if on_bad_line not in ("error", "skip"):
            raise ValueError(f"on_bad_line must be 'error' or 'skip', not {on_bad_line!r}")
        self.path, self.on_bad_line = path, on_bad_line
        self.hint = hint
        self.lines: dict[str, list[int]] = {}

    def bad(self, lineno: int, reason: str) -> None:
        if self.on_bad_line == "error":
            raise CorpusError(f"{self.path}:{lineno}: {reason}{self.hint}")
        self.lines.setdefault(reason, []).append(lineno)

    def report(self) -> None:
        for reason, lines in self.lines.items():
            first = ", ".join(map(str, lines[:5])) + (" ..." if len(lines) > 5 else "")
            log.warning("%s: skipped %d line(s) with %s (lines %s)", self.path, len(lines), reason, first)


def _read_lines(path: str | Path | None, allow_empty: bool = False) -> list[bytes]:
    """The lines of a file (standard input for None), without their ``\n`` or ``\r\n``."""
    if path is not None and not Path(path).is_file():
        raise CorpusError(f"{path}: no such file")
    data = Path(path).read_bytes() if path is not None else sys.stdin.buffer.read()
    if not allow_empty and not data.strip():
        raise CorpusError(f"{path}: file is empty")
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def read_lines(path: str | Path | None) -> list[str]:
    """Text lines of a file, or of standard input for None; empty lines are kept, invalid UTF-8 names file:line."""
    skips = _Skips(Path(path) if path is not None else Path("<stdin>"), "error", hint="")
    return [_decode(raw, n, skips) for n, raw in enumerate(_read_lines(path, allow_empty=True), 1)]


def _decode(raw: bytes, lineno: int, skips: _Skips) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        skips.bad(lineno, f"invalid UTF-8 at byte {e.start}")
        return None


def read_tsv(
    path: str | Path,
    src_col: int = 0,
    tgt_col: int = 1,
    align_cols: tuple[int, int] | None = None,
    on_bad_line: str = "error",
) -> Pairs:
    """Pairs from a tab-separated file; ``align_cols`` are the sure/possible alignment columns."""
    skips = _Skips(Path(path), on_bad_line)
    pairs = Pairs(sure=[] if align_cols else None, possible=[] if align_cols else None)
    need = max(src_col, tgt_col, *(align_cols or ())) + 1
    for lineno, raw in enumerate(_read_lines(path), 1):
        line = _decode(raw, lineno, skips)
        if line is None:
            continue
        cols = line.split("\t")
        if len(cols) < need:
            skips.bad(lineno, f"{len(cols)} tab-separated column(s), expected at least {need}")
            continue
        pairs.src.append(normalize(cols[src_col]))
        pairs.tgt.append(normalize(cols[tgt_col]))
        if align_cols:
            pairs.sure.append(cols[align_cols[0]].strip())
            pairs.possible.append(cols[align_cols[1]].strip())
    skips.report()
    return pairs


def read_parallel(src_path: str | Path, tgt_path: str | Path, on_bad_line: str = "error") -> Pairs:
    """Pairs from two line-aligned plain-text files."""
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise CorpusError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}: "
            "parallel files must match line for line"
        )
    src_skips, tgt_skips = _Skips(Path(src_path), on_bad_line), _Skips(Path(tgt_path), on_bad_line)
    pairs = Pairs()
    for lineno, (s_raw, t_raw) in enumerate(zip(src_lines, tgt_lines), 1):
        s, t = _decode(s_raw, lineno, src_skips), _decode(t_raw, lineno, tgt_skips)
        if s is not None and t is not None:
            pairs.src.append(normalize(s))
            pairs.tgt.append(normalize(t))
    src_skips.report()
    tgt_skips.report()
    return pairs
