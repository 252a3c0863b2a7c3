import torch

from nmt.attention import AdditiveAttention, DotProductAttention, causal_mask, masked_softmax


def test_masked_softmax_seed_examples():
    torch.manual_seed(0)
    x = torch.rand(2, 2, 4)
    w = masked_softmax(x, torch.tensor([2, 3]))
    assert (w[0, :, 2:] == 0).all() and (w[1, :, 3:] == 0).all()
    assert torch.allclose(w.sum(-1), torch.ones(2, 2))
    w = masked_softmax(x, torch.tensor([[1, 3], [2, 4]]))
    assert (w[0, 0, 1:] == 0).all() and (w[0, 1, 3:] == 0).all() and (w[1, 0, 2:] == 0).all()
    assert torch.allclose(w.sum(-1), torch.ones(2, 2))
    assert torch.allclose(masked_softmax(x, None), torch.softmax(x, -1))


def test_masked_softmax_does_not_touch_input_and_zero_length_rows_are_zero():
    x = torch.rand(2, 3, 5)
    before = x.clone()
    w = masked_softmax(x, torch.tensor([0, 5]))
    assert torch.equal(x, before)
    assert (w[0] == 0).all() and not w.isnan().any()
    assert torch.allclose(w[1].sum(-1), torch.ones(3))


def test_masked_softmax_boolean_mask_and_half_precision():
    mask = torch.tensor([[True, False, True, False]]).expand(3, 4)
    w = masked_softmax(torch.rand(2, 3, 4), mask=mask)
    assert (w[..., 1] == 0).all() and (w[..., 3] == 0).all()
    for dtype in (torch.float16, torch.bfloat16):
        w = masked_softmax(torch.rand(2, 2, 4, dtype=dtype) * 100, torch.tensor([0, 2]))
        assert w.dtype == dtype and not w.isnan().any() and (w[0] == 0).all()


def test_additive_attention_seed_example():
    torch.manual_seed(0)
    queries, keys = torch.normal(0, 1, (2, 1, 20)), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    attn = AdditiveAttention(query_size=20, key_size=2, num_hiddens=8, dropout=0.1).eval()
    context, weights = attn(queries, keys, values, torch.tensor([2, 6]))
    assert context.shape == (2, 1, 4) and weights.shape == (2, 1, 10)
    # identical keys: uniform over the valid positions, so the context is the mean of those values
    assert torch.allclose(weights[0, 0, :2], torch.full((2,), 0.5)) and (weights[0, 0, 2:] == 0).all()
    assert torch.allclose(weights[1, 0, :6], torch.full((6,), 1 / 6))
    assert torch.allclose(context[0, 0], values[0, :2].mean(0)) and torch.allclose(context[1, 0], values[1, :6].mean(0))
    assert not hasattr(attn, "attention_weights")
    projected = attn.project_keys(keys)
    again, _ = attn(queries, projected, values, torch.tensor([2, 6]), keys_projected=True)
    assert torch.allclose(again, context)


def test_dot_product_attention_seed_example():
    queries, keys = torch.normal(0, 1, (2, 1, 2)), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    attn = DotProductAttention(dropout=0.5).eval()
    context, weights = attn(queries, keys, values, torch.tensor([2, 6]))
    assert context.shape == (2, 1, 4)
    assert torch.allclose(weights[0, 0, :2], torch.full((2,), 0.5)) and (weights[0, 0, 2:] == 0).all()
    assert torch.allclose(weights[1, 0, :6], torch.full((6,), 1 / 6))


def test_causal_mask_heads_and_fused_path_agree():
    torch.manual_seed(1)
    B, H, T, d = 2, 4, 6, 8
    q, k, v = torch.randn(B, H, T, d), torch.randn(B, H, T, d), torch.randn(B, H, T, d)
    attn = DotProductAttention().eval()
    out, w = attn(q, k, v, attn_mask=causal_mask(T))
    assert w.shape == (B, H, T, T)
    assert (w.triu(1) == 0).all() and torch.allclose(w.sum(-1), torch.ones(B, H, T))
    fused, none = attn(q, k, v, attn_mask=causal_mask(T), need_weights=False)
    assert none is None and torch.allclose(fused, out, atol=1e-5)
    lens = torch.tensor([3, 6])
    out, w = attn(q, k, v, valid_lens=lens)
    fused, _ = attn(q, k, v, valid_lens=lens, need_weights=False)
    assert (w[0, :, :, 3:] == 0).all() and torch.allclose(fused, out, atol=1e-5)


def test_general_score_projects_queries_when_sizes_differ():
    attn = DotProductAttention(query_size=6, key_size=4).eval()
    assert attn.M is not None
    out, w = attn(torch.randn(2, 3, 6), torch.randn(2, 5, 4), torch.randn(2, 5, 7), torch.tensor([5, 2]))
    assert out.shape == (2, 3, 7) and (w[1, :, 2:] == 0).all()
