import logging
import random
import unicodedata

import numpy as np
import pytest

from nmt.data import readers
from nmt.data.readers import (
    Block,
    CorpusError,
    Pairs,
    Skips,
    normalize,
    parallel_blocks,
    parse_parallel,
    parse_tsv,
    read_tsv,
)


def read_parallel(src_path, tgt_path, on_bad_line="error", block_lines=100_000) -> Pairs:
    """All pairs of two line-aligned files, as preparation reads them block by block."""
    src_skips, tgt_skips = Skips(src_path, on_bad_line), Skips(tgt_path, on_bad_line)
    blocks = parallel_blocks(src_path, tgt_path, block_lines)
    return Pairs.concat([parse_parallel(b, src_skips, tgt_skips)[0] for b in blocks])


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_tsv_columns_and_normalisation(tmp_path):
    f = write(tmp_path / "c.tsv", "Cafe\u0301  noir\tBlack\u00a0coffee\textra\n".encode())
    pairs = read_tsv(f)
    assert pairs.src == ["Café noir"] and pairs.tgt == ["Black coffee"]
    assert normalize("Cafe\u0301") == "Café"
    swapped = read_tsv(f, src_col=1, tgt_col=0)
    assert swapped.src == ["Black coffee"]


def test_missing_column_names_file_and_line(tmp_path):
    f = write(tmp_path / "c.tsv", b"a\tb\nonly one column\nc\td\n")
    with pytest.raises(CorpusError, match=r"c\.tsv:2: 1 tab-separated column"):
        read_tsv(f)


def test_skip_counts_and_logs_bad_lines(tmp_path, caplog):
    f = write(tmp_path / "c.tsv", b"a\tb\nbad\nc\td\n\xff\xfe\tx\ne\tf\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_tsv(f, on_bad_line="skip")
    assert pairs.src == ["a", "c", "e"]
    text = caplog.text
    assert "skipped 1 line(s)" in text and "lines 2" in text and "lines 4" in text


def test_invalid_utf8_names_line(tmp_path):
    f = write(tmp_path / "c.tsv", b"a\tb\nc\td\n\xc3\x28\tx\n")
    with pytest.raises(CorpusError, match=r"c\.tsv:3: invalid UTF-8"):
        read_tsv(f)


def test_parallel_files(tmp_path):
    src = write(tmp_path / "train.fr", b"Bonjour .\nMerci .\n")
    tgt = write(tmp_path / "train.en", b"Hello .\nThanks .\n")
    pairs = read_parallel(src, tgt)
    assert pairs.src == ["Bonjour .", "Merci ."] and pairs.tgt == ["Hello .", "Thanks ."]


def test_parallel_line_count_mismatch(tmp_path):
    src = write(tmp_path / "a.fr", b"1\n2\n3\n")
    tgt = write(tmp_path / "a.en", b"1\n2\n")
    with pytest.raises(CorpusError, match=r"a\.fr has 3 lines but .*a\.en has 2"):
        read_parallel(src, tgt)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(CorpusError, match="file is empty"):
        read_tsv(write(tmp_path / "e.tsv", b"\n\n"))
    with pytest.raises(CorpusError, match="no such file"):
        read_tsv(tmp_path / "nope.tsv")
    with pytest.raises(ValueError, match="on_bad_line"):
        read_tsv(write(tmp_path / "x.tsv", b"a\tb\n"), on_bad_line="ignore")


def test_a_byte_order_mark_is_no_part_of_the_first_sentence(tmp_path):
    """#82 §7: a file an editor saved with UTF-8's byte-order mark reads as the same file without it."""
    bom = b"\xef\xbb\xbf"
    assert read_tsv(write(tmp_path / "b.tsv", bom + b"Bonjour .\tHello .\n")).src == ["Bonjour ."]
    pairs = read_parallel(write(tmp_path / "b.fr", bom + b"Merci .\n"), write(tmp_path / "b.en", bom + b"Thanks .\n"))
    assert (pairs.src, pairs.tgt) == (["Merci ."], ["Thanks ."])
    assert readers.read_lines(write(tmp_path / "b.txt", bom + b"Salut\n")) == ["Salut"]


def test_a_folder_where_a_file_goes_is_named_so(tmp_path):
    (tmp_path / "dir").mkdir()
    with pytest.raises(CorpusError, match=r"^.*dir: a folder, not a file$"):
        read_tsv(tmp_path / "dir")
    with pytest.raises(CorpusError, match=r"^.*dir: a folder, not a file$"):
        readers.read_lines(tmp_path / "dir")


@pytest.mark.parametrize("block_lines", [1, 2, 3, 100])
def test_blocks_of_any_size_read_the_same_lines(tmp_path, caplog, block_lines):
    # CRLF line ends, NFC, a bad line in each way, and a last line without its line end
    data = "a  b\tc\r\nCafe\u0301\tde\u0301ja\u0300\n".encode() + b"\xff\tbad\nno tab\r\ne\tf"
    with caplog.at_level(logging.WARNING):
        pairs = read_tsv(write(tmp_path / "c.tsv", data), on_bad_line="skip", block_lines=block_lines)
    assert pairs.src == ["a b", "Café", "e"] and pairs.tgt == ["c", "déjà", "f"]
    assert (
        "with invalid UTF-8 at byte 0 (lines 3)" in caplog.text
        and "column(s), expected at least 2 (lines 4)" in caplog.text
    )
    src = write(tmp_path / "p.fr", b"un\r\ndeux\n\ntrois")
    tgt = write(tmp_path / "p.en", b"one\r\ntwo\n\nthree\n")
    both = read_parallel(src, tgt, block_lines=block_lines)
    assert both.src == ["un", "deux", "", "trois"] and both.tgt == ["one", "two", "", "three"]


def _reference(data: bytes, tsv: bool) -> list[list[str] | None]:
    """Each line's fields as one line at a time reads them: NFC, no ``\\r`` end, whitespace collapsed."""
    out = []
    for raw in data.split(b"\n"):
        try:
            line = unicodedata.normalize("NFC", raw.decode()).removesuffix("\r")
        except UnicodeDecodeError:
            out.append(None)
            continue
        out.append([" ".join(f.split()) for f in (line.split("\t") if tsv else [line])])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_block_fields_match_reading_line_by_line(seed):
    # every kind of whitespace, and characters that share their first UTF-8 byte with some (’ « \u3001 ...)
    whitespace = [chr(c) for c in range(0x3001) if chr(c).isspace() and chr(c) not in "\t\n"]
    alphabet = [*"ab .", "e\u0301", "\u2019", "\u00ab", "\u1681", "\u3001", "\u2030", "\u00e9", *whitespace]
    rng = random.Random(seed)
    for rows in (1, 2, 7, 40):
        for _ in range(20):
            cells = rng.choice([2, 3]) if rng.random() < 0.8 else None  # None: a different count on each line

            def cell() -> str:
                return "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))

            lines = ["\t".join(cell() for _ in range(cells or rng.randrange(1, 4))) for _ in range(rows)]
            data = "\n".join(lines).encode() + (b"\xff" if rng.random() < 0.1 else b"")
            expected = _reference(data, tsv=True)
            pairs, linenos = parse_tsv(Block(1, rows, data), Skips("c.tsv", "skip"), 0, 1)
            good = [n for n, f in enumerate(expected, 1) if f is not None and len(f) >= 2]
            assert linenos == good
            assert pairs.src == [expected[n - 1][0] for n in good] and pairs.tgt == [expected[n - 1][1] for n in good]
            tgt = "\n".join(cell() for _ in range(rows)).encode()
            pairs, linenos = parse_parallel(Block(1, rows, data, tgt), Skips("a.fr", "skip"), Skips("a.en", "skip"))
            both = [(s, t) for s, t in zip(_reference(data, tsv=False), _reference(tgt, tsv=False)) if s and t]
            assert list(zip(pairs.src, pairs.tgt)) == [(s[0], t[0]) for s, t in both]


def test_picked_lines_of_a_block_are_its_lines_at_those_positions():
    rng = np.random.default_rng(0)
    lines = [bytes(rng.choice(list(b"ab \t\xc3\xa9"), rng.integers(0, 6))) for _ in range(50)]
    for end in (b"\n", b"\r\n"):
        block = Block(1, len(lines), end.join(lines), end.join(lines[::-1]))
        for size in (1, 3, 12, 13, 50):  # 12 and fewer: cut out of the block; more: split
            pick = np.sort(rng.choice(len(lines), size, replace=False))
            assert block.src_lines(pick) == [lines[i] for i in pick]
            assert block.tgt_lines(pick) == [lines[::-1][i] for i in pick]
        assert block.src_lines() == lines


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 16])
def test_blocks_cut_right_across_the_chunks_read(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(readers._LineReader, "CHUNK", chunk)
    lines = [b"x" * (i % 11) + b"\ty" * (i % 3) for i in range(60)]
    for tail in (b"\n", b""):
        f = write(tmp_path / "c.tsv", b"\n".join(lines) + tail)
        for block_lines in (1, 2, 5, 13, 100):
            blocks = list(readers.tsv_blocks(f, block_lines))
            assert [b.first for b in blocks] == list(range(1, 61, block_lines))
            assert [line for b in blocks for line in b.src_lines()] == lines
        short = write(tmp_path / "s.en", b"\n".join(lines[:30]) + tail)
        with pytest.raises(CorpusError, match=r"c\.tsv has 60 lines but .*s\.en has 30"):
            list(readers.parallel_blocks(f, short, 13))
