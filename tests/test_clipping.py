"""Gradient clipping with the fused optimiser in every precision a run takes: Lightning's mixed-precision plugin
refuses to clip for a fused optimiser (it has a loss scaler in mind), so the module clips itself where no scaler
is; the step the optimiser takes holds gradients of at most the clipping norm."""

from __future__ import annotations

import pytest
import torch
from test_host_syncs import compose

from conftest import TINY_DATA, tiny_model_overrides

CLIP = 1e-3  # far below the tiny model's gradient norm: every step clips


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_the_fused_optimiser_steps_on_clipped_gradients(tmp_path, precision):
    import lightning as L
    from hydra.utils import instantiate

    from nmt.training.module import TranslationModule

    overrides = ["model=transformer", *tiny_model_overrides("model=transformer"), *TINY_DATA,
                 "trainer.max_steps=3", "trainer.accelerator=cpu", f"trainer.precision={precision}",
                 f"trainer.gradient_clip_val={CLIP}", "trainer.enable_progress_bar=false",
                 "+trainer.limit_val_batches=0", "trainer.num_sanity_val_steps=0", "data.num_workers=0",
                 f"data.cache_dir={tmp_path}/cache"]  # fmt: skip
    cfg = compose(tmp_path, *overrides)
    datamodule = instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    norms, fused = [], []

    class Watch(L.Callback):
        def on_train_start(self, trainer, pl_module):
            optimizer = trainer.optimizers[0]
            fused.append(optimizer.defaults.get("fused"))

            def stepped(opt, args, kwargs):  # the closure (forward, backward, clipping) ran inside the step
                grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
                norms.append(float(torch.nn.utils.get_total_norm(grads)))

            optimizer.register_step_post_hook(stepped)

    trainer = instantiate(cfg.trainer, callbacks=[Watch()], logger=False, enable_checkpointing=False)
    trainer.fit(module, datamodule=datamodule)
    assert fused == [True]
    assert (module._cast is not None) == (precision == "bf16-mixed")  # bf16: the weights cast once a step
    assert len(norms) == 3 and all(0 < n <= CLIP * 1.001 for n in norms), norms
