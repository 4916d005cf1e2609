"""A paced index builder: a background build that runs only in the time slices the trainer lends it.

On shared CPU cores every second a background builder computes is taken from the trainer (two runs side by side on 2
cores: the trainer's step 2.2 -> 12.7 s with an all-cores builder, +27 % with a niced 1-thread one and no build
finished in 30 steps; benchmarks/results/refresh.md). A paced builder does not run beside the trainer: it is a
thread that waits while the trainer trains; between steps the trainer lends it `share` × the time it has just spent training,
and the builder runs alone on all the cores for that long, stopping at its next pause point (between embedding
batches). The builder's cost is `share` of the trainer's time whatever the cores, the corpus or the models (measured
with MiniLM on 2 cores: the trainer also loses 7-10 points while a paced build is in flight, so
0.1 -> +17 %, 0.15 -> +27 %; benchmarks/results/refresh-paced*.md); what it costs besides is staleness: a build takes
(its CPU time) / `share` of training time. The extra points vanish with OMP_WAIT_POLICY=PASSIVE: they are the
trainer's and this thread's OpenMP teams spin-waiting on each other (libgomp gives each calling thread its own team).

The embedding loop calls [`pause_point`] between batches; it is a no-op except in a thread attached to a
[`BuildPacer`].
"""

from __future__ import annotations

import threading
import time


_local = threading.local()


class BuildCancelled(Exception):
    """Raised at a pause point of a paced build whose pacer was cancelled (the trainer stopped the refresher)."""


def pause_point() -> None:
    """Between two units of a build's work: in a paced builder thread whose slice is spent, wait for the next one."""
    pacer = getattr(_local, "pacer", None)
    if pacer is not None:
        pacer._pause_point()


class BuildPacer:
    r"""
    Lend a builder thread a fixed share of the trainer's time.

    The builder thread calls [`BuildPacer.attach`] first (it then waits for its first slice) and [`BuildPacer.detach`]
    when done; the trainer calls [`BuildPacer.lend`] between steps. Time a slice overran (a pause point comes only
    between units of work) is owed and repaid by the next slices, so over a build the builder's time is `share` ×
    the trainer's time up to one unit of work.

    Args:
        share (`float`): Builder seconds per trainer second, in (0, 1] (0.1: the builder gets 10 % of the
            trainer's time).
    """

    def __init__(self, share: float) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"The builder's share of the trainer's time must be in (0, 1], got {share}.")
        self.share = share
        self.builder_seconds = 0.0  # time lent and used so far
        self._condition = threading.Condition()
        self._builder_runs = False  # the builder thread is inside a slice
        self._deadline = 0.0  # time.monotonic() at which the current slice ends
        self._attached = False
        self._cancelled = False
        self._credit = 0.0  # builder seconds earned and not used yet (negative: owed)
        self._trainer_since: float | None = None  # when the trainer last got the cores back

    # ----------------------------------------------------------------------------------- the builder thread
    def attach(self) -> None:
        """Make the calling thread the paced builder and wait for its first slice."""
        _local.pacer = self
        with self._condition:
            self._attached = True
            self._condition.notify_all()
            self._wait_for_slice()

    def detach(self) -> None:
        """The build is over (done or failed): hand the cores back to the trainer for good."""
        _local.pacer = None
        with self._condition:
            self._attached = False
            self._builder_runs = False
            self._condition.notify_all()

    def _pause_point(self) -> None:
        if time.monotonic() < self._deadline and not self._cancelled:
            return
        with self._condition:
            self._builder_runs = False
            self._condition.notify_all()
            self._wait_for_slice()

    def _wait_for_slice(self) -> None:  # holding the condition
        self._condition.wait_for(lambda: self._builder_runs or self._cancelled)
        if self._cancelled:
            raise BuildCancelled("The index build was cancelled")

    # ----------------------------------------------------------------------------------- the trainer
    def lend(self, worker: threading.Thread, unlimited: bool = False) -> float:
        r"""
        Let the builder run for its share of the trainer's time since the last call (nothing on the first call: the
        trainer's time is counted from it), or until it finishes with `unlimited=True`. Blocks meanwhile.

        Args:
            worker (`threading.Thread`): The builder thread (a slice ends early when it dies).
            unlimited (`bool`, defaults to `False`): Run the build to its end (e.g. at the end of training).

        Returns:
            `float`: The seconds the builder ran.
        """
        now = time.monotonic()
        if self._trainer_since is not None:
            self._credit += self.share * (now - self._trainer_since)
        if not unlimited and (self._trainer_since is None or self._credit <= 0):
            self._trainer_since = now
            return 0.0
        with self._condition:
            if not self._condition.wait_for(lambda: self._attached or not worker.is_alive(), timeout=60):
                raise RuntimeError("The paced index builder thread did not start within 60 s.")
            if not self._attached:  # the build is over
                self._trainer_since = now
                return 0.0
            self._deadline = float("inf") if unlimited else now + self._credit
            self._builder_runs = True
            self._condition.notify_all()
            while self._builder_runs and worker.is_alive():
                self._condition.wait(timeout=0.5)
        used = time.monotonic() - now
        self.builder_seconds += used
        self._credit = 0.0 if unlimited else self._credit - used
        self._trainer_since = time.monotonic()
        return used

    def cancel(self) -> None:
        """Stop the build at its next pause point (it raises [`BuildCancelled`] there)."""
        with self._condition:
            self._cancelled = True
            self._condition.notify_all()
