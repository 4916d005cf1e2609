"""Early stopping of a training run: stop once an evaluation metric has stopped improving (transformers'
`EarlyStoppingCallback` for the realm_hf training loop, `LoopArguments.early_stopping_metric`)."""

from __future__ import annotations

__all__ = ["EarlyStopping"]


class EarlyStopping:
    r"""
    Stop when an evaluation metric has stopped improving: after `patience` evaluations in a row that do not beat the
    best value by more than `threshold` (names ending in "loss" are minimized, others maximized, as transformers'
    `metric_for_best_model`). Its state goes into checkpoints, so a resumed run counts on.
    """

    def __init__(self, metric: str, patience: int, threshold: float = 0.0):
        self.metric, self.patience, self.threshold = metric, patience, threshold
        self.lower_is_better = metric.endswith("loss")
        self.best: float | None = None
        self.best_step: int | None = None
        self.evaluations_without_improvement = 0
        self.stopped_at: int | None = None

    def update(self, step: int, metrics: dict[str, float]) -> bool:
        """Record the evaluation of `step`; True when training should stop."""
        if self.metric not in metrics:
            raise ValueError(
                f"--early_stopping_metric {self.metric!r} is not among the evaluation's metrics "
                f"({', '.join(sorted(metrics)) or 'none: is an evaluation set given?'}); pass one of them."
            )
        value = float(metrics[self.metric])
        if self.best is None:
            improved = True
        else:
            improved = (self.best - value if self.lower_is_better else value - self.best) > self.threshold
        if improved:
            self.best, self.best_step, self.evaluations_without_improvement = value, step, 0
        else:
            self.evaluations_without_improvement += 1
        if self.evaluations_without_improvement >= self.patience:
            self.stopped_at = step
        return self.stopped_at is not None

    def state_dict(self) -> dict:
        return {"metric": self.metric, "best": self.best, "best_step": self.best_step,
                "evaluations_without_improvement": self.evaluations_without_improvement, "stopped_at": self.stopped_at}

    def load_state_dict(self, state: dict) -> None:
        if state.get("metric") == self.metric:
            self.best, self.best_step = state["best"], state["best_step"]
            self.evaluations_without_improvement = state["evaluations_without_improvement"]
