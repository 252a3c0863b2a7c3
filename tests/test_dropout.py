"""nmt.dropout.Dropout: nn.Dropout's semantics with masks drawn 16 bits an element on a CPU."""

import pytest
import torch
from torch import nn

from nmt.dropout import Dropout, keep_mask


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
        mask, q = keep_mask(torch.Size([n]), p)
        assert q == p
        by_position = mask.view(-1, 4).float().mean(0)
        assert torch.allclose(by_position, torch.full((4,), 1 - p), atol=0.005)
    mask, q = keep_mask(torch.Size([3, 5, 7]), 0.1)  # an element count not a multiple of 4
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
