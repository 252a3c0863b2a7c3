"""Streaming preparation: block-size independence, true line numbers, flat memory, interrupted runs, the cache key."""

import filecmp
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from conftest import ROOT, datamodule
from nmt.data import prepare as prep
from nmt.data.encoded import EncodedCorpus
from nmt.data.parallel import WorkerDied
from nmt.data.readers import CorpusError
from nmt.data.rules import Rules
from nmt.data.sample import draw_sample, sample_keys
from nmt.data.sources import Stream, content_hash, hash_split
from nmt.data.tokenizer import Tokenizer

SPM = dict(vocab_size=150, model_type="bpe")
WORDS = "chat chien maison rouge bleu petit grand mange voit le la un une très vite".split()


def corpus(path, n, bad_at=None):
    """``n`` TSV pairs of made-up words; line ``bad_at`` (1-based) has no tab."""
    rng = np.random.default_rng(n)
    with open(path, "w") as f:
        for i in range(1, n + 1):
            words = rng.choice(WORDS, rng.integers(2, 12))
            line = " ".join(words) + f" {i}" + ("" if i == bad_at else "\t" + " ".join(words[::-1]).upper())
            f.write(line + "\n")
    return path


def prepared(tmp_path, name, **settings):
    settings = dict(spm=SPM, split=dict(valid=0.05, test=0.05), max_len=30, num_workers=0) | settings
    dm = datamodule("tsv", cache_dir=str(tmp_path / name), **settings)
    dm.prepare_data()
    return dm


def files(directory):
    """The prepared files, but stats.json (it holds the phases' timings)."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and p.name != "stats.json")


def test_streamed_blocks_give_the_same_bytes_as_one_block(tmp_path):
    f = corpus(tmp_path / "c.tsv", 3000)
    one = prepared(tmp_path, "one", path=str(f), block_lines=10**6, num_proc=1).prepared_dir
    many = prepared(tmp_path, "many", path=str(f), block_lines=113, num_proc=2).prepared_dir
    assert files(one) == files(many) and "train/src.ids" in files(one)
    _, mismatch, errors = filecmp.cmpfiles(one, many, files(one), shallow=False)
    assert not mismatch and not errors
    train = EncodedCorpus.load(many / "train")
    assert 2500 < len(train) < 3000 and isinstance(train.src_flat, np.memmap)


def test_parallel_files_stream_like_a_tsv(tmp_path):
    f = corpus(tmp_path / "c.tsv", 1000)
    src, tgt = zip(*(line.split("\t") for line in f.read_text().splitlines()))
    (tmp_path / "c.fr").write_text("\n".join(src) + "\n")
    (tmp_path / "c.en").write_text("\n".join(tgt) + "\n")
    a = prepared(tmp_path, "a", path=str(f), block_lines=64, num_proc=2).prepared_dir
    b = prepared(tmp_path, "b", src=str(tmp_path / "c.fr"), tgt=str(tmp_path / "c.en"), block_lines=77).prepared_dir
    _, mismatch, errors = filecmp.cmpfiles(a, b, files(a), shallow=False)
    assert not mismatch and not errors


@pytest.mark.parametrize("num_proc", [1, 2])
def test_a_bad_line_in_the_third_block_has_its_true_line_number(tmp_path, caplog, num_proc):
    f = corpus(tmp_path / "bad.tsv", 100, bad_at=25)
    with pytest.raises(CorpusError, match=r"bad\.tsv:25: 1 tab-separated column"):
        prepared(tmp_path, "err", path=str(f), block_lines=10, num_proc=num_proc)
    assert not list((tmp_path / "err" / "prepared").glob("*")), "a failed preparation leaves nothing"
    with caplog.at_level("WARNING"):
        dm = prepared(tmp_path, "skip", path=str(f), block_lines=10, num_proc=num_proc, on_bad_line="skip")
    assert "skipped 1 line(s) with 1 tab-separated column(s), expected at least 2 (lines 25)" in caplog.text
    dm.setup()
    assert sum(len(c) for c in dm.corpus.splits.values()) == 99


def test_mismatched_parallel_files_name_both_counts(tmp_path):
    (tmp_path / "a.fr").write_text("un\ndeux\ntrois\n")
    (tmp_path / "a.en").write_text("one\ntwo\n")
    with pytest.raises(CorpusError, match=r"a\.fr has 3 lines but .*a\.en has 2"):
        prepared(tmp_path, "m", src=str(tmp_path / "a.fr"), tgt=str(tmp_path / "a.en"), block_lines=2)


def _peak_bytes(tmp_path, n):
    f = corpus(tmp_path / f"c{n}.tsv", n)
    dm = datamodule(
        "tsv",
        path=str(f),
        cache_dir=str(tmp_path / f"m{n}"),
        spm=SPM | dict(sample=1000),
        num_proc=1,
        block_lines=1000,
        split=dict(valid=0.01, test=0.01),
    )
    tracemalloc.start()
    dm.prepare_data()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.slow
def test_preparation_memory_does_not_grow_with_the_corpus(tmp_path):
    _peak_bytes(tmp_path, 2_000)  # first-use costs (imports, caches) out of the way
    small, large = _peak_bytes(tmp_path, 12_000), _peak_bytes(tmp_path, 48_000)
    # 4x the pairs: the peak is set by the block size and the sample, not the corpus (held-out text: 2%)
    assert large < 1.3 * small, (small, large)


def test_an_interrupted_preparation_is_redone_not_trusted(tmp_path, monkeypatch):
    f = corpus(tmp_path / "c.tsv", 500)

    def crash(self, *args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(prep.CorpusWriter, "close", crash)
        with pytest.raises(KeyboardInterrupt):
            prepared(tmp_path, "cache", path=str(f))
    assert not list((tmp_path / "cache" / "prepared").glob("*"))
    # a killed run (no chance to clean up) leaves a half-written directory: the next run removes it and redoes
    dm = datamodule("tsv", cache_dir=str(tmp_path / "cache"), spm=SPM, path=str(f), split=dict(valid=0.05, test=0.05))
    leftover = dm.prepared_dir.with_name(dm.prepared_dir.name + ".4242.part")
    (leftover / "train").mkdir(parents=True)
    (leftover / "train" / "src.ids").write_bytes(b"junk")
    dm.prepare_data()
    dm.setup()
    assert not leftover.exists() and len(dm.corpus.splits["train"]) > 400


def test_the_cache_key_hashes_content_once_per_size_and_mtime(tmp_path):
    f = corpus(tmp_path / "c.tsv", 300)
    cache = tmp_path / "cache"
    first = content_hash(f, cache)
    index = cache / "hashes.json"
    # the fast path: a known (path, size, mtime) is not read again
    index.write_text(index.read_text().replace(first, "0" * 40))
    assert content_hash(f, cache) == "0" * 40
    # any change of the file (here: same size, new content and time) is hashed afresh: no stale cache
    f.write_text(f.read_text().replace("chat", "CHAT"))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert content_hash(f, cache) not in (first, "0" * 40)
    dm = datamodule("tsv", cache_dir=str(cache), spm=SPM, path=str(f))
    key = dm.prepared_dir
    f.write_text(f.read_text() + "encore\tagain\n")
    assert datamodule("tsv", cache_dir=str(cache), spm=SPM, path=str(f)).prepared_dir != key


def test_the_sentencepiece_sample_is_uniform_and_independent_of_blocks(tmp_path):
    rules = Rules("error", 0.0, 0.0, 50, 3.0, 6, sample=100, seed=1)
    f = corpus(tmp_path / "c.tsv", 2000)
    stream = Stream(path=str(f), split="train")
    a = draw_sample([stream], rules, block_lines=37, num_proc=2)
    b = draw_sample([stream], rules, block_lines=5000, num_proc=1)
    assert a == b and len(a) == 100
    lines = [int(s.rsplit(" ", 1)[1]) for s in a.src]
    assert lines == sorted(lines) and np.mean(lines) == pytest.approx(1000, rel=0.15)  # spread over the file


def test_the_sample_is_the_usable_pairs_of_smallest_key_even_when_few_are_usable(tmp_path):
    # 1 line in 20 is a usable training pair (the others have an empty side or go to valid/test):
    # the first draw holds too few of them, so the sample is drawn again, larger, not cut short
    rules = Rules("skip", 0.05, 0.05, 50, 3.0, 6, sample=100, seed=3)
    lines = (tmp_path / "c.tsv").open("w")
    for i in range(1, 6001):  # every 97th line has no tab: skipped
        lines.write(f"phrase {i}" + ("\t" if i % 97 else " ") + ("sentence" if i % 20 == 0 else "") + "\n")
    lines.close()
    stream = Stream(path=str(tmp_path / "c.tsv"))
    got = draw_sample([stream], rules, block_lines=500, num_proc=2)
    numbers = np.arange(1, 6001)
    usable = [n for n in numbers if n % 20 == 0 and n % 97 and hash_split([f"phrase {n}"], 0.05, 0.05)[0] == "train"]
    keys = sample_keys(0, np.array(usable), rules.seed)
    want = sorted(np.array(usable)[np.argsort(keys)[:100]].tolist())
    assert got.src == [f"phrase {n}" for n in want] and got.tgt == ["sentence"] * 100


def test_the_training_arrays_hold_the_kept_pairs_ids_in_input_order(tmp_path):
    f = corpus(tmp_path / "c.tsv", 1500)
    src, tgt = zip(*(line.split("\t") for line in f.read_text().splitlines()))
    train = [i for i, s in enumerate(hash_split(list(src), 0.05, 0.05)) if s == "train"]
    for ratio in (3.0, 1.2):  # 1.2: the ratio rule drops pairs too
        dm = prepared(tmp_path, f"r{ratio}", path=str(f), block_lines=97, num_proc=2, max_len=10, max_ratio=ratio)
        tok = Tokenizer.load(dm.prepared_dir / "tokenizer")
        expected, dropped = [], {"length": 0, "ratio": 0}
        for s, t in zip(tok.encode_src([src[i] for i in train]), tok.encode_tgt([tgt[i] for i in train])):
            longest, shortest = max(len(s), len(t)), min(len(s), len(t))
            if longest > 10:
                dropped["length"] += 1
            elif longest >= 6 and longest > ratio * shortest:
                dropped["ratio"] += 1
            else:
                expected.append((s, t))
        assert dropped["length"] > 100 and (dropped["ratio"] > 20 or ratio == 3.0)
        got = EncodedCorpus.load(dm.prepared_dir / "train")
        assert [(got.src(i).tolist(), got.tgt(i).tolist()) for i in range(len(got))] == expected


def test_preparation_shows_its_progress_per_pass(tmp_path, caplog):
    f = corpus(tmp_path / "c.tsv", 700)
    with caplog.at_level("INFO", logger="nmt.progress"):
        prepared(tmp_path, "cache", path=str(f), num_proc=2, block_lines=100)
    lines = [r.getMessage() for r in caplog.records if r.name == "nmt.progress"]
    size = f"{f.stat().st_size / 1024:.1f}k"  # KiB
    for name in ("sampling", "encoding"):  # one closing line per pass: every byte of the input read
        assert any(x.startswith(f"{name}: 100% {size}/{size} [") and x.endswith(" pairs/s") for x in lines), lines


_ENCODE = prep._encode  # the real one, for the dying stand-in below (module level: workers unpickle it by name)


def _dying_encode(job):
    """Encode a block, but die like a process the out-of-memory killer took, at the fourth block."""
    if job[2].first > 600:
        os.kill(os.getpid(), signal.SIGKILL)
    return _ENCODE(job)


@pytest.fixture
def busy_cores():
    """Two jobs that keep both cores of the machine busy for as long as the test runs."""
    jobs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for job in jobs:
        job.kill()
        job.wait()


@pytest.mark.timeout(60)  # a hang is a failure
@pytest.mark.parametrize("load", ["quiet", "busy"])
def test_a_killed_worker_ends_preparation_with_one_line(tmp_path, monkeypatch, request, load):
    if load == "busy":
        request.getfixturevalue("busy_cores")
    f = corpus(tmp_path / "c.tsv", 3000)
    monkeypatch.setattr(prep, "_encode", _dying_encode)
    with pytest.raises(WorkerDied, match="a preparation process died without its result"):
        prepared(tmp_path, "cache", path=str(f), num_proc=2, block_lines=200)
    assert not list((tmp_path / "cache" / "prepared").iterdir())  # nothing half-done kept


def _stopped_while_encoding(proc, cache, within=120.0) -> bool:
    """Stop the run's process group once its preparation encodes (its tokenizer saved, the result not yet renamed).

    The group is stopped before each look, so the answer cannot go stale however fast the machine prepares.
    """
    deadline = time.time() + within
    while time.time() < deadline and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.05)  # stopped for certain: nothing moves while we look
        if list(cache.glob("prepared/*.part/tokenizer")):
            return True
        os.killpg(proc.pid, signal.SIGCONT)
        time.sleep(0.02)
    return False


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ctrl_c_during_preparation_ends_at_once_in_one_line_and_a_rerun_is_identical(tmp_path):
    f = corpus(tmp_path / "big.tsv", 150_000)
    cache = tmp_path / "cache"
    settings = ["data=tsv", f"data.source.path={f}", "data.prepare.num_proc=2", "data.prepare.block_lines=5000"]
    cmd = [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={tmp_path / 'run'}", f"data.cache_dir={cache}"]
    env = dict(os.environ)
    sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731 - even where our parent ignores it
    popen = dict(stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True, preexec_fn=sigint)
    proc = subprocess.Popen([*cmd, *settings], **popen)
    assert _stopped_while_encoding(proc, cache), "the run was caught while it encoded"
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group: the workers too
    os.killpg(proc.pid, signal.SIGCONT)  # the interrupt lands now, with preparation surely under way
    sent = time.time()
    _, err = proc.communicate(timeout=60)
    assert time.time() - sent < 10, "it ended within seconds"
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interrupted: during data preparation"), err[-3000:]
    assert not list((cache / "prepared").iterdir())  # nothing half-written kept under any name
    again, fresh = (datamodule("tsv", cache_dir=str(tmp_path / c), path=str(f), num_proc=2) for c in ("cache", "fresh"))
    again.prepare_data()  # as train.py would have, with the default settings
    fresh.prepare_data()
    assert again.prepared_dir.name == fresh.prepared_dir.name and files(again.prepared_dir) == files(fresh.prepared_dir)
    for name in files(fresh.prepared_dir):
        assert filecmp.cmp(again.prepared_dir / name, fresh.prepared_dir / name, shallow=False), name


@pytest.mark.parametrize("size", [0, 1, 50])  # the sample exactly the file's usable lines, or more
def test_a_sample_as_large_as_the_file_holds_every_usable_line_the_last_too(tmp_path, size):
    f = corpus(tmp_path / "c.tsv", 120)
    lines = f.read_text().splitlines()
    with open(f, "a") as out:
        out.write("\tno source\n")  # an unusable line before the last usable one
        out.write("dernière ligne utile\tlast usable line\n")
    rules = Rules("skip", 0.0, 0.0, 50, 3.0, 6, sample=121 + size, seed=2)
    for block_lines in (7, 1000):
        got = draw_sample([Stream(path=str(f), split="train")], rules, block_lines=block_lines, num_proc=1)
        assert got.src[-1] == "dernière ligne utile" and len(got) == 121
        assert got.src[:-1] == [line.split("\t")[0] for line in lines]


def test_held_out_references_stay_with_their_sources_when_pairs_are_dropped(tmp_path):
    train = corpus(tmp_path / "train.tsv", 300)
    held = ["le chat\tCHAT LE", "\tROUGE", "un chien rouge\tROUGE CHIEN UN", "la\t", "la maison\tMAISON LA"]
    held += [" \t ", "vite\tVITE"]  # kept, dropped (an empty side), kept ...
    (tmp_path / "valid.tsv").write_text("\n".join(held) + "\n")
    (tmp_path / "test.tsv").write_text("\n".join(reversed(held)) + "\n")
    files = dict(path=str(train), valid=str(tmp_path / "valid.tsv"), test=str(tmp_path / "test.tsv"))
    dm = datamodule("tsv", cache_dir=str(tmp_path / "cache"), **files)
    dm.prepare_data()
    dm.setup()
    kept = [line.split("\t") for line in held if all(side.strip() for side in line.split("\t"))]
    for split, pairs in (("valid", kept), ("test", kept[::-1])):
        refs, ids = dm.references(split), dm.corpus.splits[split]
        assert list(zip(refs.src, refs.tgt)) == [tuple(p) for p in pairs]
        tok = dm.tokenizer  # each pair's ids are its own text's: what is scored is what is referenced
        assert [tok.src.decode(ids.src(i).tolist()) for i in range(len(ids))] == refs.src
        assert tok.decode_tgt([ids.tgt(i).tolist() for i in range(len(ids))]) == refs.tgt


def test_a_process_that_waited_on_the_lock_reuses_what_the_holder_prepared(tmp_path, monkeypatch):
    """Two DDP ranks or nodes sharing the cache folder: the one that waited must not prepare again."""
    import fcntl
    import threading

    from nmt.data import prepare as prepared_module

    f = corpus(tmp_path / "c.tsv", 300)
    dm = prepared(tmp_path, "cache", path=str(f))
    done = dm.prepared_dir
    aside = done.with_name("aside")
    done.rename(aside)  # as if the holder of the lock were still preparing it
    monkeypatch.setattr(prepared_module, "prepare", lambda *a, **k: pytest.fail("prepared a second time"))
    with open(tmp_path / "cache" / ".prepare.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = {}
        waiter = threading.Thread(target=lambda: result.update(out=prepared_module.ensure_prepared(
            dm.source, dm.preparation, dm.cache_dir, dm.seed)))  # fmt: skip
        waiter.start()
        time.sleep(0.5)  # it found no prepared corpus and waits on the lock
        aside.rename(done)  # the holder's preparation is complete ...
    waiter.join(30)  # ... and the lock released: the waiter takes it, finds the corpus, and reuses it
    assert result["out"] == done


def test_held_out_pairs_and_references_also_in_training_are_counted_by_their_ids():
    """#82 §7: a held-out pair training holds too is counted once per held-out pair (duplicates both), a reference
    that is a training target under another source counts as a reference only; across chunks of the training split."""
    from nmt.data.targets import in_training

    train = EncodedCorpus.from_lists([[5, 6], [7], [8, 9, 10], [11]], [[1, 2], [3], [4, 4], [2, 1]], 20)
    held = EncodedCorpus.from_lists([[5, 6], [5, 6], [12], [8, 9], [13], [6, 5]],
                                    [[1, 2], [1, 2], [3], [4, 4, 4], [1, 2, 9], [1, 2]], 20)  # fmt: skip
    for chunk in (1, 3, 1 << 18):
        assert in_training(train, held, chunk) == (2, 4), chunk  # pairs 0 and 1; references 0, 1, 2 and 5
    assert in_training(train, EncodedCorpus.from_lists([], [], 20)) == (0, 0)


def test_preparation_says_how_many_held_out_pairs_training_holds_too(tmp_path, caplog):
    f = corpus(tmp_path / "c.tsv", 200)
    lines = f.read_text().splitlines()
    valid, test = tmp_path / "valid.tsv", tmp_path / "test.tsv"
    valid.write_text("\n".join([*lines[:3], "un chat\tA CAT"]) + "\n")  # three training pairs
    test.write_text("le chien\tA DOG\n")
    with caplog.at_level("INFO"):
        dm = datamodule("tsv", path=str(f), valid=str(valid), test=str(test), cache_dir=str(tmp_path / "cache"),
                        spm=SPM, num_workers=0)  # fmt: skip
        dm.prepare_data()
    assert dm.prepared_dir.is_dir()
    stats = prep.PreparedCorpus.load(dm.prepared_dir).stats
    assert stats["valid"]["pairs_in_training"] == 3 and stats["test"]["pairs_in_training"] == 0
    said = [r.getMessage() for r in caplog.records if "are also training pairs" in r.getMessage()]
    assert said == ["valid: 3 of its 4 pairs are also training pairs: a score on them measures what was learnt by "
                    "heart"]  # fmt: skip
