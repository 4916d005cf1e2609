"""One index build of the asynchronous refresh: its record ([`Build`]: step, snapshot, worker, restarts), its files
(`snapshots/snapshot-<step>.safetensors`, `snapshots/job-<step>.json`), and the worker that runs it in one of the two
modes: a `spawn`ed process, or a thread of the trainer (a thread of its own, or paced on the trainer's thread).

No pickle of tensors: the snapshot travels as a safetensors file, the builder as an import path string, its arguments
as JSON (`index.refresh_job`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

import torch
import torch.multiprocessing
from safetensors.torch import save_file

from ...utils.permissions import honour_umask
from ..atomic import write_json_atomic
from ..manifest import fingerprint_state_dict
from ..pacing import BuildCancelled, BuildPacer, cancellable_thread
from ..refresh_job import builder_process_main, run_build_job

logger = logging.getLogger(__name__)

__all__ = ["Build", "discard_files", "save_snapshot", "snapshot_file", "start_worker", "stop_worker", "take_snapshot"]

SNAPSHOTS = "snapshots"
"""The folder of `<root>` that holds the snapshots and job files of builds in flight."""


@dataclasses.dataclass
class Build:
    r"""
    One requested build, from its snapshot to its end.

    Args:
        step (`int`): The training step of the snapshot.
        snapshot_time (`float`): When the snapshot was taken (`time.time()`).
        snapshot_path (`str`, *optional*): The snapshot file (process mode, or kept for a checkpoint).
        state_dict (`dict`, *optional*): The snapshot in memory (thread mode).
        fingerprint (`str`, *optional*): Of the snapshot: the index it yields must carry the same.
        started (`float`): When its worker (last) started.
        restarts (`int`): How many times its worker was restarted after being killed by a signal.
        worker: A spawned `Process`, a `Thread`, or the `BuildPacer` of a paced build.
        pacer (`BuildPacer`, *optional*): A paced build (`time_share`), run on the trainer's thread.
        cancelled (`threading.Event`, *optional*): Set to stop a build thread at its next pause point.
        error (`BaseException`, *optional*): What a build thread raised.
    """

    step: int
    snapshot_time: float
    snapshot_path: str | None = None
    state_dict: dict[str, torch.Tensor] | None = None
    fingerprint: str | None = None
    started: float = 0.0
    restarts: int = 0
    worker: Any = None
    pacer: BuildPacer | None = None
    cancelled: threading.Event | None = None
    error: BaseException | None = None


def snapshot_file(root: str, step: int) -> str:
    """The snapshot file of the build of `step`."""
    return os.path.join(root, SNAPSHOTS, f"snapshot-{step}.safetensors")


def _job_file(root: str, step: int) -> str:
    return os.path.join(root, SNAPSHOTS, f"job-{step}.json")


def save_snapshot(tensors: Mapping[str, torch.Tensor], path: str) -> None:
    """Write a snapshot as safetensors, with the mode the umask gives (safetensors writes 0o600 whatever it is)."""
    save_file(dict(tensors), path)
    honour_umask(path)


def take_snapshot(
    root: str, step: int, state_dict: Mapping[str, torch.Tensor], in_memory: bool, fingerprint: bool
) -> Build:
    r"""
    A copy of the document tower at `step`, as a new [`Build`].

    Args:
        root (`str`): The refresher's directory.
        step (`int`): The training step.
        state_dict (`Mapping[str, torch.Tensor]`): The document tower's `state_dict()`.
        in_memory (`bool`): Keep the snapshot in memory (thread mode) instead of writing it to `snapshots/`.
        fingerprint (`bool`): Hash the snapshot, for the refreshed index's manifest to be checked against.
    """
    # clone: the trainer keeps updating its parameters, and safetensors refuses tensors that share memory
    tensors = {
        name: t.detach().to("cpu", copy=True).contiguous()
        for name, t in state_dict.items()
        if isinstance(t, torch.Tensor)
    }
    build = Build(step=step, snapshot_time=time.time())
    if fingerprint:
        build.fingerprint = fingerprint_state_dict(tensors)
    if in_memory:
        build.state_dict = tensors
    else:
        build.snapshot_path = snapshot_file(root, step)
        save_snapshot(tensors, build.snapshot_path)
    return build


def start_worker(build: Build, job: dict[str, Any], mode: str, time_share: float | None) -> None:
    r"""
    Start the worker of `build` (its `worker`, and `pacer` or `cancelled`, are set); errors of a thread are kept in
    `build.error`, never raised into the trainer.

    Args:
        build ([`Build`]): The build.
        job (`dict`): The JSON-able job (`index.refresh_job.run_build_job`).
        mode (`str`): `"process"` (a `spawn`ed daemon process; the job goes through `snapshots/job-<step>.json`) or
            `"thread"`.
        time_share (`float`, *optional*): Thread mode: pace the build on the trainer's thread (`index.pacing`).
    """
    build.started = time.time()
    if mode == "thread":

        def target() -> None:
            try:
                run_build_job(job, state_dict=build.state_dict)
            except BuildCancelled:
                build.error = BuildCancelled("cancelled by close()")
            except BaseException as err:  # reported when the build is collected, never raised into the trainer
                build.error = err
                logger.debug("Index builder traceback:\n%s", traceback.format_exc())

        if time_share is not None:  # runs on the trainer's thread, inside BuildPacer.lend (see index.pacing)
            build.pacer = build.worker = BuildPacer(time_share)
            build.pacer.start(target)
        else:
            build.worker, build.cancelled = cancellable_thread(target, name=f"index-builder-{build.step}")
            build.worker.start()
        return
    job_path = _job_file(job["root"], build.step)
    write_json_atomic(job_path, job)
    context = torch.multiprocessing.get_context("spawn")
    build.worker = context.Process(
        target=builder_process_main,
        args=(job_path, logging.getLogger().getEffectiveLevel(), logging.getLogger("realm_hf").level),
        daemon=True,
        name=f"index-builder-{build.step}",
    )
    build.worker.start()


def stop_worker(build: Build, mode: str) -> bool:
    """Stop a running worker: a process is terminated, a paced build or a build thread cancelled (never left running).
    Returns whether there was one to stop."""
    if mode == "process" and build.worker.is_alive():
        build.worker.terminate()
        build.worker.join()
        logger.info("Terminated the index build of step %d", build.step)
    elif build.pacer is not None:
        build.pacer.cancel()
        build.worker.join()
        logger.info("Cancelled the paced index build of step %d", build.step)
    elif build.cancelled is not None:
        build.cancelled.set()
        build.worker.join()
        logger.info("Cancelled the index build of step %d", build.step)
    else:
        return False
    return True


def discard_files(root: str, build: Build, kept_snapshots: set[int]) -> None:
    """Delete the snapshot and job files of `build`, unless a checkpoint names it as in flight (in `kept_snapshots`)
    and its index is not on disk yet: a resumed run restarts it from the snapshot."""
    if build.step in kept_snapshots and not os.path.isdir(os.path.join(root, f"index-{build.step}")):
        return
    kept_snapshots.discard(build.step)
    for path in (build.snapshot_path, _job_file(root, build.step)):
        if path and os.path.exists(path):
            os.remove(path)
