"""The output layer's label-smoothed cross-entropy, fused with the layer itself (called by ``Seq2Seq.loss``), and the
guided-alignment term."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _in_compute_dtype(hidden: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The output layer's inputs in the dtype its products run in: autocast's if on (as ``F.linear``), else hidden's."""
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    return hidden.to(dtype), weight.to(dtype), bias.to(dtype)


def _log_probs(hidden: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Output layer (inputs already in the compute dtype) then log-softmax in float32: ``(N, R)`` -> ``(N, V)``."""
    with torch.autocast(hidden.device.type, enabled=False):
        logits = torch.addmm(bias, hidden, weight.t())
    return F.log_softmax(logits.float(), dim=-1)


def _smoothed(logp: Tensor, target: Tensor, smoothing: float, rows: Tensor | None) -> tuple[Tensor, Tensor]:
    """Label-smoothed loss and NLL from log-probabilities ``(N, V)``: their means, or with ``rows (N,)`` their sums
    weighted by it."""
    nll = -logp.gather(1, target.unsqueeze(1)).squeeze(1)  # (N,)
    if rows is None:
        nll, uniform = nll.mean(), logp.mean()
    else:
        nll, uniform = (nll * rows).sum(), (logp.mean(1) * rows).sum()
    return (1 - smoothing) * nll - smoothing * uniform, nll


class _OutputLayerLoss(torch.autograd.Function):
    """Output layer and label-smoothed cross-entropy in one function.

    The ``(N, V)`` log-probabilities are the largest tensor of a training step, and every pass
    over them costs time on a CPU. Here the forward turns them in place into the gradient
    ``softmax - (1-e) onehot - e/V`` and multiplies it out at once (the three products of the
    output layer's backward), so nothing ``(N, V)``-sized is kept for the backward pass and
    autograd's extra passes (zero fills, scatter, expand, division) never happen.
    """

    @staticmethod
    def forward(
        ctx, hidden: Tensor, weight: Tensor, bias: Tensor, target: Tensor, smoothing: float, rows: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        h, w, b = _in_compute_dtype(hidden, weight, bias)
        logp = _log_probs(h, w, b)  # (N, V)
        loss, nll = _smoothed(logp, target, smoothing, rows)
        N, V = logp.shape
        grad = logp.exp_().sub_(smoothing / V)  # (N, V): d(N * loss)/d logits
        grad[torch.arange(N, device=grad.device), target] -= 1 - smoothing
        if rows is not None:  # d loss / d logits: each row's weight (the mean's 1 / N otherwise, in backward)
            grad.mul_(rows.unsqueeze(1))
        with torch.autocast(hidden.device.type, enabled=False):
            grad = grad.to(h.dtype)
            ctx.save_for_backward(grad @ w, grad.t() @ h, grad.sum(0))  # (N, R), (V, R), (V,)
        ctx.n, ctx.dtypes = N if rows is None else 1, (hidden.dtype, weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None, None]:
        scale = grad_loss / ctx.n
        return *(g.mul(scale).to(dtype) for g, dtype in zip(ctx.saved_tensors, ctx.dtypes)), None, None, None


def output_layer_loss(
    hidden: Tensor, weight: Tensor, bias: Tensor, target: Tensor, smoothing: float, rows: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Label-smoothed loss and NLL (no gradient) of the output layer ``hidden @ weight.T + bias``.

    ``hidden (N, R)``, ``target (N,)`` their ids. Without ``rows`` every position is a real target token and both
    are means over them; with ``rows (N,)`` (a weight per position: 0 for padding, ``1 / real tokens`` for the rest)
    they are weighted sums, so that the positions can be every position of a batch, a shape known before the data.
    """
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad or bias.requires_grad):
        return _OutputLayerLoss.apply(hidden, weight, bias, target, smoothing, rows)
    return _smoothed(_log_probs(*_in_compute_dtype(hidden, weight, bias)), target, smoothing, rows)


def guided_alignment_loss(attention: Tensor, target: Tensor) -> Tensor:
    """``KL(target || attention)`` per target position, averaged over the positions that have links.

    ``attention`` and ``target`` are ``(B, T, S)``; a target row is a distribution over source positions, or all
    zero (no link: no loss). The cross-entropy against the links' distribution of OpenNMT-py, Marian and fairseq,
    less its constant entropy: zero, and zero gradient, where the attention already equals the links.
    """
    linked = (target.sum(-1) > 0).sum()  # target positions with links (a count on the device: nothing waits for it)
    q, a = target.float(), attention.float()  # (B, T, S)
    kl = q * (torch.log(q.clamp(min=1e-12)) - torch.log(a.clamp(min=1e-9)))  # zero where q is: rows without links too
    return kl.sum() / linked.clamp(min=1)
