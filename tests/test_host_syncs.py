"""A training step that never waits on the host, checked on the CPU as a GPU run would take it: the ops that make a
CUDA stream wait for the host (a scalar read, a data-dependent shape, a copy to the host) are counted over a real
Lightning fit of each model, and only the logging steps may read anything."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import FAMILIES, ROOT, TINY_DATA, tiny_model_overrides

aten = torch.ops.aten
DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._local_scalar_dense.default}  # wait for data
MASKED = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
TO_HOST = {"cpu", "tolist", "numpy", "item"}  # Tensor methods that copy a device tensor to the host
# ops whose outputs at these positions are on the host on every device: a PackedSequence's batch sizes
ON_HOST = {aten._pack_padded_sequence.default: (1,), aten._pad_packed_sequence.default: (1,)}


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


class HostSyncs(TorchDispatchMode):
    """Counts the ops that would make a GPU stream wait for the host: scalar reads and data-dependent shapes of device
    tensors, boolean masks (an index by a mask needs its count of True). On a CPU every tensor is a host tensor, so
    the host side of a step is followed as the GPU would have it: tensors made without naming a device (or naming
    ``"cpu"``, :class:`HostCopies`), the batch sizes of a packed sequence, and what is computed from those alone."""

    def __init__(self):
        super().__init__()
        self.seen: Counter[str] = Counter()
        self.on = False
        self.host: set[int] = set()  # storages of host tensors

    def _on_host(self, t: torch.Tensor) -> bool:
        return t.untyped_storage().data_ptr() in self.host

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.on:
            return out
        inputs = _tensors((args, kwargs))
        if inputs and all(self._on_host(t) for t in inputs):
            self.host.update(t.untyped_storage().data_ptr() for t in _tensors(out))
            return out
        for i in ON_HOST.get(func, ()):
            self.host.add(out[i].untyped_storage().data_ptr())
        masked = func in MASKED and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else [])
        )
        if func in DATA_DEPENDENT or masked:
            self.seen[str(func)] += 1
        return out


class HostCopies(TorchFunctionMode):
    """Counts copies of device tensors to the host that say so (``.cpu()``, ``.tolist()``, ``.numpy()``,
    ``.item()``); marks as host tensors those made from no tensor without naming a device, or naming ``"cpu"`` (a
    model makes its tensors with ``device=`` another tensor's device)."""

    def __init__(self, syncs: HostSyncs):
        super().__init__()
        self.syncs = syncs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.syncs.on and name in TO_HOST and not self.syncs._on_host(args[0]):
            self.syncs.seen[f"Tensor.{name}"] += 1
        out = func(*args, **kwargs)
        made = isinstance(out, torch.Tensor) and not _tensors((args, kwargs))
        if self.syncs.on and made and kwargs.get("device") in (None, "cpu"):
            self.syncs.host.add(out.untyped_storage().data_ptr())
        return out


def compose(tmp_path, *overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    places = [f"callbacks.{c}.dirpath={tmp_path}/checkpoints" for c in ("checkpoint", "interrupted")]
    places += [f"callbacks.heatmaps.html={tmp_path}/alignments.html", f"logger.save_dir={tmp_path}"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=[*overrides, *places])


STEPS, EVERY = 20, 10


@pytest.mark.slow
@pytest.mark.parametrize("model", FAMILIES)
@pytest.mark.parametrize("guided", [False, True], ids=["plain", "guided"])
def test_a_training_step_reads_nothing_from_the_device_between_logging_steps(tmp_path, model, guided):
    """20 updates of a real fit (train.py's callbacks, logger and progress bar, the GPU preset's padded lengths): every
    step but the logging ones reads nothing back; a logging step reads once."""
    import lightning as L
    from hydra.utils import instantiate

    from nmt.training.console import ProgressBar
    from nmt.training.module import TranslationModule

    model_args = [f"model={model}", *tiny_model_overrides(f"model={model}")]
    align = ["loss.align_weight=0.1"] if guided else []
    trainer_args = [f"trainer.max_steps={STEPS}", f"trainer.log_every_n_steps={EVERY}", "trainer.accelerator=cpu",
                    "+trainer.limit_val_batches=0",
                    "trainer.num_sanity_val_steps=0", "data.pad_multiple=8", "data.num_workers=0",
                    f"data.cache_dir={tmp_path}/cache"]  # fmt: skip
    cfg = compose(tmp_path, *model_args, *TINY_DATA, *align, *trainer_args)
    datamodule = instantiate(cfg.data, links=guided)
    datamodule.prepare_data()
    datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    syncs = HostSyncs()
    per_step: list[Counter] = []
    saved: set[int] = set()  # steps that wrote a checkpoint: one read, whether its weights are finite

    class Window(L.Callback):  # counts from a batch's start to the next one's (Lightning logs after batch_end)
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if syncs.on:
                per_step.append(syncs.seen.copy())
            syncs.seen.clear()
            syncs.on = True
            # made on the host by the loader, the batch's tensors are on the GPU from here (moved: on a CPU, the same)
            syncs.host -= {t.untyped_storage().data_ptr() for t in _tensors(vars(batch))}
            syncs.host.add(batch.host.src.untyped_storage().data_ptr())  # the loader's lengths, on the host for good

        def on_train_end(self, trainer, pl_module):
            per_step.append(syncs.seen.copy())
            syncs.on = False

        def on_save_checkpoint(self, trainer, pl_module, checkpoint):
            saved.add(len(per_step))  # the step being counted writes a checkpoint

    callbacks = [Window(), *(instantiate(c) for c in cfg.callbacks.values() if c), ProgressBar()]  # as train.py
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=instantiate(cfg.logger))
    with HostCopies(syncs), syncs:
        trainer.fit(module, datamodule=datamodule)
    assert trainer.global_step == STEPS and len(per_step) == STEPS
    logging = {k for k in range(STEPS) if (k + 1) % EVERY == 0}
    between = {k: dict(c) for k, c in enumerate(per_step) if c and k not in logging | saved}
    assert between == {}, f"steps that read from the device between logging steps: {between}"
    assert all(sum(per_step[k].values()) <= 1 for k in logging - saved), [dict(per_step[k]) for k in logging]
    saved = {k for k in saved if k < STEPS}  # a save after the last update (at its validation's end) is no step's
    assert all(sum(per_step[k].values()) <= 1 + (k in logging) for k in saved), [per_step[k] for k in saved]


def tiny_batch():
    from nmt.data.collate import Batch, HostLengths

    t, lengths = torch.zeros(2, 3, dtype=torch.long), torch.tensor([3, 2])
    return Batch(t, lengths, t, t, torch.tensor([2, 1]), torch.arange(2), HostLengths(lengths.clone(), 3))


def test_a_batch_moves_to_the_device_without_blocking(monkeypatch):
    """Lightning's transfer goes through the data module's, which copies every tensor ``non_blocking`` and leaves the
    host lengths where they are."""
    from nmt.training.datamodule import TranslationDataModule

    seen = []
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        seen.append(kwargs.get("non_blocking", False))
        return real_to(self, *args, **kwargs)

    batch = tiny_batch()
    monkeypatch.setattr(torch.Tensor, "to", to)
    moved = TranslationDataModule.transfer_batch_to_device(SimpleNamespace(), batch, torch.device("cpu"), 0)
    assert len(seen) == 6 and all(seen)
    assert moved.host is batch.host


def test_the_token_meter_reads_the_clock_after_the_gpu_only_at_logging_steps(monkeypatch):
    """On a GPU the throughput meter waits for the device only where it logs; it counts every batch's tokens."""
    from lightning.pytorch.trainer.states import RunningStage

    from nmt.training.callbacks import TokenThroughput

    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: waits.append(1))
    meter = TokenThroughput(window_size=4)
    logs = SimpleNamespace(should_update_logs=False)
    trainer = SimpleNamespace(
        strategy=SimpleNamespace(root_device=torch.device("cuda")),
        state=SimpleNamespace(stage=RunningStage.TRAINING),
        _logger_connector=logs,
    )
    meter._throughputs[RunningStage.TRAINING] = SimpleNamespace(update=lambda **k: None)
    meter._t0s[RunningStage.TRAINING] = 0.0
    for k in (RunningStage.TRAINING,):
        meter._lengths[k] = meter._samples[k] = meter._batches[k] = 0
    batch = tiny_batch()
    for step in range(10):
        logs.should_update_logs = (step + 1) % 5 == 0
        meter._update(trainer, SimpleNamespace(), batch, step + 1)
    assert len(waits) == 2
    assert meter._lengths[RunningStage.TRAINING] == 30 and meter._samples[RunningStage.TRAINING] == 20
