"""What a run of ours records of the settings it trained with, and what an experiment composes to today: a curve
(``curve.py``) and a budgeted run (``quality.py``) record :data:`CURVE`, a long run (``converged.py``)
:data:`LONG_RUN`; ``records.py`` holds each committed record against today's composition (tests/lab/test_curve.py)."""

from __future__ import annotations

from bench.common import ROOT

# what a curve's experiment is, read from the composed config of its run
CURVE = ("model", "optim", "schedule", "loss", "data.prepare.spm", "data.max_tokens", "trainer.precision",
         "trainer.gradient_clip_val", "callbacks.ema")  # fmt: skip
# what a long run's record keeps: the curves' keys, and the budget and the end
LONG_RUN = (*CURVE, "trainer.max_epochs", "trainer.max_time", "trainer.val_check_interval",
            "callbacks.early_stopping", "callbacks.snapshots", "average_best")  # fmt: skip


# keys that say when a check runs, not what trains: no part of a run's settings (added after records were made)
WHEN_ONLY = ("check_on_train_epoch_end",)


def read(cfg, keys: tuple[str, ...] = CURVE) -> dict:
    """The settings of ``keys`` in a composed config (interpolations as written; :data:`WHEN_ONLY` left out)."""
    from omegaconf import OmegaConf

    def kept(v):
        return {k: x for k, x in OmegaConf.to_container(v).items() if k not in WHEN_ONLY} if OmegaConf.is_dict(v) \
            else OmegaConf.to_container(v) if OmegaConf.is_config(v) else v  # fmt: skip

    return {key: kept(OmegaConf.select(cfg, key)) for key in keys}


def composed(overrides: list[str], keys: tuple[str, ...]) -> dict:
    """The settings of ``keys`` that conf/ composes to today with ``overrides``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return read(compose(config_name="config", overrides=overrides), keys)


def flat(settings: dict, prefix: str = "") -> dict:
    """Nested settings as dotted keys: ``{"model": {"encoder": {"layers": 3}}}`` gives ``model.encoder.layers``."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
