"""The training loop's logging window: each step's loss and figures kept (as tensors, read only at the logging step)
and turned into one log record of their means."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict

import torch


def window_mean(values: list) -> float:
    """The mean of a logging window's values (floats, or 0-d tensors read now), summed in order as floats."""
    floats = [value.item() if isinstance(value, torch.Tensor) else value for value in values]
    return sum(floats) / len(floats)


@dataclasses.dataclass
class LoggingWindow:
    """The step figures since the last logging step: `running` averaged over the window (kept as tensors and read at
    the logging step: an `.item()` at every step would wait for the device before the next batch is prepared),
    `latest` the last value of each (index version, refresh timings)."""

    started: float
    steps_at_start: int
    running: dict[str, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    latest: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, loss: torch.Tensor, logs: dict) -> None:
        """One micro-batch's loss and figures."""
        self.running["loss"].append(loss.detach().float())
        for key, value in logs.items():
            self.running[key].append(value.detach() if isinstance(value, torch.Tensor) else float(value))

    def record(self, step: int, learning_rate: float) -> dict[str, float]:
        """The log record at `step` (means, latest values, learning rate, speed since the start); empties the window."""
        record = {key: window_mean(values) for key, values in self.running.items() if values}
        record.update(self.latest)
        self.latest.clear()
        record["learning_rate"] = learning_rate
        record["steps_per_second"] = (step - self.steps_at_start) / max(time.time() - self.started, 1e-9)
        self.running.clear()
        return record
