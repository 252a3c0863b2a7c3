"""The host's cost of one training step, counted on a CPU: the ops it dispatches and the Python calls it makes.

    python -m bench.speed.step_ops [--models bahdanau luong transformer] [--rows 16] [--width 24] [--steps 12]
                                   [--cache DIR] [--threads 2]

A small model's GPU step is bound by the host: every op dispatched costs tens of microseconds of Python, module
calls, dispatcher and autograd whatever its size, so ops per step are counted as FLOPs are. Each model
(``conf/model/<name>.yaml``, the Transformer at the 6+6 layers of ``experiment=tatoeba_transformer``; small widths:
the counts do not depend on them) in its ``TranslationModule`` trains on real padded batches of the built-in corpus
(``--rows`` pairs whose source and target, EOS included, pad to ``--width`` at ``data.pad_multiple=8``; ``--cache
""``: prepared afresh), set up as Lightning sets it up for a fit at each precision (:func:`fitting`). One
training step is ``module.training_loss(batch)``, backward, gradient clipping (norm 1, multi-tensor) and the step of
the optimiser ``module.configure_optimizers()`` builds there, counted by a ``TorchDispatchMode`` after a warm-up step
on another batch (the optimiser's state exists), in float32 and under ``torch.autocast("cpu", dtype=torch.bfloat16)``
as Lightning's ``bf16-mixed`` runs the forward (CPU autocast casts fewer ops than CUDA's, whose lists keep layer norm,
softmax and reductions in float32: a GPU casts more).

Each op is one of (the rule of :func:`kind`):

- **view/metadata**: it launches no work: every tensor it returns aliases an input without writing it (its schema's
  ``alias_info`` is set and not a write: ``view``, ``t``, ``transpose``, ``expand``, ``slice``, ``split``, ...), or it
  is one of :data:`METADATA` (``detach``, ``alias``, ``_unsafe_view``, the ``empty`` allocations, ...), or it is no
  operator of ``aten`` or ``nmt`` (the profiler's ``record_function`` markers the optimiser sets);
- **kernel**: every other op, in-place ones included; of them **casts**, ``aten._to_copy`` and ``aten.to``.

GPU paths forced (:func:`gpu_paths`): where a branch only a CPU takes, the GPU's. ``Dropout.draws_masks`` is False
(on a CPU it draws masks of its own, and attention then leaves the fused kernel); ``F.dropout`` in training becomes
``torch.native_dropout`` (CUDA's one kernel each way; a CPU's ``aten.dropout`` is four ops forward); and
``F.scaled_dot_product_attention`` is called with ``dropout_p=0`` (a GPU's flash or memory-efficient kernel drops
inside its one op each way; a CPU's dropout falls back to the unfused math path). Not forced: the RNN models' GRUs
(cuDNN runs one op each way, a CPU's ``aten.gru`` is its steps' ops) and their decoders' loop over target steps in
Python, so their counts grow with ``--width`` and move a little with the batch's lengths (the encoder packs by them).

Python calls (``sys.setprofile``'s ``call`` and ``c_call`` events) of a step of the Transformer, GPU paths forced
but no mode installed: a bare loop (next batch of a list, ``training_loss``, backward, clipping, optimiser and
scheduler step, ``zero_grad``) and the same step through Lightning's ``Trainer``: a real ``trainer.fit`` with
train.py's callbacks and logger, no progress bar or validation, over ``--steps`` batches, the calls from one
``on_train_batch_start`` to the next, the first two steps left out; the medians and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from bench.common import options, table, write_json

aten = torch.ops.aten
# ops that launch no kernel though their schema does not say they alias an input: new memory, or a view in all but name
METADATA = {
    aten.detach.default, aten.alias.default, aten._unsafe_view.default, aten.lift_fresh.default,
    aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default, aten.new_empty.default,
    aten.new_empty_strided.default,
}  # fmt: skip
CASTS = {"aten::_to_copy", "aten::to"}  # by the op's name, any overload
KERNEL_NAMESPACES = {"aten", "nmt"}
PRECISIONS = ("32-true", "bf16-mixed")
CLIP = 1.0  # trainer.gradient_clip_val's default

# The built-in corpus at the tests' tiny size (tests/conftest.py's TINY_DATA): prepared in seconds, cached after
DATA = ["data.source.train_size=600", "data.source.valid_size=24", "data.source.test_size=24",
        "data.prepare.spm.vocab_size=300", "data.max_tokens=1024", "data.pad_multiple=8", "data.num_workers=0"]
# conf/model/<name>.yaml at small widths (op counts do not depend on them); the Transformer at 6+6 layers
SIZES = {
    "bahdanau": ["model.emb_size=32", "model.encoder.hidden_size=32", "model.decoder.hidden_size=48",
                 "model.readout_size=32", "model.decoder.attn_hidden=32"],
    "luong": ["model.emb_size=32", "model.encoder.hidden_size=32", "model.decoder.hidden_size=48",
              "model.readout_size=32"],
    "transformer": ["model.emb_size=32", *(f"model.{part}.{k}={v}" for part in ("encoder", "decoder")
                                           for k, v in (("num_layers", 6), ("ff_size", 64)))],
}  # fmt: skip


def kind(func: torch._ops.OpOverload) -> str:
    """``"cast"``, ``"kernel"`` (any other op that launches work) or ``"view"`` (views and metadata: no kernel), by
    the rule of the module's docstring."""
    if func.namespace not in KERNEL_NAMESPACES or func in METADATA:
        return "view"
    if func._schema.name in CASTS:
        return "cast"
    returns = func._schema.returns
    if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
        return "view"
    return "kernel"


Signature = tuple[str, tuple[tuple[tuple[int, ...], str], ...]]  # an op's name, its tensor outputs' shapes and dtypes


@dataclass
class StepOps:
    """What one step dispatched: counts by kind, by op, and the sequence of ops with their outputs' shapes."""

    kernels: int = 0  # ops that launch work, casts included
    casts: int = 0
    views: int = 0
    by_op: Counter = field(default_factory=Counter)  # op name -> times dispatched
    kinds: dict[str, str] = field(default_factory=dict)  # op name -> its kind
    sequence: list[Signature] = field(default_factory=list)


class OpCounter(TorchDispatchMode):
    """Counts the ops dispatched below autograd (forward, backward and optimiser alike) into :attr:`ops`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = StepOps()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        k, ops = kind(func), self.ops
        ops.kernels += k != "view"
        ops.casts += k == "cast"
        ops.views += k == "view"
        ops.by_op[str(func)] += 1
        ops.kinds[str(func)] = k
        tensors = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        ops.sequence.append((str(func), tuple((tuple(t.shape), str(t.dtype)) for t in tensors)))
        return out


class GpuKernels(TorchFunctionMode):
    """Dropout and attention as CUDA dispatches them (see the module's docstring): training's ``F.dropout`` as
    ``torch.native_dropout``, and ``scaled_dot_product_attention`` without the dropout that sends a CPU to its math
    path (a GPU's fused kernel applies it inside its one op)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            x, p, training = args[0], kwargs.get("p", args[1] if len(args) > 1 else 0.5), kwargs.get("training", True)
            if training and 0 < p < 1 and not kwargs.get("inplace"):
                return torch.native_dropout(x, p, True)[0]
        if func is F.scaled_dot_product_attention and kwargs.get("dropout_p", 0.0):
            kwargs = {**kwargs, "dropout_p": 0.0}
        return func(*args, **kwargs)


@contextlib.contextmanager
def gpu_branches() -> Iterator[None]:
    """The model's own GPU branch: ``Dropout`` as ``nn.Dropout`` and attention through the fused kernel."""
    from nmt.models.dropout import Dropout

    with mock.patch.object(Dropout, "draws_masks", lambda self, x: False):
        yield


@contextlib.contextmanager
def gpu_paths() -> Iterator[None]:
    """Every GPU path this module forces, for counting ops: :func:`gpu_branches` and :class:`GpuKernels`."""
    with gpu_branches(), GpuKernels():
        yield


def compose(model: str, cache: str | Path, *overrides: str, workdir: str | Path | None = None):
    """train.py's config for ``model`` at :data:`SIZES` on the :data:`DATA` corpus prepared under ``cache``; with
    ``workdir``, the run's files (checkpoints, logs, the alignments page) go there, as a real fit needs."""
    from bench.common import compose as compose_config

    places = []
    if workdir is not None:
        places = [f"callbacks.{c}.dirpath={workdir}/checkpoints" for c in ("checkpoint", "interrupted")]
        places += [f"callbacks.heatmaps.html={workdir}/alignments.html", f"logger.save_dir={workdir}"]
    return compose_config([f"model={model}", *SIZES[model], *DATA, f"data.cache_dir={cache}", *places, *overrides])


def prepared(cfg):
    """The config's data module, prepared and set up for fitting."""
    from hydra.utils import instantiate

    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def module_of(cfg, datamodule):
    """The ``TranslationModule`` of ``cfg`` (seeded: the same weights every time), in training mode."""
    from nmt.training.module import TranslationModule

    torch.manual_seed(cfg.seed)
    return TranslationModule.from_config(cfg, datamodule.tokenizer).train()


def stand_in_trainer(precision: str = "32-true") -> SimpleNamespace:
    """What the module reads of Lightning's ``Trainer`` at the start of a fit (its precision, gradient clipping,
    device), for a step taken without one."""
    strategy = SimpleNamespace(root_device=torch.device("cpu"), broadcast=lambda obj, src=0: obj)
    return SimpleNamespace(precision=precision, gradient_clip_val=CLIP, strategy=strategy)


@contextlib.contextmanager
def fitting(module, precision: str = "32-true") -> Iterator[tuple[torch.optim.Optimizer, Any]]:
    """The module as a fit at ``precision`` has it, between Lightning's ``setup("fit")`` and ``teardown("fit")``
    (its kernels applied, its training loss chosen: with ``compile.graphs`` the static-shape loss, run eagerly on a
    CPU), and ``configure_optimizers()``'s optimiser and scheduler (or None) as it builds them there."""
    module._trainer = stand_in_trainer(precision)
    module.setup("fit")
    try:
        made = module.configure_optimizers()
        yield (made["optimizer"], made["lr_scheduler"]["scheduler"]) if isinstance(made, dict) else (made, None)
    finally:
        module.teardown("fit")
        module._trainer = None


def same_shape_batches(datamodule, count: int, rows: int = 16, width: int = 24) -> list:
    """``count`` real training batches of ``rows`` distinct pairs each whose source and target (EOS included) both
    pad to ``width``: one shape ``(rows, width)`` for the source and target tensors, different contents."""
    import numpy as np

    from nmt.data.collate import BatchDataset

    corpus, multiple = datamodule.corpus.splits["train"], datamodule.pad_multiple
    padded = lambda lens: -(-np.asarray(lens, np.int64) // multiple) * multiple  # noqa: E731
    fits = np.flatnonzero((padded(corpus.src_lens) == width) & (padded(np.asarray(corpus.tgt_lens) + 1) == width))
    if len(fits) < count * rows:
        raise ValueError(f"{len(fits)} training pairs pad to {width}, fewer than {count} batches of {rows}")
    dataset = BatchDataset(corpus, pad_multiple=multiple)
    return [dataset[fits[k * rows : (k + 1) * rows].tolist()] for k in range(count)]


def train_step(module, opt: torch.optim.Optimizer, batch, bf16: bool = False, scheduler: Any = None) -> None:
    """One training step as Lightning takes it: the loss (under bf16 autocast where asked), backward, clipping, the
    optimiser's step (and the scheduler's), gradients set to None."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss, _ = module.training_loss(batch)
    loss.backward()
    params = [p for group in opt.param_groups for p in group["params"]]  # as Lightning clips: the optimiser's
    torch.nn.utils.clip_grad_norm_(params, CLIP, foreach=True)
    opt.step()
    if scheduler is not None:
        scheduler.step()
    opt.zero_grad(set_to_none=True)


def count_step(module, batch, precision: str = "32-true", warmup=None) -> StepOps:
    """The ops of one training step on ``batch`` at ``precision``, GPU paths forced, after a warm-up step on
    ``warmup`` (default ``batch``) that makes the optimiser's state."""
    bf16 = precision == "bf16-mixed"
    with fitting(module, precision) as (opt, _), gpu_paths():
        train_step(module, opt, batch if warmup is None else warmup, bf16)
        counter = OpCounter()
        with counter:
            train_step(module, opt, batch, bf16)
    return counter.ops


class CallCounter:
    """A ``sys.setprofile`` function counting Python's ``call`` and ``c_call`` events into :attr:`calls`."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, frame, event: str, arg) -> None:
        if event == "call" or event == "c_call":
            self.calls += 1

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            yield
        finally:
            sys.setprofile(before)


def bare_calls(module, batches: list) -> list[int]:
    """The Python calls of each step of a bare loop over ``batches`` (float32, GPU branches), the first two left
    out."""
    counts, loader = [], iter(batches)
    with fitting(module) as (opt, scheduler), gpu_branches():
        for _ in batches:
            counter = CallCounter()
            with counter.counting():
                train_step(module, opt, next(loader), scheduler=scheduler)
            counts.append(counter.calls)
    return counts[2:]


class Loader:
    """Batches made beforehand, as one loader (Lightning takes a list for a list of loaders)."""

    def __init__(self, batches: list) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def lightning_calls(cfg, module, datamodule, batches: list) -> list[int]:
    """The Python calls of each step of a real ``trainer.fit`` over ``batches`` (float32, GPU branches; train.py's
    callbacks and logger, no progress bar, no validation): from one ``on_train_batch_start`` to the next, the first
    two steps and the last left out. ``cfg`` must name a work folder (:func:`compose`)."""
    import lightning as L
    from hydra.utils import instantiate

    counter, counts = CallCounter(), []
    before = sys.getprofile()

    class Window(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx == 0:
                sys.setprofile(counter)
            else:
                counts.append(counter.calls)
            counter.calls = 0

        def on_train_end(self, trainer, pl_module):
            sys.setprofile(before)

    trainer_args = dict(max_steps=len(batches), accelerator="cpu", enable_progress_bar=False, limit_val_batches=0,
                        num_sanity_val_steps=0, enable_model_summary=False)  # fmt: skip
    callbacks = [Window(), *(instantiate(c) for c in cfg.callbacks.values() if c)]
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=instantiate(cfg.logger), **trainer_args)
    datamodule.train_dataloader = lambda: Loader(batches)  # the same batches as the bare loop, made beforehand
    try:
        with gpu_branches():
            trainer.fit(module, datamodule=datamodule)
    finally:
        sys.setprofile(before)
        del datamodule.train_dataloader
    return counts[2:]


def python_calls(cache: str | Path, steps: int = 12, rows: int = 16, width: int = 24) -> dict[str, float]:
    """The median Python calls of a Transformer training step, bare and through Lightning, and their ratio."""
    with tempfile.TemporaryDirectory() as work:
        cfg = compose("transformer", cache, workdir=work)
        datamodule = prepared(cfg)
        shapes = same_shape_batches(datamodule, 2, rows, width)
        batches = [shapes[k % 2] for k in range(steps)]
        bare = statistics.median(bare_calls(module_of(cfg, datamodule), batches))
        fit = statistics.median(lightning_calls(cfg, module_of(cfg, datamodule), datamodule, batches))
    return {"bare": bare, "lightning": fit, "ratio": round(fit / bare, 3)}


def counted(models: list[str], cache: str | Path, rows: int = 16, width: int = 24) -> list[dict]:
    """A row per model and precision: the kernel ops (casts included), casts and view/metadata ops of one step, the
    three kernels dispatched most, and every op's count."""
    out = []
    for name in models:
        cfg = compose(name, cache)
        datamodule = prepared(cfg)
        warmup, batch = same_shape_batches(datamodule, 2, rows, width)  # as tests/test_step_budget.py counts
        for precision in PRECISIONS:
            ops = count_step(module_of(cfg, datamodule), batch, precision, warmup)
            kernels = Counter({op: n for op, n in ops.by_op.items() if ops.kinds[op] != "view"})
            top = ", ".join(f"{op.removeprefix('aten.')} {n}" for op, n in kernels.most_common(3))
            row = {"model": name, "precision": precision, "kernel_ops": ops.kernels, "casts": ops.casts}
            out.append(row | {"view_ops": ops.views, "top_kernels": top, "by_op": dict(ops.by_op.most_common())})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "models", "cache", "threads")
    p.add_argument("--rows", type=int, default=16, help="pairs a batch (default: %(default)s)")
    p.add_argument("--width", type=int, default=24, help="the batch's padded source and target length (default: "
                   "%(default)s)")  # fmt: skip
    p.add_argument("--steps", type=int, default=12, help="training steps of the Python-call count (default: "
                   "%(default)s)")  # fmt: skip
    options(p, "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cache = args.cache or tempfile.mkdtemp(prefix="nmt-step-ops-cache-")  # "": the corpus prepared afresh
    rows = counted(args.models, cache, args.rows, args.width)
    print(table(rows, ["model", "precision", "kernel_ops", "casts", "view_ops", "top_kernels"]))
    calls = python_calls(cache, args.steps, args.rows, args.width)
    print(f"\nPython calls a Transformer step: bare loop {calls['bare']:.0f}, Lightning {calls['lightning']:.0f}, "
          f"ratio {calls['ratio']}")  # fmt: skip
    batch = {"rows": args.rows, "source": args.width, "target": args.width, "pad_multiple": 8}
    write_json(args.json, {"batch": batch, "threads": args.threads, "ops": rows, "python_calls": calls})


if __name__ == "__main__":
    main()
