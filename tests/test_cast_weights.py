"""The linear layers' weights cast once a step under autocast (nmt.models.precision.CastWeights): the same loss and
gradients as autocast's own casts, bit for bit, with two casts a parameter fewer; still one parameter each for the
optimiser and the checkpoints, shared again after they were moved."""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import FAMILIES, tiny_model
from nmt.models.precision import CastWeights


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def batch():
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 40, (5, 9), generator=g)
    src_len = torch.tensor([9, 8, 6, 4, 2])
    tgt = torch.randint(4, 30, (5, 8), generator=g)
    tgt[2:, 6:] = 0
    return src, src_len, tgt, tgt.roll(-1, 1)


def step(model, cast: CastWeights | None) -> tuple[torch.Tensor, list[torch.Tensor], Counter]:
    """One bf16 autocast forward and backward: the loss, the gradients and the ops dispatched."""
    torch.manual_seed(1)
    with Ops() as ops:
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):  # as Lightning's bf16-mixed
            with cast.applied() if cast else contextlib.nullcontext():
                loss = model.loss(*batch(), 0.1)[0]
        loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads, ops.seen


@pytest.mark.parametrize("name", FAMILIES)
def test_the_loss_and_gradients_are_autocasts_with_two_casts_a_parameter_fewer(name):
    torch.manual_seed(0)
    model = tiny_model(name, dropout=0.1).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loss, grads, plain = step(model, None)
    cast = CastWeights(model, model.applied_once)
    assert len(cast.slots) >= 2
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the same values, now shared
    same_loss, same_grads, fewer = step(model, cast)
    assert torch.equal(same_loss, loss)
    assert all(torch.equal(a, b) for a, b in zip(same_grads, grads))
    assert plain["_to_copy"] - fewer["_to_copy"] == 2 * len(cast.slots) - 2  # each one forward, one backward: 2 left


def test_parameters_moved_or_replaced_are_shared_again_and_read_as_they_are_now():
    torch.manual_seed(0)
    model = tiny_model("transformer").train()
    cast = CastWeights(model, model.applied_once)
    for p in model.parameters():  # as a move to another device would: each parameter its own storage again
        p.data = p.data.clone() * 0.5
    loss, grads, _ = step(model, cast)
    assert cast._shared()
    reference = tiny_model("transformer").train()
    reference.load_state_dict(model.state_dict())
    want_loss, want_grads, _ = step(reference, None)
    assert torch.equal(loss, want_loss) and all(torch.equal(a, b) for a, b in zip(grads, want_grads))


def test_outside_autocast_the_layers_read_their_own_parameters():
    torch.manual_seed(0)
    model = tiny_model("transformer")
    cast = CastWeights(model, model.applied_once)
    with cast.applied():
        assert all(module._parameters[name] is p for module, name, p in cast.slots)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with cast.applied():
            assert all(module._parameters[name].dtype == torch.bfloat16 for module, name, _ in cast.slots)
    assert all(module._parameters[name] is p for module, name, p in cast.slots)  # put back
