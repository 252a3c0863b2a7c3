import torch

from nmt.models.attention import AdditiveAttention, DotProductAttention, causal_mask, masked_softmax


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


def reference_attention(q, k, v, allowed):
    """softmax(q k^T / sqrt(d)) v written out, with ``allowed`` (..., Q, K) boolean; rows with nothing allowed are 0."""
    scores = torch.einsum("...qd,...kd->...qk", q.double(), k.double()) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.einsum("...qk,...kv->...qv", weights, v.double()), weights


def test_dot_product_attention_matches_the_formula_on_random_inputs():
    torch.manual_seed(3)
    attn = DotProductAttention().eval()
    B, H, Q, K, d = 3, 2, 5, 6, 8
    lens = torch.tensor([6, 3, 0])  # a row with nothing to attend to
    cases = []
    for shape in ((B, Q), (B, H, Q)):  # 3-D and 4-D (heads)
        q, k, v = torch.randn(*shape, d) * 2, torch.randn(*shape[:-1], K, d) * 2, torch.randn(*shape[:-1], K, 4)
        by_len = torch.arange(K) < lens.view(B, *([1] * (len(shape) - 1)), 1)  # (B, [1,] 1, K)
        cases.append((q, k, v, dict(valid_lens=lens), by_len.expand(*shape, K)))
        per_query = torch.randint(0, K + 1, (B, Q))  # 2-D valid lengths: one per query
        allowed = torch.arange(K) < (per_query if len(shape) == 2 else per_query.unsqueeze(1)).unsqueeze(-1)
        cases.append((q, k, v, dict(valid_lens=per_query), allowed.expand(*shape, K)))
    q = torch.randn(B, H, K, d) * 2
    k, v = torch.randn(B, H, K, d) * 2, torch.randn(B, H, K, 4)
    cases.append((q, k, v, dict(attn_mask=causal_mask(K)), causal_mask(K).expand(B, H, K, K)))
    for q, k, v, masks, allowed in cases:
        want_out, want_w = reference_attention(q, k, v, allowed)
        out, w = attn(q, k, v, **masks)
        assert torch.allclose(w.double(), want_w, atol=1e-6) and torch.allclose(out.double(), want_out, atol=1e-5)
        fused, _ = attn(q, k, v, need_weights=False, **masks)
        assert torch.allclose(fused.double(), want_out, atol=1e-5)


def test_additive_attention_matches_the_formula_on_random_inputs():
    torch.manual_seed(4)
    attn = AdditiveAttention(query_size=5, key_size=3, num_hiddens=7).eval()
    q, k, v = torch.randn(2, 4, 5), torch.randn(2, 6, 3), torch.randn(2, 6, 2)
    lens = torch.tensor([6, 2])
    out, w = attn(q, k, v, lens)
    features = torch.tanh(attn.W_q(q)[:, :, None, :] + attn.W_k(k)[:, None, :, :])  # (B, Q, K, h)
    scores = (features @ attn.w_v.weight.t()).squeeze(-1).masked_fill(torch.arange(6) >= lens.view(2, 1, 1), -1e30)
    want = torch.softmax(scores, -1)
    assert torch.allclose(w, want, atol=1e-6) and torch.allclose(out, want @ v, atol=1e-6)


def test_masks_must_be_boolean_on_both_paths():
    import pytest

    q = torch.randn(1, 3, 4)
    attn = DotProductAttention().eval()
    for mask in (torch.ones(3, 3), torch.ones(3, 3, dtype=torch.long)):  # 1 = masked (seed blog) or additive floats
        for need_weights in (True, False):
            with pytest.raises(TypeError, match="boolean, True = may attend"):
                attn(q, q, q, attn_mask=mask, need_weights=need_weights)
        with pytest.raises(TypeError, match="boolean"):
            masked_softmax(torch.randn(1, 3, 3), mask=mask)


def test_half_precision_agrees_with_float32_fully_masked_rows_included():
    torch.manual_seed(5)
    attn = DotProductAttention().eval()
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    lens = torch.tensor([7, 0])
    ref_out, ref_w = attn(q, k, v, valid_lens=lens)
    for dtype in (torch.float16, torch.bfloat16):
        h = [t.to(dtype) for t in (q, k, v)]
        for need_weights in (True, False):
            out, w = attn(*h, valid_lens=lens, need_weights=need_weights)
            assert out.dtype == dtype and torch.allclose(out.float(), ref_out, atol=0.05), (dtype, need_weights)
            assert (out[1] == 0).all()
            if need_weights:
                assert torch.allclose(w.float(), ref_w, atol=0.02) and (w[1] == 0).all()


def test_the_fused_path_drops_nothing_at_inference():
    """In eval mode the fused kernel (``need_weights=False``) is given no dropout: with attention dropout 0.5 its
    context is the formula's, every time (dropout left on would zero half the weights and scale the rest by 2)."""
    torch.manual_seed(6)
    attn = DotProductAttention(dropout=0.5).eval()
    B, H, Q, K, d = 2, 3, 4, 6, 8
    q, k, v = torch.randn(B, H, Q, d), torch.randn(B, H, K, d), torch.randn(B, H, K, 5)
    lens = torch.tensor([6, 4])
    allowed = (torch.arange(K) < lens.view(B, 1, 1, 1)).expand(B, H, Q, K)
    want, _ = reference_attention(q, k, v, allowed)
    for _ in range(3):
        fused, none = attn(q, k, v, valid_lens=lens, need_weights=False)
        assert none is None and torch.allclose(fused.double(), want, atol=1e-5)
