"""Reading parallel corpora: TSV files and pairs of plain-text files.

Every problem names the file and line. Per-line problems (a missing column, invalid
UTF-8) raise :class:`CorpusError` or, with ``on_bad_line="skip"``, are counted and logged;
whole-file problems (missing, empty, mismatched line counts) always raise.
"""

from __future__ import annotations

import logging
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt.data.fields import Fields, collapse_spaces
from nmt.errors import CorpusError

log = logging.getLogger(__name__)

ON_BAD_LINE = ("error", "skip")  # data.prepare.on_bad_line: a bad line stops preparation, or is counted and skipped


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

    @staticmethod
    def concat(parts: list[Pairs]) -> Pairs:
        """The pairs of ``parts``, one after the other."""
        gold = bool(parts) and parts[0].sure is not None
        return Pairs(
            [s for p in parts for s in p.src],
            [t for p in parts for t in p.tgt],
            [a for p in parts for a in p.sure] if gold else None,
            [a for p in parts for a in p.possible] if gold else None,
        )

    def reversed(self) -> Pairs:
        """The pairs the other way round (target first), their gold links transposed."""
        flip = lambda xs: None if xs is None else [transpose_links(a) for a in xs]  # noqa: E731
        return Pairs(self.tgt, self.src, flip(self.sure), flip(self.possible))

    def select(self, keep: list[int]) -> Pairs:
        pick = lambda xs: None if xs is None else [xs[i] for i in keep]  # noqa: E731
        return Pairs(pick(self.src), pick(self.tgt), pick(self.sure), pick(self.possible))


def transpose_links(links: str) -> str:
    """Pharaoh links ``i-j ...`` as ``j-i ...`` (the pair read the other way round)."""
    return " ".join("-".join(reversed(link.split("-", 1))) for link in links.split())


class Skips:
    """Lines skipped per reason: a count and the first few line numbers (or, in ``error`` mode, a raised error)."""

    KEEP = 5  # line numbers kept per reason for the log

    HINT = " (set data.prepare.on_bad_line=skip to skip such lines)"

    def __init__(self, path: str | Path, on_bad_line: str, hint: str = HINT):
        if on_bad_line not in ON_BAD_LINE:
            raise ValueError(f"on_bad_line must be one of {', '.join(ON_BAD_LINE)}, not {on_bad_line!r}")
        self.path, self.on_bad_line, self.hint = str(path), on_bad_line, hint
        self.lines: dict[str, tuple[int, list[int]]] = {}  # reason -> (count, first line numbers)

    def bad(self, lineno: int, reason: str) -> None:
        if self.on_bad_line == "error":
            raise CorpusError(f"{self.path}:{lineno}: {reason}{self.hint}")
        count, first = self.lines.get(reason, (0, []))
        self.lines[reason] = (count + 1, first if len(first) >= self.KEEP else [*first, lineno])

    def merge(self, other: Skips) -> None:
        """Add the skips of a later stretch of the same file."""
        for reason, (count, first) in other.lines.items():
            mine, kept = self.lines.get(reason, (0, []))
            self.lines[reason] = (mine + count, (kept + first)[: self.KEEP])

    def report(self) -> None:
        for reason, (count, first) in self.lines.items():
            shown = ", ".join(map(str, first)) + (" ..." if count > len(first) else "")
            log.warning("%s: skipped %d line(s) with %s (lines %s)", self.path, count, reason, shown)


@dataclass
class Block:
    """Raw text of one stretch of a corpus: ``lines`` lines joined by newlines, without the last line end.

    The lines are numbered ``first``, ``first + 1`` ... or, for a block of scattered lines, ``linenos``.
    ``tgt`` holds the target file's lines for parallel files; for a TSV file it is None. One bytes
    object a side, not a list of lines, so that sending a block to a worker process costs a copy.
    """

    first: int
    lines: int
    src: bytes
    tgt: bytes | None = None
    linenos: list[int] | None = None

    @property
    def nbytes(self) -> int:
        """The bytes of input this block was read from (line ends included)."""
        return len(self.src) + len(self.tgt or b"") + (2 if self.tgt is not None else 1)  # + the last line end

    def numbers(self) -> Iterable[int]:
        return self.linenos if self.linenos is not None else range(self.first, self.first + self.lines)

    def src_lines(self, pick: np.ndarray | None = None) -> list[bytes]:
        """The raw lines (without ``\\r\\n``), or those at the positions ``pick``."""
        return _split(self.src, self.lines, pick)

    def tgt_lines(self, pick: np.ndarray | None = None) -> list[bytes]:
        return _split(self.tgt or b"", self.lines, pick)


def _split(blob: bytes, lines: int, pick: np.ndarray | None = None) -> list[bytes]:
    if pick is None or 4 * len(pick) > lines:  # most lines: split them all
        out = blob.split(b"\n") if lines else []
        out = out if pick is None else [out[i] for i in pick.tolist()]
    else:  # a few lines: cut them out of the block
        ends = np.append(np.flatnonzero(np.frombuffer(blob, np.uint8) == 10), len(blob))
        out = [blob[s:e] for s, e in zip((np.append(0, ends[:-1] + 1)[pick]).tolist(), ends[pick].tolist())]
    if b"\r" in blob:
        out = [line.removesuffix(b"\r") for line in out]
    return out


BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark: some editors start a file with it; it is no part of its first line


def _check_file(path: str | Path) -> None:
    if Path(path).is_dir():
        raise CorpusError(f"{path}: a folder, not a file")
    if not Path(path).is_file():
        raise CorpusError(f"{path}: no such file")


def _open(path: str | Path):
    """``path`` open for reading bytes, after its byte-order mark if it has one."""
    _check_file(path)
    f = open(path, "rb")
    if f.read(len(BOM)) != BOM:
        f.seek(0)
    return f


def _check_content(path: str | Path) -> None:
    """An error unless the file has something besides whitespace (checked before its first line is parsed)."""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if chunk.strip():
                return
    raise CorpusError(f"{path}: file is empty")


class _LineReader:
    """A binary file read ``n`` lines at a time, each stretch returned as one bytes object.

    Numpy finds the line ends of each chunk once, when it is read, and a stretch is copied once, out
    of the chunks. Reads are sized by the last stretch, so about one block is held whatever the file's size.
    """

    CHUNK = 1 << 16

    def __init__(self, f):
        self.f, self.eof, self.hint = f, False, self.CHUNK
        self.chunks: list[bytes | memoryview] = []  # read and not yet returned
        self.size = 0  # their bytes
        self.ends = np.zeros(0, np.int64)  # their line ends, as offsets from the first one's start

    def take(self, n: int) -> tuple[bytes, int]:
        """Up to ``n`` lines without the last line end, and how many there are (fewer only at the end of file)."""
        while not self.eof and len(self.ends) < n:
            chunk = self.f.read(max(self.CHUNK, self.hint - self.size, self.size // 2))
            self.eof = not chunk
            self.ends = np.concatenate((self.ends, np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10) + self.size))
            self.chunks.append(chunk)
            self.size += len(chunk)
        if len(self.ends) < n:  # the end of file: the last line may lack its line end
            blob, lines = b"".join(self.chunks), len(self.ends)
            self.chunks, self.size, self.ends = [], 0, self.ends[:0]
            return blob.removesuffix(b"\n"), lines + (1 if blob and not blob.endswith(b"\n") else 0)
        end = int(self.ends[n - 1])
        head, start = [], 0  # the chunks before the one that holds the line end, and where that one starts
        while start + len(self.chunks[0]) <= end:
            head.append(self.chunks.pop(0))
            start += len(head[-1])
        view = memoryview(self.chunks[0])
        head.append(view[: end - start])
        self.chunks[0] = view[end - start + 1 :]
        self.ends, self.size, self.hint = self.ends[n:] - (end + 1), self.size - (end + 1), end + 1
        return b"".join(head), n

    def rest(self) -> int:
        """The number of lines left."""
        n, tail = len(self.ends), b"".join(self.chunks[-1:])
        while chunk := self.f.read(self.CHUNK):
            n, tail = n + chunk.count(b"\n"), chunk
        return n + (1 if tail and not tail.endswith(b"\n") else 0)


def tsv_blocks(path: str | Path, block_lines: int) -> Iterator[Block]:
    """A file's lines in blocks of ``block_lines``, read as they are needed; an empty file is an error."""
    first = 1
    with _open(path) as f:
        reader = _LineReader(f)
        while True:
            blob, n = reader.take(block_lines)
            if not n:
                break
            if first == 1 and not blob.strip():
                _check_content(path)
            yield Block(first, n, blob)
            first += n
    if first == 1:
        raise CorpusError(f"{path}: file is empty")


def parallel_blocks(src_path: str | Path, tgt_path: str | Path, block_lines: int) -> Iterator[Block]:
    """Two line-aligned files in blocks of ``block_lines`` pairs; files of different lengths are an error."""
    first = 1
    with _open(src_path) as fs, _open(tgt_path) as ft:
        rs, rt = _LineReader(fs), _LineReader(ft)
        while True:
            (src, n_src), (tgt, n_tgt) = rs.take(block_lines), rt.take(block_lines)
            if n_src != n_tgt:
                n_src, n_tgt = first + n_src - 1 + rs.rest(), first + n_tgt - 1 + rt.rest()
                raise CorpusError(
                    f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}: parallel files must match line for line"
                )
            if not n_src:
                break
            if first == 1 and not src.strip():
                _check_content(src_path)
            yield Block(first, n_src, src, tgt)
            first += n_src
    if first == 1:
        raise CorpusError(f"{src_path}: file is empty")


def _decode(raw: bytes, lineno: int, skips: Skips) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        skips.bad(lineno, f"invalid UTF-8 at byte {e.start}")
        return None


def _decoded(blob: bytes) -> str | None:
    """A block decoded and in Unicode NFC (NFC never composes across a tab or a line end), or None if not UTF-8."""
    try:
        return unicodedata.normalize("NFC", blob.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _text_lines(blob: bytes, lines: int, numbers: Iterable[int], skips: Skips, text: str | None) -> list[str | None]:
    """A block's lines decoded and in NFC (``text``, unless the block is not UTF-8); None for a line that is not
    UTF-8 (it goes to ``skips``)."""
    if text is None:
        raw = _split(blob, lines)
        return [
            None if s is None else unicodedata.normalize("NFC", s) for s in map(_decode, raw, numbers, [skips] * lines)
        ]
    out = text.split("\n") if lines else []
    if "\r" in text:
        out = [line.removesuffix("\r") for line in out]
    return out


def parse_tsv(
    block: Block, skips: Skips, src_col: int = 0, tgt_col: int = 1, align_cols: tuple[int, int] | None = None
) -> tuple[Pairs, list[int]]:
    """The pairs of a block of TSV lines and their line numbers; bad lines go to ``skips``."""
    need = max(src_col, tgt_col, *(align_cols or ())) + 1
    text = _decoded(block.src)
    fields = Fields.of(block.src, text, block.lines, tsv=True) if text is not None else None
    if fields and fields.n >= need:  # the usual block: valid UTF-8 and the same number of columns on every line
        gold = [[f.strip() for f in fields.raw(c)] for c in align_cols] if align_cols else (None, None)
        return Pairs(fields.column(src_col), fields.column(tgt_col), *gold), list(block.numbers())
    lines = _text_lines(block.src, block.lines, block.numbers(), skips, text)
    rows = [None if line is None else line.split("\t") for line in lines]
    pairs = Pairs(sure=[] if align_cols else None, possible=[] if align_cols else None)
    linenos = []
    for lineno, cols in zip(block.numbers(), rows):
        if cols is None:
            continue
        if len(cols) < need:
            skips.bad(lineno, f"{len(cols)} tab-separated column(s), expected at least {need}")
            continue
        pairs.src.append(collapse_spaces(cols[src_col]))
        pairs.tgt.append(collapse_spaces(cols[tgt_col]))
        if align_cols:
            pairs.sure.append(cols[align_cols[0]].strip())
            pairs.possible.append(cols[align_cols[1]].strip())
        linenos.append(lineno)
    return pairs, linenos


def parse_parallel(block: Block, src_skips: Skips, tgt_skips: Skips) -> tuple[Pairs, list[int]]:
    """The pairs of a block of two parallel files' lines and their line numbers."""
    texts = _decoded(block.src), _decoded(block.tgt or b"")
    if all(t is not None for t in texts):  # the usual block: both sides valid UTF-8
        src, tgt = (Fields.of(b, t, block.lines, tsv=False) for b, t in zip((block.src, block.tgt or b""), texts))
        if src and tgt:
            return Pairs(src.column(0), tgt.column(0)), list(block.numbers())
    pairs, linenos = Pairs(), []
    src = _text_lines(block.src, block.lines, block.numbers(), src_skips, texts[0])
    tgt = _text_lines(block.tgt or b"", block.lines, block.numbers(), tgt_skips, texts[1])
    for lineno, s, t in zip(block.numbers(), src, tgt):
        if s is not None and t is not None:
            pairs.src.append(collapse_spaces(s))
            pairs.tgt.append(collapse_spaces(t))
            linenos.append(lineno)
    return pairs, linenos


def read_lines(path: str | Path | None) -> list[str]:
    """Text lines of a file, or of standard input for None; empty lines are kept, invalid UTF-8 names file:line."""
    skips = Skips(path if path is not None else "<stdin>", "error", hint="")
    if path is not None:
        _check_file(path)
    data = (Path(path).read_bytes() if path is not None else sys.stdin.buffer.read()).removeprefix(BOM)
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [_decode(raw.removesuffix(b"\r"), n, skips) for n, raw in enumerate(lines, 1)]


def read_tsv(
    path: str | Path,
    src_col: int = 0,
    tgt_col: int = 1,
    align_cols: tuple[int, int] | None = None,
    on_bad_line: str = "error",
    block_lines: int = 100_000,
) -> Pairs:
    """All pairs of a tab-separated file; ``align_cols`` are the sure/possible alignment columns."""
    skips = Skips(path, on_bad_line)
    pairs = Pairs.concat([parse_tsv(b, skips, src_col, tgt_col, align_cols)[0] for b in tsv_blocks(path, block_lines)])
    skips.report()
    return pairs
