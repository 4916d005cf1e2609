"""The checks of an [`IndexRefresher`]'s options, each refused in one line that names the value and what is allowed."""

from __future__ import annotations

import json
from typing import Any

from ..pacing import BuildPacer

__all__ = ["MODES", "ON_BUSY", "builder_defaults", "check_refresh_options"]

MODES = ("process", "thread")
"""Where a build runs: a `spawn`ed process, or a thread of the trainer."""
ON_BUSY = ("pending", "skip")
"""What a request does while a build runs: queue the newest, or be dropped."""
LOWEST_PRIORITY = 19
"""The `os.nice` increment of a builder process on the CPU: it runs on the CPU time the trainer leaves."""


def builder_defaults(mode: str, on_cpu: bool) -> dict[str, int | None]:
    r"""
    The builder's fixed resources per builder mode, those a trainer's command line does not set: `num_threads` (torch
    threads of the builder), `niceness` (`os.nice` increment of a builder process) and `trainer_threads` (torch threads
    of the trainer while a build runs; None: unchanged).

    One torch thread for every builder: a builder on a GPU only feeds it, and one on the CPU shares the trainer's
    cores (a paced or plain thread runs alone between steps or beside the trainer's threads; a process runs at the
    lowest priority on the CPU time the trainer leaves, benchmarks/results/refresh.md). Only a builder process has a
    priority of its own, and only on the CPU is it lowered.

    Args:
        mode (`str`): `"process"`, `"thread"` or `"paced"`.
        on_cpu (`bool`): Whether the builder embeds on the CPU.
    """
    return {
        "num_threads": 1,
        "niceness": LOWEST_PRIORITY if on_cpu and mode == "process" else 0,
        "trainer_threads": None,
    }


def check_refresh_options(
    *,
    mode: str,
    on_busy: str,
    keep_last: int,
    max_restarts: int,
    num_threads: int | None,
    trainer_threads: int | None,
    niceness: int,
    time_share: float | None,
    max_staleness: int | None,
    builder_kwargs: dict[str, Any],
) -> None:
    """Raise `ValueError` for the first option out of its range (see [`IndexRefresher`] for each)."""
    if max_staleness is not None and max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0 steps (or None: never wait), got {max_staleness}.")
    if mode not in MODES:
        raise ValueError(f"mode must be 'process' or 'thread', got {mode!r}.")
    if time_share is not None and mode != "thread":
        raise ValueError(f"time_share={time_share} paces a builder thread; it needs mode='thread', got mode={mode!r}.")
    if time_share is not None:
        BuildPacer(time_share)  # validates the share
    if on_busy not in ON_BUSY:
        raise ValueError(f"on_busy must be 'pending' or 'skip', got {on_busy!r}.")
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}.")
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be >= 0, got {max_restarts}.")
    for name, value in (("num_threads", num_threads), ("trainer_threads", trainer_threads)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1 (or None for torch's default), got {value}.")
    if not 0 <= niceness <= 19:
        raise ValueError(f"niceness must be in [0, 19] (an os.nice increment), got {niceness}.")
    try:
        json.dumps(builder_kwargs)
    except TypeError as err:
        raise ValueError(f"builder_kwargs must be JSON-able (paths, numbers, strings): {err}") from err
