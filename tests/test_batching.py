import math
import pickle

import numpy as np
import pytest
import torch

from nmt.data.batching import (
    BatchPlan,
    TokenBucketSampler,
    cut_batches,
    mix64,
    permute,
    plan_batches,
)
from nmt.data.collate import BatchDataset
from nmt.data.encoded import CorpusWriter, EncodedCorpus
from nmt.specials import BOS, EOS, PAD


@pytest.fixture
def corpus():
    rng = np.random.default_rng(0)
    src = [rng.integers(4, 100, rng.integers(1, 30)).tolist() for _ in range(1000)]
    tgt = [rng.integers(4, 100, rng.integers(1, 30)).tolist() for _ in range(1000)]
    return EncodedCorpus.from_lists(src, tgt, 100), src, tgt


def test_every_batch_within_budget_and_every_pair_once(corpus):
    c, _, _ = corpus
    s = TokenBucketSampler(c.src_lens, c.tgt_lens, max_tokens=300, seed=1)
    for epoch in range(2):
        s.set_epoch(epoch)
        batches = list(s)
        assert len(batches) == len(s)
        seen = [i for b in batches for i in b]
        assert sorted(seen) == list(range(len(c)))
        for b in batches:
            # sentences x the longer side (BOS/EOS)
            padded = len(b) * max(int(c.src_lens[b].max()), int(c.tgt_lens[b].max()) + 1)
            assert padded <= 300


def test_shuffle_is_deterministic_per_seed_and_epoch(corpus):
    c, _, _ = corpus
    a, b = (
        TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1),
        TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1),
    )
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)
    # pairs of equal lengths are dealt into other batches each epoch, not just the batch order reshuffled
    assert {frozenset(x) for x in a} != {frozenset(x) for x in b}
    # an epoch's batches depend on (seed, epoch) alone, not on the epochs drawn before (exact resume)
    fresh = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
    fresh.set_epoch(1)
    assert list(fresh) == list(b)


def test_bucketing_pads_less_than_random_batches():
    # translation pairs: target length follows source length, with noise
    rng = np.random.default_rng(0)
    src_lens = rng.integers(1, 40, 3000)
    tgt_lens = np.clip(src_lens + rng.integers(-3, 4, 3000), 1, None)
    c = EncodedCorpus.from_lists([[5] * n for n in src_lens], [[5] * n for n in tgt_lens], 100)
    s = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
    real = lambda b: int(src_lens[b].sum() + tgt_lens[b].sum()) + len(b)  # noqa: E731
    padded = lambda b: len(b) * int(src_lens[b].max() + tgt_lens[b].max() + 1)  # noqa: E731
    batches = [np.array(b) for b in s]
    eff = sum(real(b) for b in batches) / sum(padded(b) for b in batches)
    perm = np.random.default_rng(0).permutation(len(c))
    rnd = np.array_split(perm, len(batches))
    eff_random = sum(real(b) for b in rnd) / sum(padded(b) for b in rnd)
    assert eff > 0.85 and eff > eff_random + 0.2


def test_ddp_shards_disjoint_and_equal(corpus):
    c, _, _ = corpus
    shards = [TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1, rank=r, world_size=3) for r in range(3)]
    lists = [list(s) for s in shards]
    assert len({len(x) for x in lists}) == 1 and all(len(x) == len(s) for x, s in zip(lists, shards))
    flat = [i for x in lists for b in x for i in b]
    assert len(flat) == len(set(flat))
    # held-out splits: nothing dropped, and still equal counts (ranks meet in collectives at epoch end)
    for n in (len(c), 2):
        lens = c.src_lens[:n], c.tgt_lens[:n]
        evals = [
            list(TokenBucketSampler(*lens, 300, shuffle=False, rank=r, world_size=2, even=False)) for r in range(2)
        ]
        assert sorted(i for x in evals for b in x for i in b) == list(range(n))
        assert len(evals[0]) == len(evals[1])


def test_skip_batches_resumes_mid_epoch(corpus):
    c, _, _ = corpus
    s = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
    s.set_epoch(2)
    full = list(s)
    s.skip_batches(2, 5)
    assert list(s) == full[5:]
    assert list(s) == full  # only once


def test_skip_batches_after_a_whole_epoch_starts_the_next(corpus):
    """A state saved at an epoch's last validation (all its batches read) resumes with the next epoch, whatever epoch
    the trainer then sets first: the one it counts as done or the next."""
    c, _, _ = corpus
    fresh = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
    fresh.set_epoch(3)
    following = list(fresh)
    for trainer_epoch in (3, 7):
        s = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
        s.skip_batches(2, len(s))
        s.set_epoch(trainer_epoch)
        assert list(s) == following and following


def test_collate_pads_and_lengths(corpus):
    c, src, tgt = corpus
    batch = BatchDataset(c)[[3, 7, 11]]
    assert sorted(batch.idx.tolist()) == [3, 7, 11]
    for row, i in enumerate(batch.idx.tolist()):
        s, t = src[i], tgt[i]
        assert batch.src_len[row] == len(s) and batch.tgt_len[row] == len(t) + 1
        assert batch.src[row, : len(s)].tolist() == s and (batch.src[row, len(s) :] == PAD).all()
        assert batch.tgt_in[row, : len(t) + 1].tolist() == [BOS, *t]
        assert batch.tgt_out[row, : len(t) + 1].tolist() == [*t, EOS]
        assert (batch.tgt_in[row, len(t) + 1 :] == PAD).all() and (batch.tgt_out[row, len(t) + 1 :] == PAD).all()
    # rows longest source first (the recurrent encoder packs them as they are), the lengths also on the host
    assert batch.src_len.tolist() == sorted(batch.src_len.tolist(), reverse=True)
    assert batch.host.src.device.type == "cpu" and torch.equal(batch.host.src, batch.src_len)
    assert batch.host.tgt_tokens == int(batch.tgt_len.sum())


def test_budget_smaller_than_longest_pair_is_an_error(corpus):
    c, _, _ = corpus
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBucketSampler(c.src_lens, c.tgt_lens, 10)


def test_compact_storage_is_memory_mapped(corpus, tmp_path):
    c, src, tgt = corpus
    assert c.src_flat.dtype == np.uint16 and c.src_lens.dtype == np.uint8
    c.save(tmp_path / "c")
    d = EncodedCorpus.load(tmp_path / "c")
    assert isinstance(d.src_flat, np.memmap) and isinstance(d.tgt_offsets, np.memmap)
    assert d.src(5).tolist() == src[5] and d.tgt(7).tolist() == tgt[7] and len(d) == len(c)
    # DataLoader workers get the path, not a copy of the arrays
    blob = pickle.dumps(d)
    assert len(blob) < 1000 and pickle.loads(blob).tgt(7).tolist() == tgt[7]


def test_writer_appends_blocks_to_the_same_arrays(corpus, tmp_path):
    c, src, tgt = corpus
    w = CorpusWriter(tmp_path / "w", vocab_size=100, max_len=200)
    for a in range(0, len(src), 37):  # blocks of 37 pairs; the offsets are summed in chunks of 10
        block = EncodedCorpus.from_lists(src[a : a + 37], tgt[a : a + 37], 100)
        w.append(block.src_flat, block.src_lens, block.tgt_flat, block.tgt_lens, np.arange(a, a + len(block)) * 2)
    w.close(chunk=10)
    d = EncodedCorpus.load(tmp_path / "w")
    for name in EncodedCorpus.FILES:
        assert np.array_equal(d.arrays[name], c.arrays[name]), name
    assert np.array_equal(d.lines, np.arange(len(src)) * 2)  # each pair's line in its input


@pytest.mark.parametrize("max_sentences", [math.inf, 7])
def test_vectorised_plan_cuts_like_the_greedy_loop(max_sentences):
    widths = np.sort(np.random.default_rng(3).integers(1, 60, 5000))
    bounds = plan_batches(widths, 300, max_sentences)
    expected = cut_batches(widths.tolist(), 300, max_sentences)
    assert list(zip(bounds[:-1].tolist(), bounds[1:].tolist())) == expected


@pytest.mark.parametrize("m", [2, 3, 5, 16, 17, 1000])
def test_permute_is_a_keyed_bijection(m):
    x = np.arange(m)
    a, b = permute(x, np.full(m, m), np.full(m, 7)), permute(x, np.full(m, m), np.full(m, 8))
    assert sorted(a.tolist()) == list(range(m)) and sorted(b.tolist()) == list(range(m))
    if m >= 16:  # another key, another order; neither the identity
        assert a.tolist() != b.tolist() and a.tolist() != list(range(m))
    # one position at a time gives the same as the whole run at once
    assert [int(permute(x[i : i + 1], np.array([m]), np.array([7]))[0]) for i in range(m)] == a.tolist()


def test_a_saved_plan_is_read_back_and_batches_as_a_fresh_one(corpus, tmp_path, monkeypatch, caplog):
    c, _, _ = corpus
    c.save(tmp_path / "train")
    mapped = EncodedCorpus.load(tmp_path / "train")
    first = BatchPlan.cached(mapped, 300, math.inf)
    plan_dir = tmp_path / "train" / "plan-300-inf"
    assert plan_dir.is_dir() and isinstance(first.order, np.memmap)
    with monkeypatch.context() as m:  # a second start reads the plan, never plans again
        m.setattr(BatchPlan, "compute", lambda *a, **k: pytest.fail("planned again"))
        assert np.array_equal(BatchPlan.cached(mapped, 300, math.inf).bounds, first.bounds)
    for damage in ("missing", "truncated", "another corpus's"):  # a damaged plan is cheap: planned again
        if damage == "missing":
            (plan_dir / "bounds.npy").unlink()
        elif damage == "truncated":
            (plan_dir / "order.npy").write_bytes((plan_dir / "order.npy").read_bytes()[:100])
        else:
            np.save(plan_dir / "order.npy", np.arange(5, dtype=np.int32))
        with caplog.at_level("WARNING"):
            again = BatchPlan.cached(mapped, 300, math.inf)
        assert f"{plan_dir}: a damaged batch plan; planning again" in caplog.text
        assert np.array_equal(again.order, first.order) and np.array_equal(again.bounds, first.bounds)
        caplog.clear()
    fresh = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1)
    saved = TokenBucketSampler(c.src_lens, c.tgt_lens, 300, seed=1, plan=first)
    for epoch in (0, 3):
        fresh.set_epoch(epoch)
        saved.set_epoch(epoch)
        assert list(fresh) == list(saved)


@pytest.mark.parametrize("chunk", [7, 1000, 1 << 22])
def test_the_plan_is_a_stable_sort_by_width_target_source_in_any_chunk_size(corpus, chunk):
    c, _, _ = corpus
    plan = BatchPlan.compute(c.src_lens, c.tgt_lens, 300, math.inf, chunk=chunk)
    src, tgt = c.src_lens.astype(int), c.tgt_lens.astype(int)
    width = np.maximum(src, tgt + 1)
    want = np.lexsort((np.arange(len(src)), src, tgt, width))  # last key first; the index breaks ties
    assert plan.order.tolist() == want.tolist()
    triples = list(zip(width[want], tgt[want], src[want]))
    runs = [(a, b) for a, b in plan.ties.tolist()]
    assert all(len(set(triples[a:b])) == 1 and b - a > 1 for a, b in runs)
    assert sum(b - a for a, b in runs) + len(set(triples)) - len(runs) == len(src)  # every tie run, nothing else
    assert plan.bounds.tolist() == [0] + [b for _, b in cut_batches(width[want].tolist(), 300)]


@pytest.mark.parametrize("world", [3, 4])
@pytest.mark.parametrize("pairs", [1000, 997, 10, 7])
def test_held_out_batches_under_ddp_every_rank_as_many_each_pair_once(corpus, world, pairs):
    c, _, _ = corpus
    lens = c.src_lens[:pairs], c.tgt_lens[:pairs]
    shard = lambda r: TokenBucketSampler(*lens, 300, shuffle=False, rank=r, world_size=world, even=False)  # noqa: E731
    ranks = [list(shard(r)) for r in range(world)]
    assert len({len(batches) for batches in ranks}) == 1, [len(b) for b in ranks]  # ranks meet in collectives
    seen = sorted(i for batches in ranks for b in batches for i in b)
    assert seen == list(range(pairs))  # each pair once: none dropped, none twice


def test_mix64_is_splitmix64():
    """The published splitmix64 sequence (Vigna; e.g. Rosetta Code) for the seed 1234567."""
    golden, seed = 0x9E3779B97F4A7C15, 1234567
    states = np.array([(seed + i * golden) % 2**64 for i in range(5)], dtype=np.uint64)
    want = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821]
    assert mix64(states).tolist() == want


def test_the_plan_s_memory_is_linear_in_the_pairs_however_long_the_longest(tmp_path):
    """#82 §4: one pasted paragraph (8,000 pieces) among 20,000 short pairs. A table indexed by every (width,
    target, source) up to the longest would hold 8,002**3 counts (4 TB); the plan keeps the triples present. Its
    peak (numpy's allocations, traced) stays within a few bytes a pair beyond the chunk's temporaries."""
    import tracemalloc

    rng = np.random.default_rng(0)
    src = rng.integers(1, 40, 20_000).astype(np.uint16)
    tgt = rng.integers(1, 40, 20_000).astype(np.uint16)
    src[123], tgt[123] = 8000, 7000
    tracemalloc.start()
    plan = BatchPlan.compute(src, tgt, 16_000, math.inf)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200 * len(src), peak  # 4 MB: the chunk's int64 temporaries and sorts, not span**3
    assert plan.order[-1] == 123 and sorted(plan.order.tolist()) == list(range(len(src)))
