"""Early stopping of the training loop: a metric that stops improving ends training after `patience` evaluations."""

import pytest

from realm_hf.training import LoopArguments
from realm_hf.training.early_stopping import EarlyStopping


def test_a_loss_is_minimized_and_patience_counts_flat_evaluations():
    stopping = EarlyStopping("answerable_loss", patience=2, threshold=0.05)
    assert not stopping.update(100, {"answerable_loss": 3.0})
    assert not stopping.update(200, {"answerable_loss": 2.0})  # better by 1.0
    assert not stopping.update(300, {"answerable_loss": 1.97})  # better by 0.03 < threshold: flat
    assert stopping.update(400, {"answerable_loss": 2.5})  # worse: the second flat evaluation
    assert (stopping.best, stopping.best_step, stopping.stopped_at) == (2.0, 200, 400)


def test_other_metrics_are_maximized_and_an_improvement_resets_the_count():
    stopping = EarlyStopping("exact_match", patience=2)
    for step, value in ((1, 10.0), (2, 9.0), (3, 12.0), (4, 12.0)):
        assert not stopping.update(step, {"exact_match": value})
    assert stopping.update(5, {"exact_match": 11.0})
    assert stopping.best == 12.0 and stopping.best_step == 3


def test_the_state_survives_a_resume():
    stopping = EarlyStopping("answerable_loss", patience=3)
    stopping.update(10, {"answerable_loss": 1.0})
    stopping.update(20, {"answerable_loss": 1.5})
    resumed = EarlyStopping("answerable_loss", patience=3)
    resumed.load_state_dict(stopping.state_dict())
    assert resumed.state_dict() == stopping.state_dict()


def test_a_metric_the_evaluation_does_not_give_is_named_with_the_ones_it_does():
    with pytest.raises(ValueError, match=r"'answerable_los' is not among the evaluation's metrics \(exact_match"):
        EarlyStopping("answerable_los", patience=1).update(1, {"exact_match": 1.0, "recall@5": 2.0})


def test_early_stopping_needs_evaluations_during_training():
    with pytest.raises(ValueError, match="needs evaluations during training: set --eval_steps"):
        LoopArguments(output_dir="x", early_stopping_metric="answerable_loss")
    with pytest.raises(ValueError, match="--early_stopping_patience 0 cannot be right: it must be at least 1"):
        LoopArguments(output_dir="x", eval_steps=10, early_stopping_metric="answerable_loss", early_stopping_patience=0)
