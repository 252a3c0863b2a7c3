"""#82 §8: a time budget trains for its time (no epoch limit of the configs ends it first), and the summary says what
ended the run (nmt.training.stopping); a vocabulary smaller than asked is logged."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from lightning.pytorch.callbacks import EarlyStopping
from omegaconf import OmegaConf

from nmt.training.stopping import follow_time_budget, stop_reason


def test_a_time_budget_on_the_command_line_lifts_the_configs_epoch_limit():
    trainer = OmegaConf.create({"max_time": "00:00:05:00", "max_epochs": 5})
    follow_time_budget(trainer, ["data=tsv", "trainer.max_time=00:00:05:00"])
    assert trainer.max_epochs == -1
    kept = OmegaConf.create({"max_time": "00:00:05:00", "max_epochs": 5})
    follow_time_budget(kept, ["trainer.max_time=00:00:05:00", "trainer.max_epochs=3"])  # given: kept
    assert kept.max_epochs == 5
    untouched = OmegaConf.create({"max_time": None, "max_epochs": 5})
    follow_time_budget(untouched, ["trainer.max_steps=100"])
    assert untouched.max_epochs == 5


def fake(**given) -> SimpleNamespace:
    return SimpleNamespace(**{"interrupted": False, "callbacks": [], "global_step": 24, "current_epoch": 5,
                              "max_steps": -1, "max_epochs": 5, **given})  # fmt: skip


def test_the_summary_names_what_ended_the_run():
    assert stop_reason(fake()) == "trainer.max_epochs=5 reached after 24 updates, 5 epoch(s)"
    assert stop_reason(fake(max_steps=24, max_epochs=-1, current_epoch=2)).startswith("trainer.max_steps=24 reached")
    early = EarlyStopping(monitor="val/bleu", mode="max", patience=3)
    early.wait_count = 3
    assert stop_reason(fake(callbacks=[early], current_epoch=2)).startswith(
        "early stopping (val/bleu did not improve for 3 validations)")
    assert stop_reason(fake(interrupted=True)).startswith("interrupted after 24 updates")


def test_a_vocabulary_smaller_than_asked_is_logged(caplog):
    from nmt.data.tokenizer import train_model

    with caplog.at_level(logging.INFO, logger="nmt.data.tokenizer"):
        train_model(["le chat dort", "le chien mange"] * 20, "bpe", 500, 1.0, 1)
    assert any("not the 500 of data.prepare.spm.vocab_size" in r.getMessage() for r in caplog.records)
