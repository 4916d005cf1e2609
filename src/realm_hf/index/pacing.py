"""A paced index builder: a background build that runs only in the time slices the trainer lends it, on its thread.

On shared CPU cores every second a background builder computes is taken from the trainer, and one held back (fewer
threads, lower priority) still slows it and finishes late (benchmarks/results/refresh.md). A paced builder does not
run beside the trainer: between steps the trainer lends it `share` × the time it has just spent training, and the
builder runs alone on all the cores for that long, stopping at its next pause point (between embedding batches,
between faiss add chunks). Its cost is `share` of the trainer's time whatever the cores, the corpus or the models;
what it costs besides is staleness: a build takes (its CPU time) / `share` of training time.

The build runs as a greenlet (a coroutine with a stack of its own) on the trainer's thread, not as a thread. libgomp
gives every thread that runs parallel torch ops an OpenMP team of its own, and once there are more OpenMP threads
than cores, every team's workers sleep after a short spin instead of a long one, so each of the trainer's many small
ops pays a wake-up. A builder *thread* that merely exists therefore slows the trainer beyond its share, and
`OMP_WAIT_POLICY=PASSIVE` trades that for slower steps everywhere (benchmarks/results/refresh-paced*.md). On one
thread there is one team.

The embedding loop and the faiss add loop call [`pause_point`] between units of work; it is a no-op except inside a
paced build. A pause point must not be inside a `torch.autocast` block (the trainer would run in it, and autocast's
weight cache outlives its nesting); grad mode is saved and restored on both sides of every switch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import greenlet
import torch


class BuildCancelled(Exception):
    """Raised at a pause point of a paced build whose pacer was cancelled (the trainer stopped the refresher)."""


class _BuildGreenlet(greenlet.greenlet):
    """The paced build's coroutine; `pacer` marks it for [`pause_point`]."""

    def __init__(self, run: Callable[[], None], pacer: BuildPacer) -> None:
        super().__init__(run)
        self.pacer = pacer


_CANCELLED_THREADS: dict[int, threading.Event] = {}
"""The cancel flags of builds running on threads of their own (`"thread"` mode without pacing), by thread id."""


def cancellable_thread(target: Callable[[], None], name: str) -> tuple[threading.Thread, threading.Event]:
    r"""
    A daemon thread running `target` that stops at its next [`pause_point`] (raising [`BuildCancelled`] there) once
    the returned event is set. A thread cannot be killed, and one left inside CUDA work when the interpreter exits
    aborts the process ("terminate called without an active exception"): stop it with the event, then join it.
    """
    cancelled = threading.Event()

    def run() -> None:
        _CANCELLED_THREADS[threading.get_ident()] = cancelled
        try:
            target()
        finally:
            _CANCELLED_THREADS.pop(threading.get_ident(), None)

    return threading.Thread(target=run, name=name, daemon=True), cancelled


def in_paced_build() -> bool:
    """Whether the caller runs inside a paced build (on the trainer's thread, between its steps)."""
    return getattr(greenlet.getcurrent(), "pacer", None) is not None


def pause_point() -> None:
    """Between two units of a build's work: in a paced build whose slice is spent, hand the thread back to the
    trainer until its next slice; in a build thread that was cancelled, raise [`BuildCancelled`]."""
    pacer = getattr(greenlet.getcurrent(), "pacer", None)
    if pacer is not None:
        pacer._pause_point()
        return
    cancelled = _CANCELLED_THREADS.get(threading.get_ident()) if _CANCELLED_THREADS else None
    if cancelled is not None and cancelled.is_set():
        raise BuildCancelled("The index build was cancelled")


def _autocast_enabled() -> bool:
    return any(torch.is_autocast_enabled(device) for device in ("cpu", "cuda"))


class BuildPacer:
    r"""
    Run a build on the trainer's thread for a fixed share of the trainer's time.

    [`BuildPacer.start`] hands it the build (nothing runs yet); the trainer calls [`BuildPacer.lend`] between steps,
    and the build runs inside that call until its slice is spent and it reaches a pause point. Time a slice overran (a
    pause point comes only between units of work) is owed and repaid by the next slices, so over a build the
    builder's time is `share` × the trainer's time up to one unit of work. `lend`, `cancel` and `join` must be called
    from the thread that called `start`.

    Args:
        share (`float`): Builder seconds per trainer second, in (0, 1] (0.1: the builder gets 10 % of the
            trainer's time).
    """

    def __init__(self, share: float) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"The builder's share of the trainer's time must be in (0, 1], got {share}.")
        self.share = share
        self.builder_seconds = 0.0  # time lent and used so far
        self._build: _BuildGreenlet | None = None
        self._deadline = 0.0  # time.monotonic() at which the current slice ends
        self._cancelled = False
        self._credit = 0.0  # builder seconds earned and not used yet (negative: owed)
        self._trainer_since: float | None = None  # when the trainer last got the thread back

    def start(self, build: Callable[[], None]) -> None:
        """Make `build` (a function of no arguments that handles its own errors) the paced build; it first runs in
        the next slice [`BuildPacer.lend`] gives."""
        if self._build is not None:
            raise RuntimeError("This pacer already has a build; use one BuildPacer per build.")
        self._build = _BuildGreenlet(build, self)

    def is_alive(self) -> bool:
        """Whether the build has work left (started or not)."""
        return self._build is not None and not self._build.dead

    # ----------------------------------------------------------------------------------- inside the build
    def _pause_point(self) -> None:
        if time.monotonic() < self._deadline and not self._cancelled:
            return
        if _autocast_enabled():
            raise RuntimeError(
                "pause_point() was called inside a torch.autocast block; the trainer would run in it. Call it between "
                "the blocks (see realm_hf.index.embedding)."
            )
        grad_enabled = torch.is_grad_enabled()
        self._build.parent.switch()  # back to the trainer, inside lend()
        torch.set_grad_enabled(grad_enabled)
        if self._cancelled:
            raise BuildCancelled("The index build was cancelled")

    def _run(self) -> None:
        """Switch to the build until its next pause point past the deadline, or its end."""
        grad_enabled = torch.is_grad_enabled()
        self._build.switch()
        torch.set_grad_enabled(grad_enabled)

    # ----------------------------------------------------------------------------------- the trainer
    def lend(self, unlimited: bool = False) -> float:
        r"""
        Let the build run for its share of the trainer's time since the last call (nothing on the first call: the
        trainer's time is counted from it), or until it finishes with `unlimited=True`. Blocks meanwhile.

        Args:
            unlimited (`bool`, defaults to `False`): Run the build to its end (e.g. at the end of training).

        Returns:
            `float`: The seconds the build ran.
        """
        now = time.monotonic()
        if self._trainer_since is not None:
            self._credit += self.share * (now - self._trainer_since)
        if not self.is_alive() or (not unlimited and (self._trainer_since is None or self._credit <= 0)):
            self._trainer_since = now
            return 0.0
        self._deadline = float("inf") if unlimited else now + self._credit
        self._run()
        used = time.monotonic() - now
        self.builder_seconds += used
        self._credit = 0.0 if unlimited else self._credit - used
        self._trainer_since = time.monotonic()
        return used

    def join(self) -> None:
        """Run the build to its end now (it is the trainer's turn to wait)."""
        while self.is_alive():
            self.lend(unlimited=True)

    def cancel(self) -> None:
        """Stop the build: a started one raises [`BuildCancelled`] at its next pause point (which its function
        handles), one not started yet never runs."""
        self._cancelled = True
        if self._build is None or self._build.dead:
            return
        if not self._build:  # not started: kill it without running any of it
            self._build.throw(greenlet.GreenletExit)
            return
        self._run()
