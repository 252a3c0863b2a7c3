"""schedule=budgeted: warm-up, then a straight decay that reaches its last rate when the run's budget (updates or
seconds) is spent, foreseen from the measured speed; the same rate on every process; resumed where it was."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.callbacks import Timer
from test_settings import composed

from conftest import run_train
from nmt.settings import check_config
from nmt.training.callbacks import Deadline
from nmt.training.schedules import Budgeted, StepBudget, TimeBudget, run_budgets


class FakeClock:
    """Seconds that advance by ``per_update`` at each update (set by the test)."""

    def __init__(self, per_update: float = 0.1):
        self.now, self.per_update = 0.0, per_update

    def __call__(self) -> float:
        return self.now


def schedule(budgets, warmup=10, final=0.0, every=5, **kw) -> Budgeted:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return Budgeted(opt, warmup, final, every, budgets, **kw)


def rates(scheduler: Budgeted, steps: int, clock: FakeClock | None = None) -> list[float]:
    """The rate of each update from the first: the optimiser steps, then the clock moves, then the scheduler."""
    seen = []
    for _ in range(steps):
        seen.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        if clock is not None:
            clock.now += clock.per_update
        scheduler.step()
    return seen


def test_warm_up_then_a_straight_line_to_the_last_rate_at_max_steps():
    lr = rates(schedule([StepBudget(100)], warmup=10, final=0.1), 101)
    assert lr[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert lr[10] == pytest.approx(1.0)
    assert lr[55] == pytest.approx(0.1 + 0.9 * 45 / 90)  # halfway down the line
    assert lr[100] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lr[10:], lr[11:], strict=False))


def test_a_time_budget_is_foreseen_from_the_speed_and_the_rate_stays_continuous_when_the_speed_changes():
    clock = FakeClock(per_update=0.1)
    budget = TimeBudget(clock, end=60.0)
    scheduler = schedule([budget], warmup=20, every=10)
    lr = rates(scheduler, 300, clock)  # 300 updates of 0.1 s: the first 30 s
    clock.per_update = 0.2  # the machine slows down: 150 more updates fill the last 30 s
    lr += rates(scheduler, 160, clock)
    end = next(s for s, v in enumerate(lr) if v == 0.0)
    assert 440 <= end <= 455  # spent at update 450, foreseen within one projection's window
    assert max(abs(a - b) for a, b in zip(lr[20:], lr[21:], strict=False)) < 0.01  # no jump where the end moved
    assert lr[299] == pytest.approx(1 - 280 / 580, abs=0.01)  # at 0.1 s an update the line aimed at update 600


def test_the_first_budget_to_end_wins_and_every_process_takes_the_first_ones_forecast():
    clock = FakeClock(per_update=1.0)
    lr = rates(schedule([StepBudget(1000), TimeBudget(clock, end=100.0)], warmup=10), 101, clock)
    assert lr[100] == pytest.approx(0.0) and lr[50] > 0  # time ends at update 100, long before the 1,000 updates
    agreed = rates(schedule([StepBudget(1000)], warmup=10, agree=lambda _: 60.0), 61)
    assert agreed[60] == pytest.approx(0.0)  # the first process's end, not this one's


def test_a_resumed_schedule_goes_on_from_the_same_rate():
    first = schedule([StepBudget(100)], warmup=10)
    before = rates(first, 40)
    state = first.state_dict()
    assert "budgets" not in state and "agree" not in state and "optimizer" not in state
    resumed = schedule([StepBudget(100)], warmup=10)
    resumed.load_state_dict(state)
    whole = rates(schedule([StepBudget(100)], warmup=10), 60)
    assert before + rates(resumed, 20) == pytest.approx(whole)


def test_the_budgets_of_a_run_are_its_max_steps_max_time_and_deadline():
    timer, deadline = Timer(duration="00:00:10:00"), Deadline(at=1e12)
    trainer = SimpleNamespace(estimated_stepping_batches=500, callbacks=[timer, deadline, object()])
    found = run_budgets(trainer)
    assert [type(b) for b in found] == [StepBudget, TimeBudget, TimeBudget]
    assert found[0].end_step(3) == 500 and found[1].end == 600 and found[2].end == 1e12
    assert run_budgets(SimpleNamespace(estimated_stepping_batches=math.inf, callbacks=[])) == []
    assert run_budgets(SimpleNamespace(estimated_stepping_batches=math.inf, callbacks=[Deadline()])) == []  # not set


def test_a_deadline_after_a_duration_counts_from_the_launch_of_the_process():
    """``callbacks.deadline.after``: from when the process started (a process 2 s old is seen 2 s old), not from
    when the deadline is made."""
    import subprocess
    import sys

    from nmt.training.stopping import launched

    age = "import time; time.sleep(2); from nmt.training.stopping import launched; print(time.time() - launched())"
    seen = float(subprocess.run([sys.executable, "-c", age], capture_output=True, text=True, check=True).stdout)
    assert 2 <= seen < 60, seen
    assert Deadline(after="00:00:15:00").at == pytest.approx(launched() + 900, abs=1)
    with pytest.raises(ValueError, match=r"^callbacks.deadline.after='15 min': must be DD:HH:MM:SS"):
        Deadline(after="15 min")


def test_a_budgeted_schedule_without_a_budget_is_refused_before_preparation():
    endless = ["schedule=budgeted", "trainer.max_epochs=-1"]
    with pytest.raises(ValueError) as e:
        check_config(composed(endless))
    assert str(e.value) == (
        "schedule.scheduler._target_=nmt.training.schedules.budgeted: anneals to the end of the run's budget, and "
        "this run has none: give one, e.g. trainer.max_time=00:00:15:00, trainer.max_steps=5000 or trainer.max_epochs=5"
    )
    for given in (["trainer.max_time=00:00:15:00"], ["trainer.max_steps=10"], ["trainer.max_epochs=5"],
                  ["callbacks.deadline.after=00:00:15:00"], ["+callbacks.deadline.at=1"]):  # fmt: skip
        check_config(composed([*endless, *given]))
    check_config(composed(["schedule=budgeted"]))  # the default run's 5 epochs


@pytest.mark.slow  # real train.py runs
def test_train_py_anneals_to_the_end_of_max_steps_and_of_max_time(data_cache, tmp_path):
    from test_train import events

    settings = ["schedule=budgeted", "schedule.scheduler.warmup_steps=4", "schedule.scheduler.every=4"]
    run_train(tmp_path / "steps", data_cache, *settings, "trainer.log_every_n_steps=1")
    lr = {e.step: e.value for e in events(tmp_path / "steps").Scalars("lr-Adam")}
    peak = max(lr.values())
    assert lr[3] == pytest.approx(peak) and lr[15] == pytest.approx(peak / 12, rel=1e-3)  # from update 4 down to 16
    timed = [*settings, "trainer.max_steps=-1", "trainer.max_epochs=-1", "trainer.max_time=00:00:00:25",
             "callbacks.early_stopping=null"]  # a budget of time only
    run_train(tmp_path / "time", data_cache, *timed, "trainer.log_every_n_steps=1")
    lr = {e.step: e.value for e in events(tmp_path / "time").Scalars("lr-Adam")}
    assert max(lr) > 40 and lr[max(lr)] < 0.2 * peak  # stopped by the time, on an almost annealed rate
    assert not math.isnan(lr[max(lr)])


def test_a_budget_that_ends_inside_the_warm_up_is_said_once_with_a_warm_up_that_anneals(caplog):
    """#82 §7: an update budget known at the start, a time budget once foreseen; said once, never where the budget
    outlasts the warm-up."""
    with caplog.at_level("WARNING", logger="nmt.training.schedules"):
        rates(schedule([StepBudget(40)], warmup=100), 40)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["schedule.scheduler.warmup_steps=100: the run's budget ends at about update 40, inside the "
                    "warm-up, so it stops at 41% of optim.lr, never annealed; a warm-up of a tenth of the run anneals "
                    "it: schedule.scheduler.warmup_steps=4"], said  # fmt: skip
    caplog.clear()
    clock = FakeClock(per_update=0.1)
    with caplog.at_level("WARNING", logger="nmt.training.schedules"):
        rates(schedule([TimeBudget(clock, end=6.0)], warmup=100, every=10), 60, clock)
    assert len(caplog.records) == 1 and "ends at about update 60, inside the warm-up" in caplog.records[0].getMessage()
    caplog.clear()
    clock = FakeClock(per_update=0.1)
    with caplog.at_level("WARNING", logger="nmt.training.schedules"):
        rates(schedule([StepBudget(200)], warmup=100), 200)
        rates(schedule([TimeBudget(clock, end=60.0)], warmup=100, every=10), 150, clock)  # 600 updates foreseen
    assert not caplog.records
