"""The training loss's forward and backward captured as CUDA graphs, one per batch shape, and replayed.

A small model's GPU step waits on the host: each of its ~1,000 kernel launches costs tens of microseconds of Python,
module calls, dispatcher and autograd, more than the kernel itself. A CUDA graph records the launches of one step
once and replays them with one call, so the host's cost no longer grows with the ops. A graph holds fixed shapes
and fixed memory, so it needs batches of a bounded set of shapes (``data.shapes``: every batch padded to one of
them) and a loss with no data-dependent shape (``Seq2Seq.loss(static=True)``: every position through the output
layer, weighted by the mask). Each new shape is captured once, at its first batch
(:func:`torch.cuda.make_graphed_callables`: a few warm-up passes on a side stream, then the capture); the optimiser
step, gradient clipping and everything Lightning does stay outside the graph, as in an eager step.

Where capture is off (a CPU, or ``capture=False`` in tests), the same static-shape loss runs eagerly: the losses and
gradients a graph replays are those of that function.
"""

from __future__ import annotations

import contextlib
import logging
import time

import torch
from torch import Tensor, nn

from nmt.models.precision import CastWeights
from nmt.models.seq2seq import Seq2Seq

log = logging.getLogger(__name__)

Shape = tuple[tuple[int, ...], tuple[int, ...]]  # (source ids' shape, target ids' shape)
MAX_GRAPHS = 16  # graphs kept, each with its activation memory: data.shapes may ask no more


class StaticLoss(nn.Module):
    """``(src, src_len, tgt_in, tgt_out)`` -> the label-smoothed loss, the NLL and the real target tokens of
    :meth:`Seq2Seq.loss` with ``static=True``: tensors in, tensors out, every shape fixed by the inputs' (what a
    graph can capture). A module, so that capture finds the model's parameters."""

    def __init__(self, model: Seq2Seq, label_smoothing: float, cast: CastWeights | None = None):
        super().__init__()
        self.model, self.label_smoothing, self.cast = model, label_smoothing, cast

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        with self.cast.applied() if self.cast is not None else contextlib.nullcontext():  # inside the graph
            loss, nll, count, _ = self.model.loss(src, src_len, tgt_in, tgt_out, self.label_smoothing, static=True)
        return loss, nll, count


class GraphedLoss:
    """The training loss, one CUDA graph per batch shape (``capture``), else :class:`StaticLoss` run eagerly.

    ``max_graphs`` bounds the graphs kept (each holds its own activation memory): a shape beyond them is refused in
    one line naming ``data.shapes``, since it means batches were not padded to a bounded set.
    """

    def __init__(
        self, model: Seq2Seq, label_smoothing: float, capture: bool, cast: CastWeights | None = None,
        max_graphs: int = MAX_GRAPHS,
    ):  # fmt: skip
        self.model, self.label_smoothing, self.cast = model, label_smoothing, cast
        self.static = StaticLoss(model, label_smoothing, cast)  # the eager function
        self.capture, self.max_graphs = capture, max_graphs
        self.graphs: dict[Shape, nn.Module] = {}
        self.seconds = 0.0  # spent capturing

    def __call__(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        args = (src, src_len, tgt_in, tgt_out)
        if not self.capture or not self.model.training:
            return self.static(*args)
        shape = (tuple(src.shape), tuple(tgt_in.shape))
        graphed = self.graphs.get(shape)
        if graphed is None:
            graphed = self._capture(shape, args)
        return graphed(*args)

    def _capture(self, shape: Shape, args: tuple[Tensor, ...]) -> nn.Module:
        if len(self.graphs) >= self.max_graphs:
            raise RuntimeError(
                f"compile.graphs: a batch of shape {shape} after {len(self.graphs)} shapes captured; the batches "
                "need a bounded set of shapes: set data.shapes (at most 12 or so)"
            )
        started = time.perf_counter()
        # a module of its own per shape: capture replaces the forward of the module it is given. Its warm-up passes
        # run on copies of this batch; this batch's own step then replays the graph
        sample = tuple(a.clone() for a in args)
        graphed = torch.cuda.make_graphed_callables(StaticLoss(self.model, self.label_smoothing, self.cast), sample)
        self.graphs[shape] = graphed
        self.seconds += time.perf_counter() - started
        log.info("compile.graphs: shape %s captured in %.2f s (%d graphs)", shape, time.perf_counter() - started,
                 len(self.graphs))  # fmt: skip
        return graphed


def uncapturable_part(model) -> str | None:
    """``model.<part> (<its _target_>)`` of the first of a model config's encoder and decoder whose class does not
    say that its training step can be captured (``capturable``); None where both do."""
    from hydra.utils import get_object

    for part in ("encoder", "decoder"):
        target = model[part]["_target_"]
        if not getattr(get_object(target), "capturable", False):
            return f"model.{part} ({target})"
    return None


def check_graphs(cfg) -> None:
    """A ValueError, before any data is prepared, where ``compile.graphs=true`` cannot capture: a CPU, several
    devices, a compiled step (``compile.enabled``), batches of unbounded shapes, guided alignment (its attention and
    links are outside the static loss), or a model part whose step depends on the data's values (``capturable``
    false: a recurrent encoder packs by the lengths on the host)."""
    from nmt.hardware import trains_on_cpu

    if not cfg.get("compile", {}).get("graphs"):
        return
    why = None
    if trains_on_cpu(cfg.trainer.get("accelerator", "auto")):
        why = "needs a GPU (CUDA graphs): add trainer=gpu, or leave compile.graphs=false on a CPU"
    elif str(cfg.trainer.get("devices", 1)) not in ("1", "[0]") or int(cfg.trainer.get("num_nodes", 1)) > 1:
        why = f"captures on one GPU (trainer.devices={cfg.trainer.get('devices')}): set trainer.devices=1"
    elif cfg.compile.get("enabled"):
        why = "captures the eager step, not a compiled one: set compile.enabled=false"
    elif not cfg.data.get("shapes"):
        why = "needs batches of a bounded set of shapes: set data.shapes (e.g. 12)"
    elif cfg.data.shapes > MAX_GRAPHS:
        why = f"keeps {MAX_GRAPHS} graphs at most (data.shapes={cfg.data.shapes}): set data.shapes={MAX_GRAPHS} or less"
    elif cfg.loss.get("align_weight", 0) > 0:
        why = "does not capture guided alignment: set loss.align_weight=0 or compile.graphs=false"
    elif part := uncapturable_part(cfg.model):
        why = f"{part} depends on the data's values in a step: use model=transformer"
    if why:
        raise ValueError(f"compile.graphs=true {why}")
