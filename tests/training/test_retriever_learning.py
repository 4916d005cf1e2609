"""The user sees whether the retriever learns: a status in each log line, a warning at the start and at the end of a run
whose retriever is held frozen, and a `retriever_learning` record in `trainer_state.json` that a resumed run counts on.
"""

import json
import logging
import os

import pytest
import torch

pytest.importorskip("spacy")
pytest.importorskip("faiss")

from test_pretrainer import make_trainer  # noqa: E402

from realm_hf.training.retriever_learning import (  # noqa: E402
    RetrieverLearningTracker,
    RetrieverStartSchedule,
    retrieval_diversity,
)

LOGGERS = ("realm_hf.training.pretrain", "realm_hf.training.loop")


def _train(trainer, caplog) -> list[logging.LogRecord]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGERS[0]), caplog.at_level(logging.INFO, logger=LOGGERS[1]):
        trainer.train()
    return list(caplog.records)


def _record(path) -> dict:
    with open(path / "trainer_state.json", encoding="utf-8") as f:
        return json.load(f)["retriever_learning"]


def _warnings(records) -> list[str]:
    return [r.getMessage() for r in records if r.levelno >= logging.WARNING and "retriever" in r.getMessage().lower()]


def test_a_gate_that_never_opens_is_announced_shown_at_each_log_line_and_summed_up_as_a_warning(tmp_path, caplog):
    trainer = make_trainer(tmp_path, max_steps=4, refresh="0", save_steps=4, retriever_gate_utility=10.0,
                           retriever_gate_window=2)
    records = _train(trainer, caplog)
    start, end = _warnings(records)
    assert "frozen until the gate opens" in start and "--retriever_gate_utility" in start
    assert end.startswith("The retriever never learned in 4 steps: the gate (retriever_gate_utility=10.0) never opened")
    assert "highest utility" in end and "--retriever_gate_utility" in end and "masked-LM signal" in end
    log_lines = [r.getMessage() for r in records if r.getMessage().startswith("step ")]
    assert log_lines and all("| retriever: frozen (gate: utility " in line and "< 10)" in line for line in log_lines)
    expected = {"steps_learning": 0, "steps_total": 4, "gate_opened_at_step": None,
                "reason_frozen": "retriever_gate_utility"}
    for path in (tmp_path, tmp_path / "checkpoint-4"):  # the run's state, and its last checkpoint's
        record = _record(path)
        assert {k: record[k] for k in expected} == expected
        assert abs(record["highest_gate_utility"]) < 100


def test_without_a_gate_the_retriever_learns_at_every_step(tmp_path, caplog):
    trainer = make_trainer(tmp_path, max_steps=3, refresh="0", logging_steps=1)
    records = _train(trainer, caplog)
    assert _warnings(records) == []
    assert "The retriever learned in 3 of 3 steps." in caplog.text
    log_lines = [r.getMessage() for r in records if r.getMessage().startswith("step ")]
    assert len(log_lines) == 3 and all(line.endswith("| retriever: learning") for line in log_lines)
    assert _record(tmp_path) == {"steps_learning": 3, "steps_total": 3, "gate_opened_at_step": None,
                                 "reason_frozen": None, "highest_gate_utility": None,
                                 "retrieval_diversity_start": None, "retrieval_diversity_end": None,
                                 "retrieval_collapsed_at_step": None}
    # each step logs its retrieval diversity: distinct blocks among the batch's retrieved ones
    history = json.loads((tmp_path / "history.json").read_text())
    diversity = [r["retrieved_distinct"] for r in history if "retrieved_distinct" in r]
    assert len(diversity) == 3 and all(0 < d <= 1 for d in diversity)


def test_warm_up_steps_are_counted_and_a_resumed_run_counts_on(tmp_path, caplog):
    trainer = make_trainer(tmp_path, max_steps=4, refresh="0", save_steps=2, logging_steps=1, reading_warmup_steps=1)
    records = _train(trainer, caplog)
    assert _warnings(records) == []
    assert "The retriever is frozen until step 1 (reading_warmup_steps=1)." in caplog.text
    statuses = [r.getMessage().split(" | ")[-1] for r in records if r.getMessage().startswith("step ")]
    assert statuses == ["retriever: frozen (reading_warmup_steps: until step 1)"] + ["retriever: learning"] * 3
    assert [r["retriever_learning"] for r in trainer.history if "retriever_learning" in r] == [0.0, 1.0, 1.0, 1.0]
    assert "The retriever learned in 3 of 4 steps; frozen until step 1 by reading_warmup_steps." in caplog.text
    expected = {"steps_learning": 3, "steps_total": 4, "gate_opened_at_step": None,
                "reason_frozen": "reading_warmup_steps", "highest_gate_utility": None,
                "retrieval_diversity_start": None, "retrieval_diversity_end": None, "retrieval_collapsed_at_step": None}
    assert _record(tmp_path) == expected
    assert _record(tmp_path / "checkpoint-2") == dict(expected, steps_learning=1, steps_total=2)

    # resumed at step 2: the counts go on from the checkpoint's (1 of 2), not from 0
    resumed = make_trainer(tmp_path, max_steps=4, refresh="0", save_steps=0, reading_warmup_steps=1,
                           resume=str(tmp_path / "checkpoint-2"))
    _train(resumed, caplog)
    assert _record(tmp_path) == expected
    assert "The retriever learned in 3 of 4 steps" in caplog.text


@pytest.mark.parametrize(
    ("settings", "start", "end"),
    [
        ({"retriever_learning_rate": 0.0}, "frozen for the whole run: retriever_learning_rate=0 "
         "(--retriever_learning_rate)", "set --retriever_learning_rate above 0"),
    ],
)
def test_a_retriever_frozen_for_the_whole_run_is_announced_and_summed_up(tmp_path, caplog, settings, start, end):
    trainer = make_trainer(tmp_path, max_steps=2, refresh="1", **settings)
    first, last = _warnings(_train(trainer, caplog))
    assert start in first
    assert last.startswith("The retriever never learned in 2 steps") and end in last
    assert _record(tmp_path)["steps_learning"] == 0
    # a retriever that never learns never starts: no backward pass through it, no index refresh
    assert trainer.retriever_start_step is None and not any(trainer.retriever_learns(step) for step in range(2))
    assert trainer.refresher.stats == []


def test_a_retriever_that_learned_in_a_small_fraction_of_the_steps_is_a_warning():
    tracker = RetrieverLearningTracker(RetrieverStartSchedule(gate_utility=0.2, gate_window=2))
    for step in range(1, 21):
        if step == 19:
            tracker.observe_gate(0.25, 2)
            tracker.gate_opened(19)
        tracker.record_step(step, learning=step > 19)
    level, message = tracker.summary()
    assert level == logging.WARNING
    assert message.startswith("The retriever learned in only 1 of 20 steps (5%): the gate (retriever_gate_utility=0.2) "
                              "opened after step 19.")
    assert "--retriever_gate_utility" in message
    assert tracker.state_dict()["gate_opened_at_step"] == 19 and tracker.state_dict()["highest_gate_utility"] == 0.25


def test_a_reading_warm_up_alone_is_told_as_such_not_warned_about():
    """A run that is only a reading warm-up freezes the retriever by design: INFO at start and end, no warning; a
    retriever_learning_rate of 0 is still a warning."""
    tracker = RetrieverLearningTracker(RetrieverStartSchedule(reading_warmup_steps=10))
    assert tracker.start_message(0, 10) == (logging.INFO, tracker.start_message(0, 10)[1])
    assert "reading warm-up only" in tracker.start_message(0, 10)[1]
    for step in range(1, 11):
        tracker.record_step(step, learning=False)
    level, message = tracker.summary()
    assert level == logging.INFO and "reading warm-up only" in message
    frozen = RetrieverLearningTracker(RetrieverStartSchedule(frozen_by="retriever_learning_rate=0"))
    assert frozen.start_message(0, 10)[0] == logging.WARNING
    for step in range(1, 11):
        frozen.record_step(step, learning=False)
    assert frozen.summary()[0] == logging.WARNING


def _learn(tracker, diversities, start_step=1):
    lines = []
    for step, diversity in enumerate(diversities, start=start_step):
        tracker.record_step(step, learning=True)
        lines.append(tracker.observe_retrieval(step, diversity))
    return [line for line in lines if line]


def test_a_collapsing_retrieval_is_warned_about_once_and_summed_up_as_a_warning():
    """The hard task's collapsed seed: the queries of a batch end up retrieving the same few blocks."""
    tracker = RetrieverLearningTracker()
    warnings = _learn(tracker, [0.9] * 30 + [0.6] * 10 + [0.1] * 40)
    assert len(warnings) == 1 and warnings[0].startswith("The retrieval collapsed after step ")
    assert "--retriever_learning_rate" in warnings[0]
    assert tracker.diversity_start == pytest.approx(0.9) and tracker.diversity_end == pytest.approx(0.1)
    level, message = tracker.summary()
    assert level == logging.WARNING
    assert message.startswith("The retriever learned in 80 of 80 steps. The retrieval collapsed after step ")
    assert "(and it still is)" in message
    state = tracker.state_dict()
    again = RetrieverLearningTracker()
    again.load_state_dict(state)
    assert again.summary() == (level, message)


def test_a_retrieval_collapsed_from_its_first_learning_steps_is_warned_about():
    """No fall to measure: the first window is already collapsed (a cold or broken query tower)."""
    tracker = RetrieverLearningTracker()
    warnings = _learn(tracker, [0.05] * 40)
    assert len(warnings) == 1 and "after step 20" in warnings[0]
    assert "from the first 20 steps the retriever learned in" in warnings[0]
    assert tracker.summary()[0] == logging.WARNING


@pytest.mark.parametrize("diversities", [
    [0.9] * 80,                 # diverse throughout
    [0.9] * 20 + [0.6] * 60,    # fell, but stays above COLLAPSE_DIVERSITY
])
def test_a_steady_or_merely_narrower_retrieval_is_not_called_collapsed(diversities):
    tracker = RetrieverLearningTracker()
    assert _learn(tracker, diversities) == []
    assert tracker.summary() == (logging.INFO, "The retriever learned in 80 of 80 steps.")


def test_retrieval_diversity_counts_only_while_the_retriever_learns():
    tracker = RetrieverLearningTracker(RetrieverStartSchedule(reading_warmup_steps=50))
    for step in range(1, 51):
        tracker.record_step(step, learning=False)
        assert tracker.observe_retrieval(step, 0.01) is None
    assert tracker.diversity_start is None


def test_retrieval_diversity_is_a_fraction_of_what_the_corpus_allows():
    every_query_the_same = torch.tensor([[1, 2, 3]] * 8)  # [B=8, K-1=3]
    assert retrieval_diversity(every_query_the_same, num_blocks=10_000) == pytest.approx(3 / 24)
    # a corpus of 3 blocks cannot give more than 3 distinct ones: retrieving all of them is as diverse as it gets
    assert retrieval_diversity(every_query_the_same, num_blocks=3) == 1.0
    all_different = torch.arange(24).reshape(8, 3)
    assert retrieval_diversity(all_different, num_blocks=10_000) == 1.0


def _recorded(name: str) -> list[float]:
    """A recorded run's retrieval diversity per step (each logged window's mean for its 10 steps)."""
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "retrieval_diversity_seed1.json")
    with open(path, encoding="utf-8") as f:
        logged = json.load(f)[name]
    return [logged[step] for step in sorted(logged, key=int) for _ in range(10)]


def test_the_recorded_collapse_of_the_hard_tasks_seed_is_warned_about_as_it_happens():
    """Seed 1 of the hard knowledge task at learning rate 1e-3: the right document first for 50 % of the held-out
    sentences at step 20, for none from step 60 on; its batches' diversity fell from 0.99 to 0.25-0.45."""
    tracker = RetrieverLearningTracker()
    warnings = _learn(tracker, _recorded("collapsed"))
    assert len(warnings) == 1
    assert 60 <= tracker.collapsed_at_step <= 100, tracker.collapsed_at_step
    assert tracker.summary()[0] == logging.WARNING and "(and it still is)" in tracker.summary()[1]


def test_the_recorded_run_that_dipped_and_recovered_is_not_called_collapsed():
    tracker = RetrieverLearningTracker()
    assert _learn(tracker, _recorded("recovered")) == []
    assert tracker.summary()[0] == logging.INFO


def test_the_retriever_start_schedule_says_at_each_step_whether_the_retriever_learns_and_what_holds_it():
    """One schedule: the reading warm-up, then the gate (its window counted after the warm-up), or never."""
    plain = RetrieverStartSchedule()
    assert plain.start_step == 0 and plain.learns(0) and plain.holding_knob(0) is None and not plain.gate_waiting

    warm_up = RetrieverStartSchedule(reading_warmup_steps=3)
    assert [warm_up.learns(t) for t in range(5)] == [False, False, False, True, True]
    assert [warm_up.holding_knob(t) for t in (0, 2, 3)] == ["reading_warmup_steps", "reading_warmup_steps", None]

    gated = RetrieverStartSchedule(reading_warmup_steps=2, gate_utility=0.2, gate_window=2)
    assert gated.start_step is None and gated.gate_waiting
    assert gated.observe_utility(2, 5.0) is None  # a warm-up step: not the gate's
    assert gated.observe_utility(3, 0.1) == pytest.approx(0.1) and gated.start_step is None  # a window of 1 of 2
    assert gated.holding_knob(3) == "retriever_gate_utility"
    assert gated.observe_utility(4, 0.4) == pytest.approx(0.25)  # the full window reaches 0.2: it opens
    assert gated.start_step == 4 and not gated.learns(3) and gated.learns(4) and not gated.gate_waiting
    assert gated.observe_utility(5, -1.0) is None  # an open gate stays open

    resumed = RetrieverStartSchedule(reading_warmup_steps=2, gate_utility=0.2, gate_window=2)
    resumed.load_state_dict(gated.state_dict())
    assert (resumed.start_step, resumed.utility_window) == (4, [0.1, 0.4])

    never = RetrieverStartSchedule(reading_warmup_steps=2, gate_utility=0.2, frozen_by="retriever_learning_rate=0")
    assert never.start_step is None and not never.gate_waiting and not any(never.learns(t) for t in range(10))
    assert never.holding_knob(0) == never.holding_knob(9) == "retriever_learning_rate"
    never.load_state_dict({"retriever_start_step": 3})
    assert never.start_step is None
