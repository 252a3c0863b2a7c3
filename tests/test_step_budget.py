"""The host's cost of a GPU training step, guarded on a CPU: the ops one step dispatches (kernels and casts, GPU paths
forced), the Python calls Lightning adds to a bare loop, and whether a step can be replayed as a captured CUDA graph
(two batches of one shape dispatch the same ops). Counted by ``bench.speed.step_ops``, which prints the same figures
(``python -m bench.speed.step_ops``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from bench.speed import step_ops

# Ops of one training step (forward, backward, clipping, optimiser step), GPU paths forced, on real batches of 16 pairs
# padded to 24 (source and target), as step_ops counts them: kernel ops (casts included) and casts. Measured with
# `python -m bench.speed.step_ops` on 2026-12-02 at ddc28e2 (nmt/ as committed there), each
# budget the count + 5%, rounded up, so that a change adding ops fails here; lower them as the models get cheaper.
# Issue #79's target for the 6+6 Transformer under bf16 is 900 kernel ops (on CUDA, whose autocast casts more ops than
# the CPU's counted here). The RNN models' counts grow with the target length (their decoders loop over it).
BUDGETS = {  # (model, precision) -> (kernel ops, casts); the counts measured then in the comments
    ("transformer", "32-true"): (755, 1),  # 719, 1 (the source lengths, int64 to float32)
    ("transformer", "bf16-mixed"): (861, 107),  # 820, 101
    ("bahdanau", "32-true"): (3594, 0),  # 3,422, 0
    ("bahdanau", "bf16-mixed"): (3889, 294),  # 3,703, 280
    ("luong", "32-true"): (2816, 0),  # 2,681, 0
    ("luong", "bf16-mixed"): (2844, 28),  # 2,708, 26
}
# Python calls of a Lightning step (train.py's callbacks, no progress bar) over those of a bare loop doing the same
# step, both in this process: measured 1.45 (8,144 against 5,599) after clipping stopped walking every module (2.36
# before); issue #79's target is 1.2, the rest Lightning's own hooks (each wrapped in its profiler's context)
CALLS_RATIO = 1.5
ROWS, WIDTH = 16, 24


@pytest.fixture(scope="module")
def setup(data_cache) -> Callable[..., SimpleNamespace]:
    """``setup(model, *overrides)``: its config, prepared data module, three training batches of one shape and a
    fresh module (the same weights each time); the data prepared once for the module's tests."""
    made: dict[tuple, tuple] = {}

    def build(model: str, *overrides: str, workdir=None) -> SimpleNamespace:
        cfg = step_ops.compose(model, data_cache, *overrides, workdir=workdir)
        key = (model, *overrides)
        if key not in made:
            datamodule = step_ops.prepared(cfg)
            made[key] = (datamodule, step_ops.same_shape_batches(datamodule, 3, ROWS, WIDTH))
        datamodule, batches = made[key]
        return SimpleNamespace(cfg=cfg, datamodule=datamodule, batches=batches,
                               module=step_ops.module_of(cfg, datamodule))  # fmt: skip

    return build


def test_the_ops_are_told_apart_by_their_schema():
    """Views and metadata launch nothing; in-place and out-of-place arithmetic do; ``_to_copy`` is a cast."""
    aten = torch.ops.aten
    views = [aten.view.default, aten.t.default, aten.transpose.int, aten.expand.default, aten.split.Tensor,
             aten.view.dtype, aten.detach.default, aten._unsafe_view.default, aten.empty_like.default]  # fmt: skip
    kernels = [aten.mm.default, aten.add.Tensor, aten.mul_.Tensor, aten.copy_.default, aten.clone.default,
               aten._fused_adam_.default, aten._foreach_norm.Scalar, aten.native_dropout.default]  # fmt: skip
    assert {step_ops.kind(op) for op in views} == {"view"}
    assert {step_ops.kind(op) for op in kernels} == {"kernel"}
    assert step_ops.kind(aten._to_copy.default) == "cast"


@pytest.mark.parametrize("precision", step_ops.PRECISIONS)
@pytest.mark.parametrize("model", sorted({model for model, _ in BUDGETS}))  # each family with its budget
def test_a_training_step_dispatches_no_more_ops_than_its_budget(setup, model, precision):
    """Forward, backward, clipping and the optimiser's step: at most the budgeted kernel ops, and casts."""
    s = setup(model)
    ops = step_ops.count_step(s.module, s.batches[1], precision, warmup=s.batches[0])
    kernels, casts = BUDGETS[model, precision]
    over = [f"{ops.kernels} kernel ops a step, budget {kernels}"] if ops.kernels > kernels else []
    over += [f"{ops.casts} casts a step, budget {casts}"] if ops.casts > casts else []
    top = [(op, n) for op, n in ops.by_op.most_common() if ops.kinds[op] != "view"][:10]
    assert not over, f"{'; '.join(over)}; the kernels dispatched most: {top}"
    assert ops.kernels > kernels / 2, f"{ops.kernels} kernel ops against a budget of {kernels}: lower it"


def test_lightning_adds_few_python_calls_to_a_bare_step(setup, tmp_path):
    """A Transformer step through Lightning's Trainer (train.py's callbacks and logger) makes at most CALLS_RATIO times
    the Python calls of a bare loop doing the same step on the same batches."""
    s = setup("transformer", workdir=tmp_path)
    batches = [s.batches[k % 2] for k in range(8)]
    bare = step_ops.bare_calls(s.module, batches)
    fit = step_ops.lightning_calls(s.cfg, step_ops.module_of(s.cfg, s.datamodule), s.datamodule, batches)
    assert bare and fit, (bare, fit)
    ours, theirs = statistics.median(bare), statistics.median(fit)
    ratio = theirs / ours
    assert ratio <= CALLS_RATIO, (
        f"Lightning's step {theirs:,.0f} Python calls, the bare loop's {ours:,.0f}: {ratio:.2f}x"
    )


RECURRENT = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="the GRU encoder packs the batch by its lengths: the packed sequence's batch sizes, and with them the ops' "
    "shapes (and, on a CPU, their number), depend on the data (nmt.training.graphs.check_graphs refuses these models)",
)


@pytest.mark.parametrize("precision", step_ops.PRECISIONS)
@pytest.mark.parametrize("model", ["transformer", pytest.param("bahdanau", marks=RECURRENT),
                                   pytest.param("luong", marks=RECURRENT)])  # fmt: skip
def test_a_captured_step_replays_for_any_batch_of_its_shape(setup, model, precision):
    """With ``compile.graphs=true`` (the static-shape loss a CUDA graph captures, run eagerly on a CPU), two batches of
    the same shape and different contents dispatch the same ops with outputs of the same shapes and dtypes: the
    condition for replaying one captured graph for both."""
    s = setup(model, "compile.graphs=true")
    first = step_ops.count_step(s.module, s.batches[1], precision, warmup=s.batches[0]).sequence
    second = step_ops.count_step(s.module, s.batches[2], precision, warmup=s.batches[0]).sequence
    assert not torch.equal(s.batches[1].tgt_out, s.batches[2].tgt_out)
    differ = next((k for k, (a, b) in enumerate(zip(first, second)) if a != b), None)
    where = None if differ is None else (differ, first[differ], second[differ])
    assert differ is None and len(first) == len(second), f"first difference (op, first batch, second): {where}"
