"""The vectorised collate (``BatchDataset.__getitem__``, ``pad``) gives what the obvious per-row loop gives: every field
of every batch, dtype and values, on random corpora with empty sentences, padded to 1 and 8, with joining, subword
sampling and guided links."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.speed.collate_speed import per_row_collate as reference_collate
from bench.speed.collate_speed import per_row_pad as reference_pad
from nmt.data.batching import TokenBucketSampler
from nmt.data.collate import Batch, BatchDataset, pad
from nmt.data.encoded import EncodedCorpus
from nmt.data.joining import Joining
from nmt.data.readers import CorpusError
from nmt.data.training_links import TrainingLinks

VOCAB = 60


def random_corpus(rng: np.random.Generator, n: int = 400, longest: int = 14) -> EncodedCorpus:
    """Pairs of 0 to ``longest`` pieces a side (empty sentences among them), ids of the whole vocabulary but PAD."""
    sides = [[rng.integers(1, VOCAB, rng.integers(0, longest + 1)).tolist() for _ in range(n)] for _ in "st"]
    return EncodedCorpus.from_lists(*sides, VOCAB)


class Resegmenting:
    """A subword sampler's stand-in: each piece kept, dropped or doubled by a draw seeded by the batch, as lists of
    ints (what sentencepiece returns)."""

    def __call__(self, src, tgt, indices):
        rng = np.random.default_rng(int(np.asarray(indices, np.int64).sum()))
        redraw = lambda seqs: [[int(i) for i in s for _ in range(rng.integers(0, 3))] for s in seqs]  # noqa: E731
        return redraw(src), redraw(tgt)


def random_links(rng: np.random.Generator, c: EncodedCorpus) -> TrainingLinks:
    """A few links a pair between its first words, and random word starts in both vocabularies."""
    counts = rng.integers(0, 4, len(c))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    words = lambda: rng.integers(0, 6, int(offsets[-1]))  # noqa: E731
    return TrainingLinks(offsets, words(), words(), (rng.random(VOCAB) < 0.6, rng.random(VOCAB) < 0.6))


def assert_same(got: Batch, want: Batch) -> None:
    for name in ("src", "src_len", "tgt_in", "tgt_out", "tgt_len", "idx", "align"):
        a, b = getattr(got, name), getattr(want, name)
        if b is None:
            assert a is None, name
            continue
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), name
    assert got.host.src.dtype == torch.int64 and torch.equal(got.host.src, want.host.src)
    assert type(got.host.tgt_tokens) is int and got.host.tgt_tokens == want.host.tgt_tokens


def batches(rng: np.random.Generator, c: EncodedCorpus, max_tokens: int = 120) -> list[list[int]]:
    """The sampler's batches of an epoch, and a few drawn at random (any order, any lengths)."""
    drawn = [rng.choice(len(c), int(rng.integers(1, 40)), replace=False).tolist() for _ in range(10)]
    return [*TokenBucketSampler(c.src_lens, c.tgt_lens, max_tokens, seed=3), [5], *drawn]


@pytest.mark.parametrize("multiple", [1, 8])
@pytest.mark.parametrize("join", [1, 3])
@pytest.mark.parametrize("sampling", [False, True])
@pytest.mark.parametrize("linked", [False, True])
def test_the_collate_gives_what_the_per_row_loop_gives(multiple, join, sampling, linked):
    rng = np.random.default_rng([multiple, join, sampling, linked])
    c = random_corpus(rng)
    subwords, links = Resegmenting() if sampling else None, random_links(rng, c) if linked else None
    joining = Joining(join, share=0.7, seed=2)
    dataset = BatchDataset(c, subwords, links, multiple, joining)
    for b in batches(rng, c):
        assert_same(dataset[b], reference_collate(c, b, subwords, links, multiple, joining))


def test_ties_keep_their_order_and_all_empty_sources_give_an_empty_width():
    c = EncodedCorpus.from_lists([[], [5], [], [6], [7, 8]], [[9], [], [10, 11], [], [12]], VOCAB)
    for b in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [0, 2], [2, 0]):
        for multiple in (1, 8):
            assert_same(BatchDataset(c, pad_multiple=multiple)[b], reference_collate(c, b, multiple=multiple))
    assert BatchDataset(c)[[3, 1, 4]].idx.tolist() == [4, 3, 1]  # 2 pieces, then the tie of 1 in drawn order
    assert BatchDataset(c)[[0, 2]].src.shape == (2, 0)


def test_an_id_beyond_the_vocabulary_is_named_as_before():
    """The check of the whole batch at once names the same pair and file as the check per pair did."""
    rng = np.random.default_rng(1)
    c = random_corpus(rng)
    c.vocab = (VOCAB - 1, VOCAB)  # the source ids VOCAB - 1 are now beyond the source vocabulary
    empty = next(i for i in range(len(c)) if c.src_lens[i] == 0)  # read before the damaged pair: it has no max
    b = [empty, *(int(i) for i in rng.permutation(len(c))[:50] if i != empty)]
    assert any(int(c.src(i).max(initial=0)) == VOCAB - 1 for i in b)
    with pytest.raises(CorpusError) as want:
        reference_collate(c, b)
    with pytest.raises(CorpusError) as got:
        BatchDataset(c)[b]
    assert str(got.value) == str(want.value) and "src.ids" in str(got.value)


@pytest.mark.parametrize("bos, eos", [(False, False), (True, False), (False, True), (True, True)])
def test_pad_of_lists_and_arrays_gives_what_the_row_by_row_pad_gives(bos, eos):
    rng = np.random.default_rng(int(bos) * 2 + int(eos))
    seqs = [rng.integers(4, 50, int(rng.integers(0, 9))).tolist() for _ in range(30)]
    for multiple in (1, 8):
        for given in (seqs, [np.asarray(s, np.uint16) for s in seqs], [[]], [[7]]):
            got, want = pad(given, bos, eos, multiple), reference_pad(given, bos, eos, multiple)
            assert got.dtype == want.dtype and torch.equal(got, want)
