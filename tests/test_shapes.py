"""data.shapes: every training batch of an epoch has one of at most N shapes within the token budget, its real rows
are the unpadded batch's, and a model's loss and gradients on it are those of the unpadded batch."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from conftest import datamodule, tiny_model
from nmt.data.batching import BatchPlan, TokenBucketSampler
from nmt.data.collate import Batch, BatchDataset
from nmt.data.encoded import EncodedCorpus
from nmt.data.shapes import ShapeSet, cheapest_buckets
from nmt.specials import PAD

VOCAB = 40


@pytest.fixture(scope="module")
def corpus() -> EncodedCorpus:
    """Lengths as a real corpus's: most pairs short, a long tail, a few empty sentences."""
    rng = np.random.default_rng(0)
    n = 3000
    lens = lambda: np.minimum(rng.poisson(7, n) + rng.integers(0, 2, n) * rng.integers(0, 25, n), 45)  # noqa: E731
    src, tgt = ([rng.integers(4, VOCAB, k).tolist() for k in lens()] for _ in range(2))
    return EncodedCorpus.from_lists(src, tgt, VOCAB)


def shaped(c: EncodedCorpus, n: int, multiple: int, max_tokens: int, max_sentences: int | None = None):
    """The shape set, the sampler of the plan it cuts and the two collates, with the shapes and without."""
    limit = max_sentences or math.inf
    shapes = ShapeSet.choose(c.src_lens, c.tgt_lens, max_tokens, n, multiple, limit)
    plan = BatchPlan.compute(c.src_lens, c.tgt_lens, max_tokens, limit, shapes=shapes)
    sampler = TokenBucketSampler(c.src_lens, c.tgt_lens, max_tokens, seed=1, max_sentences=max_sentences, plan=plan)
    collates = BatchDataset(c, pad_multiple=multiple, shapes=shapes), BatchDataset(c, pad_multiple=multiple)
    return shapes, sampler, *collates


def shape(b: Batch) -> tuple[int, int, int]:
    return len(b), b.src.shape[1], b.tgt_out.shape[1]


@pytest.mark.parametrize("n, multiple, max_tokens, max_sentences", [
    (1, 1, 300, None), (3, 1, 300, None), (12, 1, 1000, None), (12, 8, 1000, None), (5, 8, 3000, 64),
    (64, 1, 500, None),
])  # fmt: skip
def test_every_batch_of_an_epoch_has_one_of_at_most_n_shapes_within_the_budget(
    corpus, n, multiple, max_tokens, max_sentences
):
    shapes, sampler, padded, _ = shaped(corpus, n, multiple, max_tokens, max_sentences)
    assert len(shapes) <= n and (shapes.widths % multiple == 0).all() and (np.diff(shapes.widths) > 0).all()
    seen, pairs = set(), []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        for b in sampler:
            batch = padded[b]
            rows, src, tgt = shape(batch)
            assert (rows, src, tgt) in shapes.shapes and rows * max(src, tgt) <= max_tokens
            assert rows <= (max_sentences or rows) and src % multiple == 0 and tgt % multiple == 0
            seen.add((rows, src, tgt))
            pairs += batch.idx.tolist() if epoch == 0 else []
    assert len(seen) <= n and sorted(pairs) == list(range(len(corpus)))  # every pair once, none of the fillers


@pytest.mark.parametrize("multiple", [1, 8])
def test_the_real_rows_are_the_unpadded_batch_and_the_filler_rows_hold_nothing(corpus, multiple):
    _, sampler, padded, plain = shaped(corpus, 4, multiple, 600)
    fillers = wider = 0
    for b in (part for whole in sampler for part in (whole, whole[: len(whole) // 2 + 1])):  # a short one too
        got, want = padded[b], plain[b]
        R, S, T = shape(want)
        assert torch.equal(got.idx, want.idx) and got.host.tgt_tokens == want.host.tgt_tokens
        for name, width in (("src", S), ("tgt_in", T), ("tgt_out", T)):
            a, w = getattr(got, name), getattr(want, name)
            assert a.dtype == w.dtype and torch.equal(a[:R, :width], w) and (a[:R, width:] == PAD).all(), name
            assert (a[R:] == PAD).all(), name  # filler rows: PAD throughout
        for name in ("src_len", "tgt_len"):
            assert torch.equal(getattr(got, name)[:R], getattr(want, name)), name
        assert (got.src_len[R:] == 1).all() and (got.tgt_len[R:] == 0).all()  # a one-PAD source, no target
        assert torch.equal(got.host.src, got.src_len) and got.host.src.data_ptr() != got.src_len.data_ptr()
        fillers, wider = fillers + (len(got) > R), wider + (got.src.shape[1] > S or got.tgt_out.shape[1] > T)
    assert fillers and wider  # the test saw both kinds of padding


def loss_and_gradients(model: torch.nn.Module, b: Batch, host: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The label-smoothed loss and every parameter's gradient; with ``host``, from the lengths the loader counted."""
    model.zero_grad()
    counted = {"host_len": b.host.src, "tgt_tokens": b.host.tgt_tokens} if host else {}
    loss, *_ = model.loss(b.src, b.src_len, b.tgt_in, b.tgt_out, 0.1, **counted)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", ["transformer", "luong", "bahdanau"])
def test_the_loss_and_its_gradients_on_a_padded_batch_are_the_unpadded_batch_s(corpus, name):
    torch.manual_seed(0)
    model = tiny_model(name, src_vocab=VOCAB, tgt_vocab=VOCAB).train()  # dropout off: the two passes draw nothing
    _, sampler, padded, plain = shaped(corpus, 3, 8, 400)
    checked = 0
    for b in itertools.islice(sampler, 8):
        got, want = padded[b], plain[b]
        if shape(got) == shape(want):
            continue
        for host in (True, False):  # the real targets as the loader counted them, and as the mask counts them
            (loss, grads), (want_loss, want_grads) = (loss_and_gradients(model, x, host) for x in (got, want))
            assert abs(loss - want_loss) <= 1e-6 * max(1.0, abs(want_loss)), host
            for (param, _), g, w in zip(model.named_parameters(), grads, want_grads):
                torch.testing.assert_close(g, w, rtol=0, atol=1e-6, msg=lambda m, k=f"{param}, {host}": f"{k}: {m}")
        checked += 1
    assert checked >= 3


def test_the_buckets_are_the_cheapest_of_any_choice():
    """The dynamic programme against every choice of at most n top widths (the widest always one)."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        K, n = int(rng.integers(1, 8)), int(rng.integers(1, 5))
        widths = np.sort(rng.choice(np.arange(1, 40), K, replace=False))
        held, cap = rng.integers(1, 30, K), np.maximum(120 // widths, 1)  # few pairs: partial batches count

        def cost(tops, held=held, cap=cap, widths=widths) -> float:
            starts = [0, *(t + 1 for t in tops[:-1])]
            return sum(math.ceil(held[a : t + 1].sum() / cap[t]) * cap[t] * widths[t] for a, t in zip(starts, tops))

        choices = [(*c, K - 1) for k in range(min(n, K)) for c in itertools.combinations(range(K - 1), k)]
        tops = cheapest_buckets(held, widths, cap, n).tolist()
        assert tops[-1] == K - 1 and len(tops) <= n and tops == sorted(set(tops))
        assert cost(tops) == min(cost(c) for c in choices)


def test_a_budget_below_the_longest_pair_rounded_up_is_refused(corpus):
    longest = int(np.maximum(corpus.src_lens, corpus.tgt_lens.astype(np.int64) + 1).max())
    with pytest.raises(ValueError, match=r"max_tokens=\d+ is smaller than the longest pair rounded up"):
        ShapeSet.choose(corpus.src_lens, corpus.tgt_lens, longest, 4, multiple=64)
    with pytest.raises(ValueError, match="fits none of the"):
        ShapeSet.choose(corpus.src_lens, corpus.tgt_lens, 1000, 4).fit(10**6, 5, 5)


def test_the_data_module_pads_its_training_batches_to_its_shapes(tmp_path):
    settings = dict(cache_dir=str(tmp_path), source=dict(train_size=400, valid_size=20, test_size=20),
                    spm=dict(vocab_size=120, model_type="unigram"), max_tokens=300, num_workers=0)  # fmt: skip
    dm = datamodule(**settings, shapes=3)
    dm.prepare_data()
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert len({shape(b) for b in batches}) <= 3 and len(batches) == dm.batches_per_epoch()
    assert sorted(i for b in batches for i in b.idx.tolist()) == list(range(len(dm.corpus.splits["train"])))
    assert all(b.host.tgt_tokens == int(b.tgt_len.sum()) for b in batches)
    plans = sorted(p.name for p in dm.prepared_dir.joinpath("train").glob("plan-*"))
    assert len(plans) == 1 and "-shapes3-" in plans[0]  # the plan cut by the shapes, saved beside the corpus
    with pytest.raises(ValueError, match=r"data.shapes=3: .*data.join.max_pairs > 1"):
        datamodule(**settings, shapes=3, join=dict(max_pairs=2))
    with pytest.raises(ValueError, match=r"data.shapes=3: .*subword sampling"):
        datamodule(**settings, shapes=3, sampling=dict(alpha=0.1, nbest_size=-1))
