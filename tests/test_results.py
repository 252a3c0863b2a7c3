"""A run's results stay with the run: results.json in its directory and the same in its train.log."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt import checkpoint
from nmt.training.results import RunResults


@pytest.mark.parametrize("model", ["bahdanau", "transformer"])
def test_a_run_keeps_its_scores_and_best_checkpoint_in_its_directory_and_log(trained, model):
    run = trained[model]
    results = RunResults.read(run)
    assert results.run_dir == str(run) and results.model == model and results.step == 16
    scored = {"bleu", "chrf", "loss", "aer"}
    assert scored <= set(results.valid) and scored <= set(results.test)
    assert results.monitor == "val/bleu" and Path(results.best_checkpoint).is_file()
    assert results.tested_checkpoint == results.best_checkpoint and Path(results.last_checkpoint).is_file()
    best = checkpoint.Checkpoint.of(checkpoint.read(results.best_checkpoint), results.best_checkpoint)
    assert results.best_score == pytest.approx(best.best_score, abs=1e-4)
    assert results.alignment == best.alignment_record
    # the scores TensorBoard holds for the run
    events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    for split, scores in (("val", results.valid), ("test", results.test)):
        for name in ("bleu", "chrf", "aer"):
            assert scores[name] == pytest.approx(events.Scalars(f"{split}/{name}")[-1].value, abs=1e-3)
    # and the log says the same
    [line] = [line for line in (run / "train.log").read_text().splitlines() if "][train][INFO] - scores: " in line]
    for split, scores in (("valid", results.valid), ("test", results.test)):
        assert f"{split} bleu {scores['bleu']:g}, chrf {scores['chrf']:g}, aer {scores['aer']:g}" in line
    assert line.endswith(f"; all in {run / 'results.json'}")


def test_a_run_without_results_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"results.json: no results: the run did not finish"):
        RunResults.read(tmp_path)
    (tmp_path / "results.json").write_text('{"step": 3}')
    with pytest.raises(ValueError, match=r"results.json: not the results of a run"):
        RunResults.read(tmp_path)
