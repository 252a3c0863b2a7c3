"""The prepared-data cache is never trusted wrongly: edits are seen, every file is written whole, damage is named."""

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import datamodule, run_train
from nmt.data import atomic
from nmt.data.encoded import CorpusWriter
from nmt.data.readers import CorpusError
from nmt.data.sources import content_hash

SPM = dict(vocab_size=120, model_type="bpe")


def corpus(path, n=300, word="chat"):
    lines = [f"le {word} {i} mange\tthe cat {i} eats" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def prepared(tmp_path, f, **settings):
    dm = datamodule("tsv", path=str(f), cache_dir=str(tmp_path / "cache"), spm=SPM, **settings)
    dm.prepare_data()
    dm.setup()
    return dm


def test_an_edit_that_keeps_the_size_and_sets_the_mtime_back_is_seen(tmp_path):
    f = corpus(tmp_path / "c.tsv")
    first = prepared(tmp_path, f)
    st = os.stat(f)
    corpus(f, word="rat_")  # the same size: "chat" -> "rat_"
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r, cp -p, rsync -t
    assert os.stat(f).st_size == st.st_size and os.stat(f).st_mtime_ns == st.st_mtime_ns
    second = prepared(tmp_path, f)
    assert second.prepared_dir != first.prepared_dir
    assert second.references("valid").src[0].split()[1] == "rat_"


def test_a_damaged_hash_index_is_rebuilt(tmp_path, caplog):
    f = corpus(tmp_path / "c.tsv")
    cache = tmp_path / "cache"
    right = content_hash(f, cache)
    for junk in (b"{not json", b'{"x": 3}', b"\x00" * 10):
        (cache / "hashes.json").write_bytes(junk)
        with caplog.at_level("WARNING"):
            assert content_hash(f, cache) == right
        assert "hashes.json: damaged; hashing the input files again" in caplog.text
        caplog.clear()
    assert json.loads((cache / "hashes.json").read_text())  # written back whole


@pytest.mark.parametrize(
    "damage, file, reason",
    [
        ("truncate", "train/src.ids", "bytes, "),
        ("truncate", "valid/tgt.offsets", "bytes, "),
        ("junk", "train/meta.json", "unreadable"),
        ("junk", "tokenizer/tgt.model", "unreadable sentencepiece models"),
        ("junk", "valid.json", "unreadable"),
        ("junk", "stats.json", "unreadable"),
        ("remove", "test/src.lens", "missing"),
        ("max_id", "train/src.ids", "ids up to 120, the vocabulary has 120"),
    ],
)
def test_a_damaged_prepared_file_is_named_with_what_to_do(pristine, tmp_path, damage, file, reason):
    f, made = pristine
    cache = tmp_path / "cache"
    shutil.copytree(made.parent.parent, cache)  # a copy of the prepared cache, damaged here
    d = cache / made.relative_to(made.parent.parent)
    path = d / file
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-3])
    elif damage == "junk":
        path.write_bytes(b"\x00junk")
    elif damage == "remove":
        path.unlink()
    else:  # arrays of another vocabulary: an id the embedding would not have
        meta = json.loads((path.parent / "meta.json").read_text())
        meta["max_id"]["src"] = 120
        (path.parent / "meta.json").write_text(json.dumps(meta))
    where = "tokenizer" if "tokenizer" in file else file
    with pytest.raises(CorpusError) as e:
        prepared(tmp_path, f)
    message = str(e.value)
    assert message.startswith(f"{d / where}: damaged prepared data (") and reason in message, message
    assert message.endswith(f"delete {d} and run again to prepare it anew"), message
    if damage == "junk" and file == "tokenizer/tgt.model":  # the advice, followed (the same for every damage)
        shutil.rmtree(d)
        assert prepared(tmp_path, f).prepared_dir == d


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Path]:
    """A corpus and its prepared folder, made once: each damage is done to a copy of its cache."""
    folder = tmp_path_factory.mktemp("pristine")
    f = corpus(folder / "c.tsv")
    return f, prepared(folder, f).prepared_dir


@pytest.mark.slow
def test_train_py_with_a_damaged_cache_is_one_line(data_cache, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(data_cache, cache)
    tiny = dict(source=dict(train_size=600, valid_size=24, test_size=24), spm=dict(vocab_size=300))  # TINY_DATA
    datamodule(cache_dir=str(cache), **tiny).prepare_data()
    for ids in cache.glob("prepared/*/train/src.ids"):
        ids.write_bytes(ids.read_bytes()[:10])
    proc = run_train(tmp_path / "run", cache, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "src.ids: damaged prepared data (10 bytes, " in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("split,side,workers", [("train", "src", 1), ("train", "tgt", 0), ("valid", "tgt", 1)])
def test_ids_beyond_the_vocabulary_are_named_where_they_are_read(data_cache, tmp_path, split, side, workers):
    """The arrays overwritten in place (same size, meta.json untouched): the load-time checks cannot see it."""
    import numpy as np

    cache = tmp_path / "cache"
    shutil.copytree(data_cache, cache)
    tiny = dict(source=dict(train_size=600, valid_size=24, test_size=24), spm=dict(vocab_size=300))  # TINY_DATA
    dm = datamodule(cache_dir=str(cache), **tiny)
    dm.prepare_data()
    ids = dm.prepared_dir / split / f"{side}.ids"  # the cache holds the en->fr run's corpus too
    data = np.fromfile(ids, dtype=np.uint16)
    data[len(data) // 2 :: 7] = 4000  # some pairs in the middle of the file, ids of no vocabulary
    data.tofile(ids)
    proc = run_train(tmp_path / "run", cache, f"data.num_workers={workers}", check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert last.startswith(f"error: {ids}: damaged prepared data (pair ") and "has id 4000" in last, last
    root = last.split("; delete ", 1)[1].split(" and run again")[0]
    assert root.startswith(str(cache)) and (dm.prepared_dir == Path(root) or Path(root) in dm.prepared_dir.parents)
    if (split, side) == ("train", "src"):  # the advice, followed once (a whole training run): it trains
        shutil.rmtree(root)
        assert run_train(tmp_path / "rerun", cache, f"data.num_workers={workers}").returncode == 0


def test_an_interrupted_sentencepiece_save_is_never_trusted(tmp_path, monkeypatch):
    f = corpus(tmp_path / "c.tsv")
    real = atomic.write_bytes

    def full_disk(path, data):
        if path.name == "tgt.model":
            raise atomic.folder_error(OSError(errno.ENOSPC, "No space left on device"), path.parent)
        real(path, data)

    monkeypatch.setattr(atomic, "write_bytes", full_disk)
    with pytest.raises(OSError, match=r"cannot write in .*: No space left on device"):
        prepared(tmp_path, f)
    spm = tmp_path / "cache" / "spm"
    assert not [p for p in spm.iterdir() if p.is_dir()], "no half-written model folder under its final name"
    monkeypatch.setattr(atomic, "write_bytes", real)
    assert prepared(tmp_path, f).tokenizer.tgt_vocab_size > 0  # the next run trains and prepares


def test_a_full_disk_names_the_folder_and_leaves_nothing(tmp_path, monkeypatch):
    f = corpus(tmp_path / "c.tsv")

    def full(self, *args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CorpusWriter, "append", full)
    with pytest.raises(OSError) as e:
        prepared(tmp_path, f)
    assert str(e.value) == f"cannot write in {tmp_path / 'cache' / 'prepared'}: No space left on device"
    assert not list((tmp_path / "cache" / "prepared").iterdir())
