"""Learning-rate schedules that torch does not have under a name (``conf/schedule/``), and the run budgets that
``schedule=budgeted`` anneals towards."""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Protocol

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from nmt.bounds import BIG, BIG0, Range

log = logging.getLogger(__name__)


def inverse_sqrt(optimizer: Optimizer, warmup_steps: Annotated[int, BIG0]) -> LambdaLR:
    """Linear warm-up over ``warmup_steps`` updates, then decay with the inverse square root of the step."""
    warmup = max(1, warmup_steps)
    return LambdaLR(optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1))))


class Budget(Protocol):
    """What ends a run: it projects, at an update, the update at which the run will stop."""

    def end_step(self, step: int) -> float:
        """The update at which this budget will be spent, as foreseen at ``step`` (``inf``: not yet known)."""
        ...


class StepBudget:
    """A number of updates (``trainer.max_steps``)."""

    def __init__(self, steps: int):
        self.steps = steps

    def end_step(self, step: int) -> float:
        return float(self.steps)


class TimeBudget:
    """A number of seconds on a clock (``trainer.max_time``, a deadline): the update it ends at is foreseen from the
    seconds left and the seconds per update over the last ``window`` projections (start-up, before the first, is not
    in them; a validation among them is spread over their updates, as it is over the run's)."""

    def __init__(self, clock: Callable[[], float], end: float, window: int = 8):
        self.clock, self.end = clock, end  # the budget is spent when clock() reaches end
        self.seen: deque[tuple[int, float]] = deque(maxlen=window + 1)  # (update, clock) at the last projections

    def end_step(self, step: int) -> float:
        now = self.clock()
        if self.seen and step <= self.seen[-1][0]:  # resumed, or asked twice
            self.seen.clear()
        self.seen.append((step, now))
        if len(self.seen) < 2:
            return math.inf
        (first_step, first_time) = self.seen[0]
        per_update = (now - first_time) / (step - first_step)
        return step + max(0.0, self.end - now) / max(per_update, 1e-9)


class Budgeted(LRScheduler):
    """Linear warm-up over ``warmup_steps`` updates to the optimiser's rate, then a linear decay that reaches
    ``final`` times that rate when the run's budget is spent: the first of its time and update budgets to end,
    foreseen again every ``every`` updates (the rate stays continuous where the foreseen end moves). A run stopped
    by its budget ends on an annealed model, whatever the budget and the machine's speed.

    ``agree`` makes every process take the first one's foreseen end (a distributed run's broadcast), so that all
    of them keep one rate: the schedule is a function of the update between two projections."""

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_steps: Annotated[int, BIG0],
        final: Annotated[float, Range(0, 1)],
        every: Annotated[int, BIG],
        budgets: Sequence[Budget],
        agree: Callable[[Any], Any] = lambda x: x,
    ):
        self.warmup, self.final, self.every = max(1, warmup_steps), final, max(1, every)
        self.budgets, self.agree = list(budgets), agree
        self.anchor: tuple[int, float] = (0, 1.0)  # (update, factor) where the current straight line starts
        self.end = math.inf  # the update at which the factor reaches final
        self.short = False  # whether the budget was found to end inside the warm-up (said once)
        self._inside_warmup(min((b.steps for b in self.budgets if isinstance(b, StepBudget)), default=math.inf))
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        """The multiple of the optimiser's rate at update ``step``, foreseeing the end again where it is due."""
        if step > 0 and (step % self.every == 0 or step == self.warmup):
            here = self._line(step)
            ends = [b.end_step(step) for b in self.budgets]  # called on every process, in the same order
            end = float(self.agree(min(ends, default=math.inf)))
            if step >= self.warmup and end != self.end:
                self.anchor, self.end = (step, here), max(end, float(step))
            elif step < self.warmup:
                self._inside_warmup(end)
        return self._line(step)

    def _inside_warmup(self, end: float) -> None:
        """Say once that the budget ends at update ``end``, inside the warm-up: the run stops un-annealed."""
        if end < self.warmup and not self.short:
            self.short = True
            log.warning(
                "schedule.scheduler.warmup_steps=%d: the run's budget ends at about update %d, inside the warm-up, so "
                "it stops at %d%% of optim.lr, never annealed; a warm-up of a tenth of the run anneals it: "
                "schedule.scheduler.warmup_steps=%d", self.warmup, round(end), 100 * (round(end) + 1) / self.warmup,
                max(1, round(end) // 10),
            )  # fmt: skip

    def _line(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        start, top = self.anchor if self.anchor[0] >= self.warmup else (self.warmup, 1.0)
        if math.isinf(self.end) or self.end <= start:
            return top if math.isinf(self.end) else self.final
        left = max(0.0, self.end - step) / (self.end - start)
        return self.final + (top - self.final) * left

    def get_lr(self) -> list[float]:
        f = self.factor(self.last_epoch)
        return [base * f for base in self.base_lrs]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "budgets", "agree")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)  # a resumed run's budgets measure afresh; the line goes on from here


budgeted = Budgeted  # the name conf/schedule/budgeted.yaml gives it, beside inverse_sqrt


def run_budgets(trainer: Any) -> list[Budget]:
    """The budgets that stop ``trainer``'s fit: its updates (``max_steps``, or ``max_epochs`` of its batches:
    Lightning's ``estimated_stepping_batches``), ``max_time`` (Lightning's ``Timer``, on the training clock), and
    each callback with a ``budget()`` (:class:`~nmt.training.callbacks.Deadline`, a benchmark's clock)."""
    from lightning.pytorch.callbacks import Timer

    steps = trainer.estimated_stepping_batches  # inf: max_epochs=-1 and no max_steps
    found: list[Budget] = [StepBudget(int(steps))] if math.isfinite(steps) else []
    for callback in trainer.callbacks:
        if isinstance(callback, Timer) and callback._duration is not None:
            found.append(TimeBudget(callback.time_elapsed, callback._duration))
        elif callable(getattr(callback, "budget", None)) and (budget := callback.budget()) is not None:
            found.append(budget)  # (None: a deadline not set)
    return found
