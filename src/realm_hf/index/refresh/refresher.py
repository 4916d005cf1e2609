"""The trainer's side of the asynchronous index refresh: [`IndexRefresher`], the state machine over the builds
(running, pending, finished but not swapped in, recorded in a checkpoint) and its swaps between steps.

The pieces it drives live beside it: one build's record, files and worker (`builds`), the index versions on disk
(`versions`), the trainer's threads while a build runs (`threads`) and the checks of its options (`options`); the
builder's side is `index.refresh_job`, the pacing `index.pacing`, when to refresh `index.refresh_schedule`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..mips import RealmIndex
from ..refresh_job import LATEST_NAME, builder_path
from ..refresh_schedule import RefreshSchedule
from .builds import Build, discard_files, save_snapshot, snapshot_file, start_worker, stop_worker, take_snapshot
from .options import check_refresh_options
from .threads import TrainerThreads
from .versions import clean_up, read_latest

logger = logging.getLogger(__name__)

__all__ = ["IndexRefresher"]


class IndexRefresher:
    r"""
    Rebuild the index in the background from snapshots of the document tower and swap it in between steps.

    Args:
        root (`str` or `os.PathLike`): Directory for snapshots and the `index-<step>` directories.
        builder (`Callable` or `str`): A module-level function `builder(state_dict, step=..., **builder_kwargs)
            -> RealmIndex` (or its `"module:function"` path). It rebuilds the document tower from the state dict,
            embeds the corpus and returns the index (e.g. with [`RealmIndex.build`]).
        builder_kwargs (`dict`, *optional*): JSON-able keyword arguments for the builder (paths, index type...).
        mode (`str`, defaults to `"process"`): `"process"` runs each build in a `spawn`ed daemon process (a crash,
            even a hard one, cannot take the trainer down; the builder cannot start child processes itself),
            `"thread"` in a thread of the trainer process (shares its memory; no snapshot file).
        schedule ([`RefreshSchedule`], `str` or `int`, *optional*): Used by [`IndexRefresher.on_step`].
        on_busy (`str`, defaults to `"pending"`): When a build is running, `"pending"` keeps the newest request and
            starts it when the running build ends; `"skip"` drops the request.
        index ([`RealmIndex`], *optional*): The index in use now (its `step` is the baseline for swaps).
        keep_last (`int`, defaults to 2): `index-<step>` directories kept on disk (the one in use is always kept).
        load_kwargs (`dict`, *optional*): Passed to [`RealmIndex.from_pretrained`] on swap (e.g. `device`).
        num_threads (`int`, *optional*): `torch.set_num_threads` in the builder process, to leave the trainer cores.
        niceness (`int`, defaults to 0): `os.nice` increment of the builder process (`"process"` mode): with 19 the
            builder runs on the CPU time the trainer leaves (the default of the pre-trainer on CPU, see
            `training.index_builder.refresh_resources`).
        trainer_threads (`int`, *optional*): `torch.set_num_threads` of the trainer process while a build runs
            (`"process"` mode; restored when the builder is idle): a partition of the cores with `num_threads`.
        check_fingerprint (`bool`, defaults to `True`): Refuse a refreshed index whose manifest fingerprint is not
            that of the snapshot it was built from (costs one hash of the snapshot per refresh).
        max_restarts (`int`, defaults to 2): How many times a builder process killed by a signal is restarted at
            once from the same snapshot before the request is given up (until the next one).
        time_share (`float`, *optional*): `"thread"` mode: pace the build ([`~index.pacing.BuildPacer`]): it runs
            on the trainer's own thread, not a thread of its own, only inside [`IndexRefresher.maybe_swap`] /
            [`IndexRefresher.on_step`], alone on the cores, for `time_share` × the trainer's time since the previous
            call (0.1: 10 % of the trainer's time while a build
            is in flight, whatever the cores; builds take 1 / `time_share` times their CPU time).
        max_staleness (`int`, *optional*): Bound the steps between a refresh's request and its swap: from step
            `request + max_staleness` on, [`IndexRefresher.maybe_swap`] and [`IndexRefresher.ready_step`] wait for that
            build (0: a blocking refresh, swapped in at the step that asked for it). The step of every swap is then
            that of a synchronous schedule, whatever the builder's speed, so runs and resumes repeat exactly. Default:
            never wait (a slow build is swapped in whenever it finishes).

    Attributes:
        stats (`list[dict]`): One entry per swap: `snapshot_step`, `swap_step`, `staleness_steps`,
            `staleness_seconds`, `build_seconds` (and `paced_seconds`, the time a paced build ran).
    """

    def __init__(
        self,
        root: str | os.PathLike,
        builder: Callable[..., RealmIndex] | str,
        builder_kwargs: dict[str, Any] | None = None,
        *,
        mode: str = "process",
        schedule: RefreshSchedule | str | int | None = None,
        on_busy: str = "pending",
        index: RealmIndex | None = None,
        keep_last: int = 2,
        load_kwargs: dict[str, Any] | None = None,
        num_threads: int | None = None,
        check_fingerprint: bool = True,
        max_restarts: int = 2,
        niceness: int = 0,
        trainer_threads: int | None = None,
        time_share: float | None = None,
        max_staleness: int | None = None,
    ) -> None:
        self.builder_kwargs = dict(builder_kwargs or {})
        check_refresh_options(
            mode=mode, on_busy=on_busy, keep_last=keep_last, max_restarts=max_restarts, num_threads=num_threads,
            trainer_threads=trainer_threads, niceness=niceness, time_share=time_share, max_staleness=max_staleness,
            builder_kwargs=self.builder_kwargs,
        )
        self.root = os.path.abspath(os.fspath(root))
        os.makedirs(os.path.join(self.root, "snapshots"), exist_ok=True)
        self.builder = builder_path(builder)
        self.mode = mode
        self.schedule = (
            schedule if isinstance(schedule, RefreshSchedule) or schedule is None else RefreshSchedule(schedule)
        )
        self.on_busy = on_busy
        self.keep_last = keep_last
        self.load_kwargs = dict(load_kwargs or {})
        self.num_threads = num_threads
        self.niceness = niceness
        self.trainer_threads = trainer_threads if mode == "process" else None
        self._trainer_threads = TrainerThreads(self.trainer_threads)
        self.check_fingerprint = check_fingerprint
        self.max_restarts = max_restarts
        self.time_share = time_share
        self.max_staleness = max_staleness
        self.pinned: set[int] = set()  # steps of indexes that _cleanup keeps (named by checkpoints)
        self.kept_snapshots: set[int] = set()  # snapshots named by checkpoints: kept until their index is on disk
        self.builder_reports: list[dict[str, Any]] = []  # LATEST["builder"] of each swapped-in index
        self.index = index
        self.index_step = index.step if index is not None and index.step is not None else -1
        self.stats: list[dict[str, float | int]] = []
        self._running: Build | None = None
        self._pending: Build | None = None
        self._ready: dict[str, Any] | None = None  # LATEST of the newest finished build not yet swapped in

    # ------------------------------------------------------------------------------------------- requests
    def request_refresh(self, step: int, doc_tower_state_dict: Mapping[str, torch.Tensor]) -> bool:
        r"""
        Snapshot the document tower and start a background build (non-blocking apart from copying the snapshot).

        Args:
            step (`int`): The training step of the snapshot.
            doc_tower_state_dict (`Mapping[str, torch.Tensor]`): The document tower's `state_dict()`.

        Returns:
            `bool`: `True` when a build started or was queued as pending, `False` when skipped.
        """
        self._poll()
        if self._running is not None and self.on_busy == "skip":
            logger.info(
                "Index build for step %d still running; skipping the refresh requested at step %d",
                self._running.step,
                step,
            )
            return False
        build = self._snapshot(step, doc_tower_state_dict)
        if self._running is None:
            self._start(build)
            return True
        if self._pending is not None:
            logger.info("Replacing pending index refresh of step %d by step %d", self._pending.step, step)
            self._discard(self._pending)
        else:
            logger.info(
                "Index build for step %d still running; refresh of step %d is pending", self._running.step, step
            )
        self._pending = build
        return True

    def on_step(self, step: int, state_dict_fn: Callable[[], Mapping[str, torch.Tensor]]) -> RealmIndex | None:
        r"""
        Convenience for a training loop: request a refresh when the schedule says so, then poll for a swap.

        Args:
            step (`int`): The current training step.
            state_dict_fn (`Callable`): Returns the document tower's state dict (called only when refreshing).

        Returns:
            The new [`RealmIndex`] when one was swapped in, else `None`.
        """
        if self.schedule is None:
            raise ValueError("on_step needs a schedule: IndexRefresher(..., schedule='500').")
        if self.schedule.should_refresh(step):
            self.request_refresh(step, state_dict_fn())
        return self.maybe_swap(step)

    def _snapshot(self, step: int, state_dict: Mapping[str, torch.Tensor]) -> Build:
        return take_snapshot(self.root, step, state_dict, in_memory=self.mode == "thread",
                             fingerprint=self.check_fingerprint)

    def _start(self, build: Build) -> None:
        job = {
            "root": self.root,
            "step": build.step,
            "builder": self.builder,
            "builder_kwargs": self.builder_kwargs,
            "snapshot": build.snapshot_path,
            "snapshot_time": build.snapshot_time,
            "num_threads": self.num_threads,
            "niceness": self.niceness if self.mode == "process" else 0,
        }
        self._trainer_threads.lower()
        start_worker(build, job, self.mode, self.time_share)
        self._running = build
        logger.info("Started index build (%s) for snapshot step %d", self.mode, build.step)

    def _discard(self, build: Build) -> None:
        discard_files(self.root, build, self.kept_snapshots)

    def _restore_trainer_threads(self) -> None:
        if self._running is None:
            self._trainer_threads.restore()

    # ------------------------------------------------------------------------------------------- polling
    def _poll(self) -> None:
        """Collect a finished build (success or crash) and start the pending one."""
        build = self._running
        if build is None or build.worker.is_alive():
            return
        build.worker.join()
        self._running = None
        exitcode = getattr(build.worker, "exitcode", 0)
        failure = build.error if build.error is not None else (f"exit code {exitcode}" if exitcode else None)
        if exitcode is not None and exitcode < 0 and self._pending is None and build.restarts < self.max_restarts:
            # killed by a signal (kill -9, the OOM killer): transient, so do not wait for the next scheduled refresh
            build.restarts += 1
            logger.warning(
                "Index builder for snapshot step %d was killed (signal %d) after %.1fs; restarting it at once "
                "(restart %d of %d)",
                build.step, -exitcode, time.time() - build.started, build.restarts, self.max_restarts,
            )
            self._start(build)
            return
        latest = self._read_latest() if failure is None else None
        if failure is None and (latest is None or latest.get("step") != build.step):
            failure = f"it finished without publishing {LATEST_NAME} for step {build.step}"
        if failure is not None:
            logger.warning(
                "Index builder for snapshot step %d failed (%s); keeping the index from step %s. The next refresh "
                "request starts a new builder.",
                build.step,
                failure,
                self.index_step,
            )
        else:
            if self._ready is not None:
                logger.info(
                    "Index of step %d superseded by step %d before it was swapped in",
                    self._ready["step"],
                    latest["step"],
                )
            self._ready = {**latest, "expected_fingerprint": build.fingerprint}
            if build.pacer is not None:
                self._ready["paced_seconds"] = build.pacer.builder_seconds
        self._discard(build)
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._start(pending)
        self._restore_trainer_threads()

    def _read_latest(self) -> dict[str, Any] | None:
        return read_latest(self.root)

    @property
    def builder_pid(self) -> int | None:
        """The process id of the running builder (`None` when idle or in thread mode)."""
        self._poll()
        worker = self._running.worker if self._running is not None else None
        return getattr(worker, "pid", None)

    def pin(self, step: int) -> None:
        """Keep `index-<step>` on disk whatever `keep_last` says (e.g. the index a checkpoint names)."""
        self.pinned.add(int(step))

    def repin(self, steps: set[int]) -> None:
        """Keep exactly `steps` pinned (e.g. what the checkpoints left after pruning name) and delete the
        `index-<step>` directories that are no longer needed now."""
        self.pinned = {int(step) for step in steps}
        self._cleanup()

    def in_flight(self) -> list[dict[str, Any]]:
        r"""
        The refreshes requested but not swapped in yet, for a checkpoint to record (and keep on disk).

        A build running, the pending one, and a finished one not yet swapped in, each as `{"step", "fingerprint",
        "snapshot_time"}`, by step. Their snapshots are written to `snapshots/` when not there yet (thread mode) and
        kept until their index is on disk, and their `index-<step>` directories are pinned, so that
        [`IndexRefresher.resume_in_flight`] can take them up again from any checkpoint that names them.
        """
        self._poll()
        records = []
        if self._ready is not None:
            ready = self._ready
            records.append({"step": int(ready["step"]), "fingerprint": ready.get("expected_fingerprint"),
                            "snapshot_time": float(ready["snapshot_time"])})
        for build in (self._running, self._pending):
            if build is None:
                continue
            path = snapshot_file(self.root, build.step)
            if not os.path.exists(path) and build.state_dict is not None:
                save_snapshot(build.state_dict, path)  # thread mode keeps it in memory only
            self.kept_snapshots.add(build.step)
            records.append({"step": build.step, "fingerprint": build.fingerprint, "snapshot_time": build.snapshot_time})
        for record in records:
            self.pin(record["step"])
        return sorted(records, key=lambda record: record["step"])

    def resume_in_flight(self, records: list[Mapping[str, Any]]) -> None:
        r"""
        Take up the refreshes a checkpoint recorded as in flight ([`IndexRefresher.in_flight`]), at once.

        Semantics of a resumed run: a refresh whose index the interrupted run's builder finished (`index-<step>` on
        disk) is swapped in at the first step after the checkpoint, with no rebuild; one whose build did not finish is
        restarted now from its snapshot (kept on disk for this) and swapped in when it finishes, as a refresh
        requested at the checkpoint step would be. The index versions and their order are those of the interrupted
        run; the step of a restarted build's swap depends on how long it takes, as in any asynchronous refresh.
        """
        for record in sorted(records, key=lambda record: int(record["step"])):
            step = int(record["step"])
            if step <= self.index_step:
                continue
            self.pin(step)
            name = f"index-{step}"
            snapshot = snapshot_file(self.root, step)
            if os.path.isdir(os.path.join(self.root, name)):
                latest = self._read_latest() or {}
                self._ready = {
                    "step": step, "directory": name, "snapshot_time": float(record["snapshot_time"]),
                    "build_seconds": float(latest.get("build_seconds", 0.0)) if latest.get("step") == step else 0.0,
                    "builder": latest.get("builder") if latest.get("step") == step else None,
                    "expected_fingerprint": record.get("fingerprint"),
                }
                logger.info("Resuming the refresh of snapshot step %d: its index is on disk, swapped in next", step)
            elif os.path.isfile(snapshot):
                build = Build(step=step, snapshot_time=float(record["snapshot_time"]), snapshot_path=snapshot,
                               fingerprint=record.get("fingerprint"))
                self.kept_snapshots.add(step)
                if self._running is None:
                    self._start(build)
                else:
                    if self._pending is not None:
                        self._discard(self._pending)
                    self._pending = build
                logger.info("Resuming the refresh of snapshot step %d: restarting its build from the snapshot", step)
            else:
                logger.warning(
                    "The checkpoint names a refresh of snapshot step %d in flight, but neither %s nor its snapshot is "
                    "on disk; it is lost (the next scheduled refresh replaces it)", step, name,
                )

    @property
    def busy(self) -> bool:
        """Whether a build is running or pending."""
        self._poll()
        return self._running is not None or self._pending is not None

    def ready_step(self, step: int | None = None) -> int | None:
        r"""
        The snapshot step of a finished index that [`IndexRefresher.maybe_swap`] would swap in now, or None. Ranks
        that each refresh their own shard agree on this step before any of them swaps. Non-blocking, unless `step`
        (the current training step) is given and a build is due by `max_staleness`: then it waits for that build.
        """
        self._lend()
        if step is not None:
            self._wait_for_due(step)
        self._poll()
        if self._ready is None or self._ready["step"] <= self.index_step:
            return None
        return int(self._ready["step"])

    def maybe_swap(self, step: int) -> RealmIndex | None:
        r"""
        Poll between training steps: the newest finished index if one completed since the last swap. Non-blocking,
        unless a build is due by `max_staleness` at `step`: then it waits for that build.

        Logs the staleness of the swapped index (steps and seconds between its snapshot and now) and the build time,
        and appends them to `stats`. An index that does not load (damaged or truncated files, a checksum or
        fingerprint mismatch) is rejected with a warning: the index in use is kept.

        Args:
            step (`int`): The current training step.

        Returns:
            The new [`RealmIndex`] (also kept as `self.index`), or `None` when there is nothing new.
        """
        self._lend()
        self._wait_for_due(step)
        self._poll()
        ready, self._ready = self._ready, None
        if ready is None or ready["step"] <= self.index_step:
            return None
        directory = os.path.join(self.root, ready["directory"])
        expected = ready.get("expected_fingerprint") if self.check_fingerprint else None
        try:
            index = RealmIndex.from_pretrained(directory, expected_fingerprint=expected, **self.load_kwargs)
        except Exception as err:  # faiss raises RuntimeError on a damaged file; nothing here may stop training
            logger.warning(
                "Rejected the refreshed index at %s (%s: %s); keeping the index from step %s",
                directory,
                type(err).__name__,
                err,
                self.index_step,
            )
            return None
        record = {
            "snapshot_step": int(ready["step"]),
            "swap_step": int(step),
            "staleness_steps": int(step) - int(ready["step"]),
            "staleness_seconds": time.time() - float(ready["snapshot_time"]),
            "build_seconds": float(ready["build_seconds"]),
        }
        report = ready.get("builder") or {}
        if report:
            record["builder_threads"] = int(report["num_threads"])
            record["builder_niceness"] = int(report["niceness"])
        if "paced_seconds" in ready:
            record["paced_seconds"] = float(ready["paced_seconds"])
        self.builder_reports.append(report)
        self.stats.append(record)
        logger.info(
            "Swapped in the index of step %d at step %d: %d steps and %.1fs stale (build took %.1fs)",
            record["snapshot_step"],
            record["swap_step"],
            record["staleness_steps"],
            record["staleness_seconds"],
            record["build_seconds"],
        )
        self.index, self.index_step = index, record["snapshot_step"]
        self._cleanup()
        return index

    def _wait_for_due(self, step: int) -> None:
        """Wait for the builds that `max_staleness` says must be swapped in by `step` (the oldest first; a paced one
        runs unpaced meanwhile). A build that fails ends the wait like one that succeeds: the old index stays."""
        if self.max_staleness is None:
            return
        waited = time.perf_counter()
        while True:
            self._poll()
            build = self._running
            if build is None or build.step + self.max_staleness > step:
                break
            if build.pacer is not None:
                self._lend(unlimited=True)
            else:
                build.worker.join(timeout=0.1)
        if time.perf_counter() - waited > 0.1:
            logger.info("Waited %.1fs at step %d for the index build due by max_staleness=%d", time.perf_counter()
                        - waited, step, self.max_staleness)

    def _lend(self, unlimited: bool = False) -> None:
        """A paced build runs here, in the trainer's time (see `time_share`)."""
        build = self._running
        if build is not None and build.pacer is not None:
            build.pacer.lend(unlimited=unlimited)

    def wait(self, timeout: float | None = None) -> bool:
        r"""
        Block until the running and pending builds are done (e.g. at the end of training). A paced build runs
        unpaced here (the trainer waits anyway); `timeout` is then checked between builds only.

        Returns:
            `bool`: `True` when idle, `False` when `timeout` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._poll()
            if self._running is None:
                return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if self._running.pacer is not None:
                self._lend(unlimited=True)
                continue
            self._running.worker.join(timeout=0.1 if remaining is None else min(remaining, 0.1))

    def close(self, wait: bool = False) -> None:
        """Stop: wait for the builds (`wait=True`) or stop a running builder (a process is terminated, a paced build
        cancelled) and drop the pending one."""
        if wait:
            self.wait()
            return
        if self._pending is not None:
            self._discard(self._pending)
            self._pending = None
        build = self._running
        if build is not None and stop_worker(build, self.mode):
            self._discard(build)
            self._running = None
        self._restore_trainer_threads()

    def _cleanup(self) -> None:
        """Delete old `index-<step>` directories beyond `keep_last` (never the one in use nor a pinned one)."""
        clean_up(self.root, self.keep_last, self.index_step, self.pinned)
