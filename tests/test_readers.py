import logging

import pytest

from nmt.data.readers import CorpusError, normalize, read_parallel, read_tsv


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
