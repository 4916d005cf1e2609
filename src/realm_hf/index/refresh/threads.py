"""The trainer's torch threads while a build runs in a process beside it: lowered to a partition of the cores when a
build starts, restored when the builder is idle."""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

__all__ = ["TrainerThreads"]


class TrainerThreads:
    r"""
    The trainer's share of the cores while the builder runs.

    Args:
        while_building (`int`, *optional*): `torch.set_num_threads` of the trainer while a build runs (None: left
            as it is).
    """

    def __init__(self, while_building: int | None) -> None:
        self.while_building = while_building
        self._before: int | None = None  # the trainer's torch threads, restored when idle

    def lower(self) -> None:
        """A build starts: take the trainer down to its share (once, whatever the builds that follow)."""
        if self.while_building is None or self._before is not None:
            return
        self._before = torch.get_num_threads()
        torch.set_num_threads(self.while_building)
        logger.info("Trainer torch threads %d -> %d while the index builds", self._before, self.while_building)

    def restore(self) -> None:
        """The builder is idle: give the trainer its threads back."""
        if self._before is not None:
            torch.set_num_threads(self._before)
            logger.info("Trainer torch threads back to %d", self._before)
            self._before = None
