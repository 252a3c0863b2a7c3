"""nmt.models.dropout.Dropout: nn.Dropout's semantics with masks drawn 16 bits an element on a CPU."""

import pytest
import torch
from torch import nn

from nmt.models.dropout import Dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_each_element_is_kept_with_the_keep_probability_and_scaled_to_keep_the_mean(p):
    torch.manual_seed(0)
    drop = Dropout(p).train()
    x = torch.ones(400, 1000, requires_grad=True)
    y = drop(x)
    kept = y != 0
    n = x.numel()
    assert abs(kept.float().mean().item() - (1 - p)) < 4 * ((p * (1 - p) / n) ** 0.5)  # within 4 standard errors
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - p)), rtol=1e-4)
    y.sum().backward()  # the gradient passes where kept, scaled the same, and nowhere else
    assert torch.equal(x.grad, y.detach())


def test_every_16_bits_of_each_draw_are_used_uniformly():
    torch.manual_seed(1)
    n = 1 << 20
    for p in (0.25, 0.75):  # 4 elements from each 64-bit draw: each position within a draw drops at the same rate
        mask, q = keep_mask(torch.empty(n), p)
        assert q == p
        by_position = mask.view(-1, 4).float().mean(0)
        assert torch.allclose(by_position, torch.full((4,), 1 - p), atol=0.005)
    mask, q = keep_mask(torch.empty(3, 5, 7), 0.1)  # an element count not a multiple of 4
    assert mask.shape == (3, 5, 7) and q == round(0.1 * 65536) / 65536


def test_seeded_masks_repeat_and_evaluation_and_p_0_or_1_are_nn_dropout_s():
    x = torch.randn(8, 16)
    torch.manual_seed(3)
    a = Dropout(0.2).train()(x)
    torch.manual_seed(3)
    assert torch.equal(a, Dropout(0.2).train()(x))
    assert torch.equal(Dropout(0.2).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), nn.Dropout(1.0).train()(x))


def test_under_bf16_autocast_the_output_keeps_its_dtype():
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    assert Dropout(0.3).train()(x).dtype == torch.bfloat16


@pytest.mark.slow  # torch.compile
def test_compiled_it_draws_the_eager_masks_from_the_same_generator_and_each_call_its_own():
    torch._dynamo.reset()
    first, second = Dropout(0.3).train(), Dropout(0.3).train()

    def twice(x):  # two draws in one graph: a compiler must neither merge them nor reorder them
        return first(x) * 2, second(x)

    x = torch.ones(5, 7, requires_grad=True)  # 35 elements: not a multiple of the 4 a draw gives
    torch.manual_seed(4)
    eager = twice(x)
    torch.manual_seed(4)
    compiled = torch.compile(twice, dynamic=False)(x)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])
    assert not torch.equal(compiled[0] / 2, compiled[1])
    compiled[1].sum().backward()  # the gradient passes where kept, through the compiled graph
    assert torch.equal(x.grad, compiled[1].detach())
    torch._dynamo.reset()


def test_attention_trained_on_a_cpu_drops_weights_with_these_masks_whether_or_not_it_returns_them():
    from nmt.models.attention import DotProductAttention

    attention = DotProductAttention(dropout=0.5).train()
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    lens = torch.tensor([5, 2])
    torch.manual_seed(5)
    context_alone, none = attention(q, k, v, lens, need_weights=False)
    torch.manual_seed(5)
    context, weights = attention(q, k, v, lens, need_weights=True)
    assert none is None and weights is not None
    assert torch.allclose(context_alone, context, atol=1e-6)
    attention.eval()  # no dropout: the fused kernel, the same context
    assert torch.allclose(attention(q, k, v, lens, need_weights=False)[0], attention(q, k, v, lens)[0], atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_after_relu_is_dropout_of_relu_and_its_gradient_passes_only_where_the_output_is_positive(dtype):
    drop = Dropout(0.3).train()
    x = torch.randn(64, 33, dtype=dtype, requires_grad=True)
    torch.manual_seed(6)
    fused = drop.after_relu(x)
    torch.manual_seed(6)
    plain = drop(torch.relu(x))  # the same draw: the same mask
    assert fused.dtype == dtype and torch.equal(fused, plain)
    g = torch.randn_like(fused)
    (grad_fused,) = torch.autograd.grad(fused, x, g)
    (grad_plain,) = torch.autograd.grad(plain, x, g)
    assert torch.equal(grad_fused, grad_plain)
    assert torch.equal(grad_fused == 0, fused.detach() == 0)  # zero exactly where x <= 0 or dropped
    drop.eval()
    assert torch.equal(drop.after_relu(x), torch.relu(x))


def test_the_compiler_s_custom_operators_pass_torch_s_operator_checks():
    from torch.library import opcheck

    from nmt.models.dropout import _DRAWS, _keep_bytes_op, _relu_dropped_grad

    opcheck(_keep_bytes_op, (_DRAWS.clone(), torch.empty(3, 5), 6554), test_utils=("test_schema", "test_faketensor"))
    y = torch.relu(torch.randn(4, 6))
    opcheck(_relu_dropped_grad, (torch.randn(4, 6), y, 1.25))
