"""#82 §1: every state a run saves resumes, for every validation schedule the configs allow (by updates, once an
epoch, every N epochs): killed (SIGKILL) after its first validation, resumed from that last.ckpt to its end; and from
its best checkpoint into a new folder. Early stopping stays on, as it is in the shipped configs; the every-N-epochs
run has the plateau schedule (it steps at every epoch's end, validated or not)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_hardening_train import killed_when

from conftest import ROOT, TRAIN_ENV, run_train

BATCHES = 15  # training batches an epoch of the tests' toy corpus (TINY_DATA): 600 pairs, 1,024 tokens a batch


def step(path: Path) -> int:
    return torch.load(path, weights_only=True)["global_step"]


# schedule: (its overrides, the overrides that end a run after n more validation periods, updates in one period)
SCHEDULES = {
    "by updates": (["trainer.val_check_interval=4", "trainer.check_val_every_n_epoch=null"],
                   lambda n: [f"trainer.max_steps={4 * n}"], 4),
    "once an epoch": (["trainer.val_check_interval=1.0", "trainer.check_val_every_n_epoch=1", "trainer.max_steps=-1"],
                      lambda n: [f"trainer.max_epochs={n}"], BATCHES),
    "every 2 epochs": (["trainer.val_check_interval=1.0", "trainer.check_val_every_n_epoch=2", "trainer.max_steps=-1",
                        "schedule=plateau"], lambda n: [f"trainer.max_epochs={n}"], BATCHES),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_state_a_run_saves_resumes(schedule, data_cache, tmp_path):
    given, until, period = SCHEDULES[schedule]
    first = period * (2 if schedule == "every 2 epochs" else 1)  # the update of the first validation
    run = tmp_path / "run"
    last = run / "checkpoints" / "last.ckpt"
    run_at = [*given, "callbacks.heatmaps.num_sentences=0", "run_test=false"]
    end = 3  # periods (updates or epochs) the run is given: it ends after its last validation where every 2 epochs
    killed = killed_when(run, data_cache, [*run_at, *until(end)], lambda s: s >= first, timeout=240)
    assert killed >= first and killed % period == 0, killed  # killed once a validation's state was saved
    run_train(run, data_cache, *run_at, *until(end), f"ckpt_path={last}")  # to its end
    assert step(last) == end * period
    scores = json.loads((run / "results.json").read_text())["valid"]
    assert scores and "bleu" in scores, scores
    # from its best checkpoint (saved at a validation's end), into a folder of its own
    best = max(run.glob("checkpoints/best-*.ckpt"), key=lambda p: p.stat().st_mtime)
    at = step(best) // period
    other = tmp_path / "other"
    run_train(other, data_cache, *run_at, *until(at + 1), f"ckpt_path={best}")
    assert step(other / "checkpoints" / "last.ckpt") == (at + 1) * period


@pytest.mark.slow
def test_a_state_saved_between_two_epochs_resumes_with_the_next_epoch(data_cache, tmp_path):
    """A run that ended at its epoch limit, given more epochs: it reads the batches an uninterrupted run reads."""
    given = [*SCHEDULES["once an epoch"][0], "callbacks.heatmaps.num_sentences=0", "run_test=false",
             "callbacks.early_stopping=null", "+callbacks.probe._target_=ddp_probe.Probe"]  # fmt: skip

    def batches(name: str, epochs: int, *more: str) -> list[dict]:
        probe = tmp_path / f"{name}.{epochs}.probe"  # the probe's callback comes from tests/
        run_train(tmp_path / name, data_cache, *given, f"+callbacks.probe.out={probe}", f"trainer.max_epochs={epochs}",
                  *more, env=dict(TRAIN_ENV, PYTHONPATH=str(ROOT / "tests")))  # fmt: skip
        lines = (probe / "batches.0.jsonl").read_text().splitlines() if probe.exists() else []
        return [json.loads(line) for line in lines]

    whole = batches("whole", 2)
    assert len(whole) == 2 * BATCHES
    batches("first", 1)
    last = tmp_path / "first" / "checkpoints" / "last.ckpt"
    assert step(last) == BATCHES
    resumed = batches("first", 2, f"ckpt_path={last}")
    assert resumed == whole[BATCHES:]
    assert step(last) == 2 * BATCHES
