"""The training step's forward and backward compiled by ``torch.compile`` (Inductor: fused C++/OpenMP kernels on
a CPU, Triton kernels on a GPU), with the eager model as the fallback where compiling fails.

One graph serves every batch: sizes are symbolic from the first batch on (``dynamic``), and no two of them are tied
because they happened to be equal in the batch that was traced (PyTorch's "duck sizing" would recompile the step for
the first batch whose source and target lengths differ). A model part that loops over time in Python (the Bahdanau
decoder) names that method in ``python_loops``: its frame is left to Python and what it calls is compiled, so the
per-step cell is one graph, instead of the loop unrolled T times (a graph per target length).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx.experimental._config as symbolic_shapes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Compilation:
    """``conf/config.yaml``'s ``compile`` section."""

    enabled: bool = False
    dynamic: bool | None = True  # True: symbolic sizes from the first batch; None: after a recompile; False: static
    graphs: bool = False  # the loss's forward and backward captured as CUDA graphs, one per shape (nmt.training.graphs)


_LOOPS_LEFT: set[type] = set()  # the classes whose python_loops are left to Python already


def leave_loops_to_python(model: torch.nn.Module) -> None:
    """Each part of ``model`` runs the methods its class names in ``python_loops`` frame by frame in Python, while
    ``torch.compile`` still compiles the functions they call. Done once a class, when a step is first compiled (so
    that nothing imports the compiler before then); an eager call goes straight through."""
    for cls in {type(part) for part in model.modules()} - _LOOPS_LEFT:
        for name in getattr(cls, "python_loops", ()):
            setattr(cls, name, torch.compiler.disable(getattr(cls, name), recursive=False))
        _LOOPS_LEFT.add(cls)


class CompiledLoss:
    """``fn`` (a model's ``loss``) compiled at its first call; if compiling fails there (no C++ compiler, an op
    Inductor cannot lower), one warning and ``fn`` itself from then on. Counts the graphs compiled and the seconds
    of the calls that compiled one (a compiled step's time counts against any time budget like any other)."""

    def __init__(self, fn: Callable[..., Any], dynamic: bool | None):
        if isinstance(model := getattr(fn, "__self__", None), torch.nn.Module):  # a model's bound loss
            leave_loops_to_python(model)
        self.fn, self.compiled = fn, torch.compile(fn, dynamic=dynamic)
        self.failed, self.graphs, self.seconds = False, 0, 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            from torch._dynamo.utils import counters

            before, started = counters["stats"]["unique_graphs"], time.perf_counter()
            try:
                with symbolic_shapes.patch(use_duck_shape=False):  # sizes equal in one batch are not tied
                    out = self.compiled(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - any compiler failure: the eager step still trains
                first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
                log.warning("compile: %s: %s; training goes on without compiling", type(e).__name__, first)
                self.failed = True
                return self.fn(*args, **kwargs)
            if (new := counters["stats"]["unique_graphs"] - before) > 0:
                self.graphs += new
                self.seconds += time.perf_counter() - started
            return out
        return self.fn(*args, **kwargs)
