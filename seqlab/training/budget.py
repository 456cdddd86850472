"""Training by time: a run planned on the clock of the machine it runs on.

A budget (``train.budget: 45m``, ``seqlab train --budget 45m``) is the wall-clock time of the whole run: training,
the dev scoring that picks the best model, and the final test scoring. :class:`RunClock` counts the seconds a run
has spent, those of earlier sessions included (a resumed run carries them in its checkpoint), and
:class:`Plan` answers, after each optimiser step, three questions:

- how far the run is (``progress``, 0 to 1), which drives the learning-rate schedule (warm-up and decay are
  fractions of the run);
- whether dev is to be scored now (``budget_evals`` times over the run, which ends at the budget or sooner where
  max_epochs ends it first; never more than about a tenth of the time);
- whether to stop training now, so that the last dev scoring, its writes, the reload of the best model and the
  test scoring still end inside the budget.

Without a budget the run is planned in optimiser steps: ``max_epochs`` epochs, dev scored at each epoch's end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


class RunClock:
    """Wall-clock seconds a run has spent: ``before`` (earlier sessions, from the checkpoint) plus this one's."""

    def __init__(self, before: float = 0.0):
        self.before = before
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return self.before + time.perf_counter() - self.started


@dataclass
class Costs:
    """What the plan has measured so far, in seconds."""

    step: float = 0.0  # a training step (a running mean)
    dev: float | None = None  # one dev scoring (the latest)
    steps_seen: int = 0
    # the costliest dev scoring: the first one, where features that keep a memo (a transformer's states) ran in
    # full, as they will on the test set
    dev_full: float | None = None
    scorings: int = 0  # dev scorings so far
    save: float = 0.0  # the costliest writes after a dev scoring: the best model and the checkpoint

    def add_step(self, seconds: float) -> None:
        self.steps_seen += 1
        self.step += (seconds - self.step) / min(self.steps_seen, 50)  # mean of the first 50, then a moving one


class Plan:
    """When to score dev and when to stop; how far the run is.

    ``budget``: seconds, or None to plan in steps (``total_steps``: max_epochs x steps per epoch).
    ``final_ratio``: the test scoring's cost in dev scorings (test's tokens over dev's).
    ``memos``: whether features keep their states across dev scorings, so that the first scoring (which fills
    them) costs more than the next; its cost then does not space the second one out. A resumed run's first scoring
    fills them again (they are not in the checkpoint): it counts as a full scoring, not as the next one's cost.
    ``reload``: seconds to load the best model for the final scoring, measured as this session's own building or
    loading of the model (building reads the same features and more, so it bounds a load from above).
    """

    #: Before the first dev scoring, the share of the budget kept for scoring.
    FIRST_RESERVE = 0.08
    #: Dev scoring takes at most about this share of the time between two scorings.
    MAX_EVAL_SHARE = 0.1

    def __init__(
        self,
        budget: float | None,
        total_steps: int,
        evals: int,
        final_ratio: float,
        clock: RunClock,
        memos: bool = False,
        reload: float = 0.0,
    ):
        self.budget = budget
        self.memos = memos
        self.reload = reload
        self.total_steps = max(total_steps, 1)
        self.evals = evals
        self.final_ratio = final_ratio
        self.clock = clock
        self.costs = Costs()
        self.refilling = False  # a resumed run's memos start empty: its first scoring fills them again
        self.last_eval = clock.elapsed()

    def reserve(self) -> float:
        """Seconds kept at the end: one more dev scoring and its writes, the reload and the test scoring, with a
        margin."""
        if self.costs.dev is None:
            return self.FIRST_RESERVE * self.budget
        scorings = self.costs.dev + self.costs.save + self.test_scoring()
        return 1.5 * scorings + self.reload + 2.0 * self.costs.step + 1.0  # the reload is a bound already

    def test_scoring(self) -> float:
        """The test scoring's planned seconds: the costliest dev scoring (features with a memo ran in full there,
        as they will on test) times test's tokens over dev's; 0 before dev is scored."""
        full = self.costs.dev_full or self.costs.dev or 0.0  # dev_full None: a checkpoint from before it
        return full * self.final_ratio

    def end(self) -> float:
        """The clock time at which training ends."""
        return max(self.budget - self.reserve(), 1e-9)

    def progress(self, done_steps: int) -> float:
        """0 at the start, 1 at the end: the larger of the steps' share of ``total_steps`` and, with a budget,
        the clock's share of the training time."""
        by_steps = done_steps / self.total_steps
        if self.budget is None:
            return min(by_steps, 1.0)
        return min(max(by_steps, self.clock.elapsed() / self.end()), 1.0)

    def finished(self, done_steps: int) -> bool:
        """Whether the next step would run past the end of training."""
        if done_steps >= self.total_steps:
            return True
        if self.budget is None:
            return False
        return self.clock.elapsed() + self.costs.step >= self.end()

    #: Below this share of the budget, a run that ``max_epochs`` ends is reported (:meth:`steps_end_early`).
    EARLY_SHARE = 0.7

    def steps_finish(self, done_steps: int) -> float | None:
        """With a budget: the clock time at which, at the pace measured so far, ``total_steps`` (max_epochs) will
        end training; None without a budget or before a step is measured."""
        if self.budget is None or not self.costs.steps_seen:
            return None
        return self.clock.elapsed() + max(self.total_steps - done_steps, 0) * self.costs.step

    def steps_end_early(self, done_steps: int) -> float | None:
        """:meth:`steps_finish`, where that comes before ``EARLY_SHARE`` of the training time; else None."""
        finish = self.steps_finish(done_steps)
        return finish if finish is not None and finish < self.EARLY_SHARE * self.end() else None

    def eval_due(self, epoch_end: bool, done_steps: int) -> bool:
        """Dev scoring now? Without a budget at each epoch's end; with one, ``evals`` times over the run: every
        ``budget / evals`` seconds, or a share of the time max_epochs leaves where that ends training first (at
        the pace measured so far), and not more often than ``MAX_EVAL_SHARE`` allows once a scoring's cost is
        known (with ``memos``, once a scoring has read them)."""
        if self.budget is None:
            return epoch_end
        finish = self.steps_finish(done_steps)
        interval = (self.budget if finish is None else min(self.budget, finish)) / self.evals
        if self.costs.dev is not None and not (self.memos and self.costs.scorings < 2):
            interval = max(interval, self.costs.dev / self.MAX_EVAL_SHARE)
        return self.clock.elapsed() - self.last_eval >= interval

    def scored(self, seconds: float) -> None:
        if not self.refilling:  # a refill's cost is a full one: the checkpoint's latest stays the next one's
            self.costs.dev = seconds
        self.refilling = False
        self.costs.dev_full = max(seconds, self.costs.dev_full or 0.0)
        self.costs.scorings += 1
        self.last_eval = self.clock.elapsed()

    def saved(self, seconds: float) -> None:
        """What the writes after a dev scoring cost (the costliest are kept: those that save a better model too)."""
        self.costs.save = max(seconds, self.costs.save)

    def measured(self) -> dict:
        """The costs measured so far, for the checkpoint: a resumed run plans with them from its first step."""
        return {
            "step": self.costs.step,
            "dev": self.costs.dev,
            "dev_full": self.costs.dev_full,
            "scorings": self.costs.scorings,
            "save": self.costs.save,
        }

    def remember(self, measured: dict | None) -> None:
        """Take the costs of :meth:`measured` back (nothing for checkpoints without them)."""
        if measured:
            self.costs = Costs(
                step=float(measured["step"]),
                dev=measured["dev"],
                steps_seen=1 if measured["step"] else 0,
                dev_full=measured.get("dev_full"),  # None in checkpoints older than it
                scorings=measured.get("scorings", 2 if measured["dev"] is not None else 0),  # older: as before it
                save=measured.get("save", 0.0),
            )
            self.refilling = self.memos and self.costs.dev is not None  # the memos are not in the checkpoint
