"""Mixed precision: where a model's own numbers need more than bfloat16 (recurrent states), and the casts autocast
would make at every use of a weight made once a step (:class:`CastWeights`).

Under autocast (``trainer.precision=bf16-mixed``) products run in bfloat16, whose 8-bit mantissa is plenty for one
product but not for a state carried through every step of a recurrence: rounded to bfloat16 at each of 50 steps, a
GRU state drifts. So a recurrence keeps its state in float32 (its products may still run in bfloat16), and a cuDNN
GRU, which would carry its state in the input's dtype, runs in float32 (TF32 tensor cores on a GPU).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor


def state(x: Tensor) -> Tensor:
    """``x`` as a recurrent state: float32 under autocast, as it is otherwise."""
    return x.float() if torch.is_autocast_enabled(x.device.type) else x


@contextlib.contextmanager
def full_precision(x: Tensor) -> Iterator[None]:
    """Autocast off, on ``x``'s device, within the block (its inputs made float32 with :func:`state` before it)."""
    with torch.autocast(x.device.type, enabled=False):
        yield


class _CastAll(torch.autograd.Function):
    """The float32 buffer of :class:`CastWeights` in a lower precision, as views shaped like its parameters; backward:
    their gradients in one buffer, cast back in one op."""

    @staticmethod
    def forward(ctx, flat: Tensor, dtype: torch.dtype, sizes: list[int], shapes: list[torch.Size], *params: Tensor):
        ctx.sizes, ctx.shapes, ctx.dtype = sizes, shapes, flat.dtype
        return tuple(part.view(shape) for part, shape in zip(flat.to(dtype).split(sizes), shapes))

    @staticmethod
    def backward(ctx, *grads: Tensor):
        flat = torch.cat([g.reshape(-1) for g in grads]).to(ctx.dtype)  # (sum of sizes,)
        return None, None, None, None, *(part.view(shape) for part, shape in zip(flat.split(ctx.sizes), ctx.shapes))


class CastWeights:
    """A model's linear layers' weights and biases cast to autocast's dtype in one op a step, not one op each.

    Autocast casts every weight and bias of a product at each use, and their gradients back in the backward pass: two
    kernel launches per parameter per step, nearly 40% of a small Transformer's step on a GPU, where launches cost more
    than the kernels. Here those parameters share one float32 buffer (each a view of it: still a parameter of its own
    for the optimiser, the checkpoints and the averages), which :meth:`applied` casts at once and hands to the layers
    for the block; their gradients come back as one buffer, cast in one op. The products see the values autocast
    would give them, and the gradients are the same, bit for bit, where each layer is applied once in the pass:
    ``parts`` are the modules of ``model`` that are (a layer applied at every step of a recurrence would sum its
    gradients in bfloat16 here, in float32 under autocast). Embeddings (looked up in float32 under autocast) and layer
    norms (computed in float32) keep their own parameters; so does a linear layer tied to an embedding.
    """

    def __init__(self, model: torch.nn.Module, parts: Iterable[torch.nn.Module]):
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        self.slots: list[tuple[torch.nn.Module, str, torch.nn.Parameter]] = []
        seen: set[int] = set()
        for module in (m for part in parts for m in part.modules()):
            if isinstance(module, torch.nn.Linear):
                for name in ("weight", "bias"):
                    p = module._parameters.get(name)
                    if p is not None and id(p) not in embeddings | seen:
                        seen.add(id(p))
                        self.slots.append((module, name, p))
        self.flat = torch.empty(0)
        self._share()

    def _share(self) -> None:
        """The parameters as views of one buffer, on their device (again after they were moved)."""
        params = self.params = [p for _, _, p in self.slots]
        self.flat = torch.cat([p.detach().reshape(-1) for p in params]) if params else torch.empty(0)
        start = 0
        for p in params:
            p.data = self.flat[start : start + p.numel()].view_as(p)
            start += p.numel()
        self.sizes, self.shapes = [p.numel() for p in params], [p.shape for p in params]

    def _shared(self) -> bool:
        first, last = self.slots[0][2], self.slots[-1][2]  # moved or replaced: they are views of it no more
        return all(p.untyped_storage().data_ptr() == self.flat.untyped_storage().data_ptr() for p in (first, last))

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block, where autocast is on for the parameters' device, the layers read the cast views."""
        kind = self.slots[0][2].device.type if self.slots else "cpu"
        if not self.slots or not torch.is_autocast_enabled(kind):
            yield
            return
        if not self._shared():
            self._share()
        low = _CastAll.apply(self.flat, torch.get_autocast_dtype(kind), self.sizes, self.shapes, *self.params)
        for (module, name, _), t in zip(self.slots, low):
            module._parameters[name] = t  # read by the layer's forward as its parameter; put back below
        try:
            yield
        finally:
            for module, name, p in self.slots:
                module._parameters[name] = p
