import pytest
import torch

from nmt.data.tokenizer import PAD
from nmt.search import beam_search, greedy_search, max_lengths, translate_batch
from nmt.seq2seq import build_model

SIZES = dict(emb_size=16, enc_hidden=12, dec_hidden=20, attn_hidden=10, readout_size=16, dropout=0.0)


@pytest.fixture(params=["bahdanau", "luong"])
def model(request):
    torch.manual_seed(0)
    return build_model(request.param, 40, 25, **SIZES).eval()


def batch():
    g = torch.Generator().manual_seed(3)
    src_len = torch.tensor([7, 4, 2, 6, 1])
    src = torch.randint(4, 40, (5, 7), generator=g)
    for i, n in enumerate(src_len):
        src[i, n:] = PAD
    return src, src_len


def test_beam_one_is_greedy(model):
    src, src_len = batch()
    greedy = greedy_search(model, src, src_len)
    beam = beam_search(model, src, src_len, beam_size=1)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    assert all(abs(h.score - b[0].score) < 1e-4 for h, b in zip(greedy, beam))


def test_nbest_sorted_with_attention_of_the_output(model):
    src, src_len = batch()
    results = beam_search(model, src, src_len, beam_size=4, nbest=4)
    for hyps, n in zip(results, src_len.tolist()):
        assert len(hyps) == 4
        assert all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))
        for h in hyps:
            assert h.attention.shape == (len(h.tokens) + 1, n)
            assert torch.allclose(h.attention.sum(-1), torch.ones(len(h.tokens) + 1), atol=1e-5)


def test_batched_equals_one_at_a_time(model):
    src, src_len = batch()
    together = beam_search(model, src, src_len, beam_size=3, nbest=2)
    for i in range(len(src_len)):
        n = int(src_len[i])
        alone = beam_search(model, src[i : i + 1, :n], src_len[i : i + 1], beam_size=3, nbest=2)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_length_budget(model):
    src, src_len = batch()
    budget = max_lengths(src_len, 0.5, 2)
    for hyps, b in zip(beam_search(model, src, src_len, beam_size=3, max_len_a=0.5, max_len_b=2), budget.tolist()):
        assert len(hyps[0].tokens) + 1 <= b
    for h, b in zip(greedy_search(model, src, src_len, max_len_a=0.5, max_len_b=2), budget.tolist()):
        assert len(h.tokens) + 1 <= b


def test_nbest_larger_than_beam_is_an_error(model):
    src, src_len = batch()
    with pytest.raises(ValueError, match="nbest"):
        translate_batch(model, src, src_len, beam_size=2, nbest=3)
