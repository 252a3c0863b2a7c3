"""The Transformer's own parts: multi-head attention against the formula, causality, the two attention paths."""

import math

import pytest
import torch

from conftest import tiny_model
from nmt.models.transformer import MultiHeadAttention, key_mask
from nmt.specials import PAD


def test_multi_head_attention_matches_the_formula():
    torch.manual_seed(0)
    D, H, B, T, S = 12, 3, 2, 4, 5
    mha = MultiHeadAttention(D, H, dropout=0.0, memory_size=7).eval()
    x, memory = torch.randn(B, T, D), torch.randn(B, S, 7)
    valid = torch.tensor([5, 3])
    out, weights = mha(x, *mha.keys_values(memory), mask=key_mask(valid, S), need_weights=True)
    fused, none = mha(x, *mha.keys_values(memory), mask=key_mask(valid, S), need_weights=False)
    # written out: per head h, softmax(x Wq_h (m Wk_h)^T / sqrt(d_h)) m Wv_h over the valid keys, heads
    # concatenated, then the output projection
    d = D // H
    Wq, bq = mha.q_proj.weight, mha.q_proj.bias
    Wk, Wv = mha.kv_proj.weight[:D], mha.kv_proj.weight[D:]
    bk, bv = mha.kv_proj.bias[:D], mha.kv_proj.bias[D:]
    heads, expected_w = [], torch.zeros(B, H, T, S)
    for b in range(B):
        n = int(valid[b])
        per_head = []
        for h in range(H):
            rows = slice(h * d, (h + 1) * d)
            q = x[b] @ Wq[rows].T + bq[rows]  # (T, d)
            k = memory[b, :n] @ Wk[rows].T + bk[rows]  # (n, d)
            v = memory[b, :n] @ Wv[rows].T + bv[rows]
            a = torch.softmax(q @ k.T / math.sqrt(d), dim=-1)  # (T, n)
            expected_w[b, h, :, :n] = a
            per_head.append(a @ v)
        heads.append(torch.cat(per_head, -1))
    expected = torch.stack(heads) @ mha.out_proj.weight.T + mha.out_proj.bias
    assert torch.allclose(out, expected, atol=1e-5) and torch.allclose(fused, expected, atol=1e-5)
    assert torch.allclose(weights, expected_w, atol=1e-6) and none is None


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_no_output_depends_on_a_later_target_token(norm):
    torch.manual_seed(0)
    model = tiny_model("transformer", norm=norm).eval()
    src = torch.randint(4, 40, (2, 6))
    src[1, 4:] = PAD
    src_len, tgt = torch.tensor([6, 4]), torch.randint(4, 30, (2, 7))
    logits, cross, self_w = model(src, src_len, tgt)
    for t in range(1, 7):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(4, 30, (2, 7 - t))
        other, other_cross, _ = model(src, src_len, changed)
        assert torch.allclose(other[:, :t], logits[:, :t], atol=1e-5)
        assert torch.allclose(other_cross[..., :t, :], cross[..., :t, :], atol=1e-6)
    assert (self_w.triu(1) == 0).all()  # nothing attended above the diagonal, in any layer or head
    assert self_w.shape == (2, 2, 2, 7, 7)  # (B, layers, heads, T, T)


def test_the_full_context_pass_sees_later_target_tokens_but_never_padding_and_the_loss_reads_it():
    torch.manual_seed(0)
    model = tiny_model("transformer").eval()
    src, src_len = torch.randint(4, 40, (2, 6)), torch.tensor([6, 6])
    tgt = torch.randint(4, 30, (2, 7))
    tgt[1, 5:] = PAD  # the second target is 5 long (its BOS and 4 words)
    state = model.encode(src, src_len)
    _, cross, self_w = model.decode(state, tgt, full_context=True)
    assert (self_w[0].triu(1) > 0).any() and (self_w[1, ..., 5:] == 0).all()  # later positions seen; padding never
    alone = model.decode(model.encode(src[1:], src_len[1:]), tgt[1:, :5], full_context=True)[1]
    assert torch.allclose(alone, cross[1:, ..., :5, :], atol=1e-5)  # a row's attention whatever the batch's padding
    changed = tgt.clone()
    changed[0, 6] = (tgt[0, 6] - 3) % 26 + 4  # another last token: every earlier row of the full pass may change
    assert not torch.allclose(model.decode(state, changed, full_context=True)[1][0, ..., :6, :], cross[0, ..., :6, :])
    out = tgt.roll(-1, 1)
    causal = model.loss(src, src_len, tgt, out, need_weights=True)
    full = model.loss(src, src_len, tgt, out, need_weights=True, full_context=True)
    assert torch.equal(causal[0], full[0]) and torch.allclose(full[3], cross) and not torch.allclose(causal[3], cross)
    with pytest.raises(ValueError, match="has no full-context pass"):
        rnn = tiny_model("bahdanau")
        rnn.decode(rnn.encode(src, src_len), tgt, full_context=True)


def test_the_fused_path_gives_what_the_weights_path_gives():
    torch.manual_seed(0)
    model = tiny_model("transformer").eval()
    src = torch.randint(4, 40, (3, 6))
    src[2, 3:] = PAD
    src_len, tgt = torch.tensor([6, 6, 3]), torch.randint(4, 30, (3, 5))
    state = model.encode(src, src_len)
    with_weights, cross, _ = model.decode(state, tgt, need_weights=True)
    without, none, _ = model.decode(state, tgt, need_weights=False)
    assert torch.allclose(with_weights, without, atol=1e-5) and cross is not None and none is None


def test_bad_transformer_settings_name_the_key():
    with pytest.raises(ValueError, match=r"model.emb_size=16 \(d_model\) must be a multiple of the heads \(3\)"):
        tiny_model("transformer", heads=3)
    with pytest.raises(ValueError, match="norm='middle': must be pre or post"):
        tiny_model("transformer", norm="middle")
    with pytest.raises(ValueError, match="positions='rotary': must be sinusoidal or learned"):
        tiny_model("transformer", positions="rotary")


def test_the_sinusoidal_positions_are_the_formula_s():
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)) (Vaswani et al., 2017), pinned by
    numbers worked out by hand for d = 8 (frequencies 1, 0.1, 0.01, 0.001): a checkpoint trained with these tables
    must read the same ones, from any start (incremental decoding asks one position at a time)."""
    from nmt.models.transformer import Embedding

    expected = {
        0: [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
        1: [0.8414710, 0.5403023, 0.0998334, 0.9950042, 0.0099998, 0.9999500, 0.0010000, 0.9999995],  # sin 1, cos 1
        5: [-0.9589243, 0.2836622, 0.4794255, 0.8775826, 0.0499792, 0.9987503, 0.0050000, 0.9999875],  # sin 5, cos 5
    }
    embed = Embedding(20, 8, PAD, 0.0, "sinusoidal", 16)
    table = embed.positions(0, 6, torch.device("cpu"))
    assert table.shape == (6, 8)
    for p, row in expected.items():
        assert torch.allclose(table[p], torch.tensor(row), atol=1e-6), (p, table[p])
        assert torch.allclose(embed.positions(p, 1, torch.device("cpu"))[0], torch.tensor(row), atol=1e-6), p


def test_attention_dropout_is_off_at_inference_on_both_paths():
    """A Transformer with attention dropout 0.5 in eval mode decodes the same through the fused kernel as through
    the weights path, whose dropout is an identity in eval mode."""
    torch.manual_seed(0)
    model = tiny_model("transformer", attention_dropout=0.5, encoder={"attention_dropout": 0.5}).eval()
    src, src_len, tgt = torch.randint(4, 40, (2, 6)), torch.tensor([6, 4]), torch.randint(4, 30, (2, 5))
    state = model.encode(src, src_len)
    with_weights, _, _ = model.decode(state, tgt, need_weights=True)
    without, _, _ = model.decode(state, tgt, need_weights=False)
    assert torch.allclose(with_weights, without, atol=1e-5)
