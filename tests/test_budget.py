"""Training by time (seqlab.training.budget): durations, the rate's schedule over the run, a budgeted run that stops in
time, scores dev along the way, reaches its schedule's end, and continues its clock on --resume; the divergence
guard."""

from __future__ import annotations

import json
import math
import re

import pytest

from seqlab.config import TrainConfig, config_from_dict, parse_duration
from seqlab.errors import SeqlabError
from seqlab.training import learning_rate, train
from seqlab.training.budget import Plan, RunClock
from tests.conftest import tiny_config
from tests.test_cli import assert_user_error, run


@pytest.mark.parametrize(
    "text, seconds", [("90s", 90), ("45m", 2700), ("2.5h", 9000), ("120", 120), (" 3 m ", 180), (".5h", 1800), (7, 7.0)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5d", "-3m", "0s", "1e3", "31 days", "45 m s", "nan", "inf", "721h"])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_linear_and_cosine_schedules_with_warm_up():
    linear = TrainConfig(optimizer="adam", lr=0.01, lr_schedule="linear", lr_min=0.001, warmup_fraction=0.1)
    assert learning_rate(linear, 0, progress=0.05) == pytest.approx((0.001 + 0.009 * 0.95) * 0.5)
    assert learning_rate(linear, 0, progress=0.5) == pytest.approx(0.001 + 0.009 * 0.5)
    assert learning_rate(linear, 0, progress=1.0) == pytest.approx(0.001)
    assert learning_rate(linear, 0, progress=2.0) == pytest.approx(0.001)  # clamped
    cosine = TrainConfig(optimizer="adam", lr=0.01, lr_schedule="cosine")
    for p in (0.0, 0.2, 0.5, 0.9, 1.0):
        assert learning_rate(cosine, 3, progress=p) == pytest.approx(0.01 * 0.5 * (1 + math.cos(math.pi * p)))
    rates = [learning_rate(cosine, 0, progress=p / 50) for p in range(51)]
    assert rates == sorted(rates, reverse=True)


def test_a_schedule_key_of_another_schedule_is_refused():
    with pytest.raises(SeqlabError, match="train.lr_decay"):
        config_from_dict({"data": {"train": "x"}, "train": {"lr_schedule": "cosine", "lr_decay": 0.1}})
    with pytest.raises(SeqlabError, match="train.budget"):
        config_from_dict({"data": {"train": "x"}, "train": {"budget": "5 minutes"}})


def test_plan_without_a_budget_counts_steps():
    plan = Plan(None, 100, 20, 1.0, RunClock())
    assert plan.progress(25) == 0.25 and not plan.finished(99) and plan.finished(100)
    assert plan.eval_due(True, 0) and not plan.eval_due(False, 0)


def test_plan_with_a_budget_keeps_time_for_the_final_scoring():
    clock = RunClock(before=50.0)  # 50 s spent in an earlier session
    plan = Plan(100.0, 10**9, 10, 2.0, clock)
    assert plan.end() == pytest.approx(92.0)  # before any dev scoring: 8% kept back
    plan.scored(4.0)  # a dev scoring costs 4 s, the final one three of them
    assert plan.end() == pytest.approx(100 - (1.5 * 4 * 3 + 1))
    assert 0.6 < plan.progress(0) < 0.65  # 50 s of the 81 s of training
    assert not plan.finished(0)
    clock.before = 90.0
    assert plan.finished(0) and plan.progress(0) == 1.0
    clock.before = 85.0
    assert plan.eval_due(False, 0) is False  # 35 s since the last scoring, but 4 s / 0.1 = 40 s is the least gap
    clock.before = 91.0
    assert plan.eval_due(False, 0)


def test_the_final_scoring_is_planned_at_the_cost_of_a_scoring_without_memos():
    plan = Plan(1000.0, 10**9, 10, 2.0, RunClock())
    plan.scored(30.0)  # the first dev scoring runs a transformer over dev in full
    plan.scored(3.0)  # later ones read its states from the memo; the test scoring will not
    assert plan.end() == pytest.approx(1000 - (1.5 * (3 + 30 * 2) + 1))
    again = Plan(1000.0, 10**9, 10, 2.0, RunClock())
    again.remember(plan.measured())  # a resumed run plans with the same costs
    assert again.end() == pytest.approx(plan.end())
    again.remember({"step": 0.0, "dev": 3.0})  # a checkpoint from before dev_full: the latest scoring alone
    assert again.end() == pytest.approx(1000 - (1.5 * 3 * 3 + 1))


def test_the_end_keeps_time_for_the_writes_after_a_scoring_and_the_reload_of_the_best_model():
    # the end of a run: the last dev scoring, the best model and checkpoint written, the best model loaded again,
    # test scored; the reload is planned at what building the model cost at the start, the writes at their costliest
    plan = Plan(1000.0, 10**9, 10, 2.0, RunClock(), reload=12.0)
    plan.scored(4.0)
    plan.saved(2.0)  # a scoring that saved a better model as well as the checkpoint
    plan.saved(0.5)  # one that wrote the checkpoint alone
    assert plan.end() == pytest.approx(1000 - (1.5 * (4 + 2 + 4 * 2) + 12 + 1))
    resumed = Plan(1000.0, 10**9, 10, 2.0, RunClock(), reload=5.0)  # this session loaded the checkpoint in 5 s
    resumed.remember(plan.measured())
    assert resumed.end() == pytest.approx(1000 - (1.5 * (4 + 2 + 4 * 2) + 5 + 1))
    resumed.remember({"step": 0.0, "dev": 4.0, "dev_full": 4.0, "scorings": 1})  # a checkpoint from before saves
    assert resumed.end() == pytest.approx(1000 - (1.5 * 4 * 3 + 5 + 1))


def test_with_memos_the_first_scorings_cost_does_not_space_out_the_second():
    clock = RunClock()
    plan = Plan(1000.0, 10**9, 10, 2.0, clock, memos=True)
    plan.scored(50.0)  # the first scoring fills the memos: 50 s, the next will read them
    clock.before = 100.0  # a tenth of the budget later (50 s / 0.1 = 500 s without memos)
    assert plan.eval_due(False, 0)
    plan.scored(20.0)
    clock.before = 250.0  # 150 s later: past budget / evals, not past 20 s / 0.1
    assert not plan.eval_due(False, 0)  # from the second on, a scoring's cost spaces them out as before
    without = Plan(1000.0, 10**9, 10, 2.0, RunClock(before=0.0))
    without.scored(50.0)
    without.clock.before = 100.0
    assert not without.eval_due(False, 0)
    resumed = Plan(1000.0, 10**9, 10, 2.0, RunClock(), memos=True)
    resumed.remember({"step": 0.1, "dev": 50.0, "dev_full": 50.0})  # a checkpoint from before the count
    assert resumed.costs.scorings == 2  # planned as it was
    resumed.remember(plan.measured())
    assert resumed.costs.scorings == 2 and resumed.costs.dev == 20.0


def test_a_resumed_runs_first_scoring_refills_the_memos_without_raising_the_next_scorings_cost():
    plan = Plan(1000.0, 10**9, 10, 2.0, RunClock(), memos=True)
    plan.scored(50.0)  # fills the memos
    plan.scored(20.0)  # reads them
    resumed = Plan(1000.0, 10**9, 10, 2.0, RunClock(), memos=True)
    resumed.remember(plan.measured())
    resumed.scored(60.0)  # this session's memos start empty: a full scoring again
    assert resumed.costs.dev == 20.0 and resumed.costs.dev_full == 60.0  # the next reads them: 20 s
    assert resumed.end() == pytest.approx(1000 - (1.5 * (20 + 60 * 2) + 1))
    resumed.scored(25.0)
    assert resumed.costs.dev == 25.0 and resumed.costs.dev_full == 60.0
    without = Plan(1000.0, 10**9, 10, 2.0, RunClock())  # no memos: each scoring's cost is the next one's
    without.remember(plan.measured())
    without.scored(60.0)
    assert without.costs.dev == 60.0


PLANNED = r"the best model loaded in [\d.]+ s \(planned [\d.]+ s\), test scored in [\d.]+ s \(planned [\d.]+ s\)"


def _budgeted(path, budget: str, **train_over):
    raw = tiny_config(path).model_dump(mode="json")
    raw["train"].update(
        max_epochs=10_000,
        budget=budget,
        budget_evals=6,
        lr_schedule="linear",
        lr_decay=TrainConfig.model_fields["lr_decay"].default,
    )
    raw["train"].update(train_over)
    return config_from_dict(raw)


@pytest.fixture
def warm(tiny_corpus, tmp_path):
    """One epoch trained first, unbudgeted: a budget of seconds then buys epochs, not the first call's one-off costs
    (on a fresh checkout Numba compiles the CRF's recursions there, about 5 s; the run's clock counts them)."""
    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    raw["train"].update(max_epochs=1, device="cpu")
    train(config_from_dict(raw), tmp_path / "warm", progress=False)


def _log(folder):
    return [json.loads(x) for x in (folder / "log.jsonl").read_text().splitlines()]


def test_a_budgeted_run_stops_in_time_and_reaches_the_end_of_its_schedule(tiny_corpus, tmp_path, warm, caplog):
    # on the CPU: the epochs 6 s buy are the CPU's (a GPU spends the first seconds starting)
    with caplog.at_level("INFO", logger="seqlab"):
        result = train(_budgeted(tiny_corpus, "6s", device="cpu"), tmp_path / "run", progress=False)
    # the log sets the end's costs against the plan's, so that a run ending past its budget shows which one grew
    assert [r for r in caplog.records if re.fullmatch(PLANNED, r.getMessage())]
    log = _log(tmp_path / "run")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["budget_s"] == 6.0 and results["elapsed_s"] == result.elapsed_s
    assert result.elapsed_s < 6.0 * 5  # a generous bound: the run plans to end inside 6 s
    assert result.epochs_run >= 2 and len(log) >= 3  # dev scored several times, more than once an epoch apart
    elapsed = [r["elapsed"] for r in log]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= result.elapsed_s
    assert log[-1]["lr"] < 0.25 * 0.01  # the linear schedule ran down (to lr_min 0 at the planned end)
    assert [r["lr"] for r in log] == sorted(r["lr"] for r in log)[::-1]
    assert result.best_epoch in [r["epoch"] for r in log]
    assert (tmp_path / "run" / "curves.png").is_file() and result.test is not None


def test_training_goes_on_in_training_mode_after_a_dev_scoring_inside_an_epoch(tiny_corpus, tmp_path, monkeypatch):
    """A budgeted run scores dev inside epochs; each step after it trains with dropout on again (a network left in
    eval mode trains without dropout on a CPU, and cuDNN's LSTM refuses its backward on a GPU)."""
    import seqlab.training.loop as loop

    modes, step = [], loop.train_step

    def recording_step(trained, *args, **kwargs):
        modes.append(all(m.training for m in trained.modules()))
        return step(trained, *args, **kwargs)

    monkeypatch.setattr(loop, "train_step", recording_step)
    # dev after every step: 4 a 20-sentence epoch
    monkeypatch.setattr(Plan, "eval_due", lambda self, epoch_end, done_steps: True)
    train(_budgeted(tiny_corpus, "10m", max_epochs=2, batch_size=5), tmp_path / "run", progress=False)
    assert [r["epoch"] for r in _log(tmp_path / "run")] == [0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2]
    assert len(modes) == 8 and all(modes)


def test_where_max_epochs_ends_a_budgeted_run_first_dev_is_scored_over_the_steps_time():
    """A 1000 s budget that 100 one-second steps end at about 100 s: its 10 scorings are 10 s apart, not 100 s."""
    clock = RunClock()
    capped, open_ended = Plan(1000.0, 100, 10, 1.0, clock), Plan(1000.0, 10**9, 10, 1.0, clock)
    clock.before = 11.0
    assert not capped.eval_due(False, 0)  # no pace measured yet: the budget's 100 s apart
    for plan in (capped, open_ended):
        plan.costs.add_step(1.0)
    assert capped.steps_finish(10) == pytest.approx(101.0, abs=0.5)
    assert capped.eval_due(False, 10) and not open_ended.eval_due(False, 10)
    clock.before = 5.0
    assert not capped.eval_due(False, 10)  # 5 s since the start: under 10 s
    clock.before = 11.0
    capped.scored(2.0)  # a 2 s scoring: the gap grows to 20 s
    clock.before = 25.0
    assert not capped.eval_due(False, 10)
    clock.before = 32.0
    assert capped.eval_due(False, 10)


def test_a_budget_that_max_epochs_cuts_short_is_reported(tiny_corpus, tmp_path, caplog):
    """max_epochs still bounds a budgeted run; when it will end training well before the budget, the log says so
    once (after the first dev scoring), and the run ends at max_epochs."""
    plan = Plan(100.0, 10, 6, 1.0, RunClock())
    assert plan.steps_end_early(0) is None  # no step measured yet
    plan.costs.add_step(1.0)
    assert plan.steps_end_early(0) == pytest.approx(10.0, abs=0.5)  # 10 steps of 1 s, out of about 92 s
    plan.costs.step = 10.0
    assert plan.steps_end_early(0) is None  # 100 s: the steps fill the budget
    with caplog.at_level("WARNING", logger="seqlab"):
        result = train(_budgeted(tiny_corpus, "10m", max_epochs=2), tmp_path / "run", progress=False)
    assert result.epochs_run == 2
    said = [r.getMessage() for r in caplog.records if "train.max_epochs (2) ends training" in r.getMessage()]
    assert len(said) == 1 and "of the 600 s budget" in said[0]


def test_resume_continues_the_clock(tiny_corpus, tmp_path, warm):
    first = train(_budgeted(tiny_corpus, "3s"), tmp_path / "run", progress=False)
    n = len(_log(tmp_path / "run"))
    again = train(_budgeted(tiny_corpus, "3s"), tmp_path / "run", resume=True, progress=False)
    assert len(_log(tmp_path / "run")) == n  # the budget was spent: nothing more to train or score
    assert again.epochs_run == first.epochs_run
    longer = train(_budgeted(tiny_corpus, "6s"), tmp_path / "run", resume=True, progress=False)
    log = _log(tmp_path / "run")
    assert len(log) > n and longer.epochs_run > first.epochs_run
    assert log[n]["elapsed"] > log[n - 1]["elapsed"]  # the second session starts where the first stopped
    assert longer.elapsed_s < 6.0 * 5  # a generous bound: the machine may be busy


def test_the_log_records_each_dev_scorings_measured_time_in_a_resumed_run_with_memos(
    tiny_corpus, tmp_path, warm, monkeypatch
):
    """After a resume with memos, the plan keeps the refill's cost apart from the next scoring's; the log still
    records what each scoring took, not what the plan counts."""
    measured = []
    scored, init = Plan.scored, Plan.__init__

    def recording(self, seconds):
        measured.append(seconds)
        scored(self, seconds)

    def with_memos(self, *args, **kwargs):  # the tiny tagger keeps no memo; the plan is told it does
        init(self, *args, **kwargs)
        self.memos = True

    monkeypatch.setattr(Plan, "scored", recording)
    monkeypatch.setattr(Plan, "__init__", with_memos)
    train(_budgeted(tiny_corpus, "3s"), tmp_path / "run", progress=False)
    n = len(measured)
    train(_budgeted(tiny_corpus, "6s"), tmp_path / "run", resume=True, progress=False)
    assert len(measured) > n  # the resumed session scored dev too, its first scoring a refill
    assert [row["dev_seconds"] for row in _log(tmp_path / "run")] == [round(s, 3) for s in measured]


def test_a_run_its_budget_ended_trains_no_more_when_resumed_with_that_budget(tiny_corpus, tmp_path, warm, monkeypatch):
    """The clock ended the run; resumed with the same budget, it goes to the final scoring even where the costs
    measured since would leave room for more steps (its last dev scoring was faster than those before)."""

    def steps():
        return json.loads((tmp_path / "run" / "results.json").read_text())["steps"]

    train(_budgeted(tiny_corpus, "3s"), tmp_path / "run", progress=False)
    n, done = len(_log(tmp_path / "run")), steps()
    monkeypatch.setattr(Plan, "finished", lambda self, done: done >= self.total_steps)  # room left, it says
    train(_budgeted(tiny_corpus, "3s"), tmp_path / "run", resume=True, progress=False)
    assert steps() == done and len(_log(tmp_path / "run")) == n


def test_budget_on_the_command_line(tiny_corpus, tmp_path):
    cfg = tmp_path / "c.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(_budgeted(tiny_corpus, "30s").model_dump(mode="json")))
    assert_user_error(run("train", cfg, "--out", tmp_path / "r", "--budget", "5 minutes"), "--budget", "not a duration")
    proc = run("train", cfg, "--out", tmp_path / "r", "--budget", "4s")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r" / "results.json").read_text())["budget_s"] == 4.0


@pytest.mark.parametrize("poison", ["loss", "weights"])
def test_a_diverging_run_stops_and_keeps_the_last_good_model(tiny_corpus, tmp_path, monkeypatch, poison):
    """A non-finite loss (at the step) or weight (at the next dev scoring) ends the run with one line naming the
    epoch; the model and checkpoint written before stay as they were, and so does the log."""
    import torch

    import seqlab.training.loop as training

    config = _short_run(tiny_corpus, 2)
    train(config, tmp_path / "run", progress=False)
    saved = {p.name: p.read_bytes() for p in (tmp_path / "run" / "model").iterdir()}
    ckpt = (tmp_path / "run" / "checkpoint" / "trainer.json").read_bytes()
    real = training.train_step

    def diverging(net, batch, *args, **kwargs):
        losses = real(net, batch, *args, **kwargs)
        with torch.no_grad():
            next(p for p in net.parameters() if p.requires_grad).fill_(float("nan"))
        return losses * float("nan") if poison == "loss" else losses

    monkeypatch.setattr(training, "train_step", diverging)
    where = "epoch 3, step 1" if poison == "loss" else "epoch 3"
    with pytest.raises(SeqlabError, match=f"training diverged: .* at {where}"):
        train(_short_run(tiny_corpus, 6), tmp_path / "run", resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "run" / "model").iterdir()} == saved
    assert (tmp_path / "run" / "checkpoint" / "trainer.json").read_bytes() == ckpt
    assert len(_log(tmp_path / "run")) == 2


def _short_run(path, epochs):
    raw = tiny_config(path).model_dump(mode="json")
    raw["train"].update(max_epochs=epochs)
    return config_from_dict(raw)


def test_a_budgeted_run_on_two_processes(tiny_corpus, tmp_path):
    """Data-parallel ranks follow rank 0's clock: every rank stops at the same step, and the run ends in time."""
    raw = _budgeted(tiny_corpus, "8s").model_dump(mode="json")
    raw["train"].update(optimizer="sgd", lr=0.05, threads=1, device="cpu")
    result = train(config_from_dict(raw), tmp_path / "ddp", progress=False, nproc=2)
    log = _log(tmp_path / "ddp")
    assert len(log) >= 2 and result.test is not None and result.elapsed_s < 8.0 * 3
