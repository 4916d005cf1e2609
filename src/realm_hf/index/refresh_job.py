"""The builder's side of the asynchronous index refresh (see `index.refresh`): one build job, from a document-tower
snapshot to a published `<root>/index-<step>` and `<root>/LATEST`, run in a spawned process or a thread.

The builder travels as an import path string (`"package.module:function"`), its arguments as JSON, the snapshot as a
safetensors file: nothing is pickled.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from safetensors.torch import load_file

from ..utils.files import read_json_file
from .atomic import write_json_atomic
from .manifest import fingerprint_state_dict
from .mips import RealmIndex

logger = logging.getLogger(__name__)

__all__ = ["LATEST_NAME", "builder_path", "builder_process_main", "builder_report", "import_builder", "run_build_job"]

LATEST_NAME = "LATEST"
"""The file in the refresh root that names the newest published index (`{"step", "directory", ...}`)."""


def builder_path(builder: Callable[..., RealmIndex] | str) -> str:
    r"""
    The import path `"module:qualname"` of a module-level builder function, checked to resolve back to it.

    Raises:
        `ValueError`: for lambdas, closures, bound methods and functions defined in `__main__` of a spawn-less run.
    """
    if isinstance(builder, str):
        path = builder
    else:
        path = f"{getattr(builder, '__module__', '')}:{getattr(builder, '__qualname__', '')}"
    try:
        resolved = import_builder(path)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(
            f"The index builder must be a module-level function importable by path, got {builder!r} ({err}). "
            "Define it at the top level of a module (not a lambda, closure or method)."
        ) from err
    if not isinstance(builder, str) and resolved is not builder:
        raise ValueError(f"{path} does not resolve to the builder {builder!r}; define it at module level.")
    return path


def import_builder(path: str) -> Callable[..., RealmIndex]:
    """Import `"package.module:function"`."""
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname or "<" in qualname:
        raise ValueError(f"{path!r} is not a 'module:function' path")
    target: Any = importlib.import_module(module_name)
    for attribute in qualname.split("."):
        target = getattr(target, attribute)
    return target


def run_build_job(job: Mapping[str, Any], state_dict: Mapping[str, torch.Tensor] | None = None) -> None:
    r"""
    Build one index from a document-tower snapshot and publish it; what the background builder runs.

    Calls `builder(state_dict, step=step, **builder_kwargs)`, which returns a [`RealmIndex`], saves it atomically
    to `<root>/index-<step>` and then atomically rewrites `<root>/LATEST` to point at it.

    Args:
        job (`Mapping`): JSON-able: `root`, `step`, `builder` (import path), `builder_kwargs`, `snapshot_time`,
            and `snapshot` (the safetensors file) when `state_dict` is not given.
        state_dict (`Mapping[str, torch.Tensor]`, *optional*): The snapshot itself (thread mode).
    """
    began = time.time()
    if state_dict is None:
        state_dict = load_file(job["snapshot"])
    builder = import_builder(job["builder"])
    index = builder(state_dict, step=job["step"], **job["builder_kwargs"])
    if not isinstance(index, RealmIndex):
        raise TypeError(f"The index builder {job['builder']} returned {type(index).__name__}, not a RealmIndex.")
    if index.manifest.step is None:
        index.manifest.step = job["step"]
    if index.manifest.fingerprint is None:
        index.manifest.fingerprint = fingerprint_state_dict(state_dict)
    name = f"index-{job['step']}"
    index.save_pretrained(os.path.join(job["root"], name))
    build_seconds = time.time() - began
    report = builder_report(index)
    write_json_atomic(
        os.path.join(job["root"], LATEST_NAME),
        {
            "step": job["step"],
            "directory": name,
            "snapshot_time": job["snapshot_time"],
            "build_seconds": build_seconds,
            "completed_time": time.time(),
            "builder": report,
        },
    )
    logger.info(
        "Built index for snapshot step %d in %.1fs (on %s, %d threads, niceness %d)",
        job["step"], build_seconds, report["device"], report["num_threads"], report["niceness"],
    )


def builder_report(index: RealmIndex | None = None) -> dict[str, Any]:
    """What the builder ran with: the device its document tower embedded on (`index.build_info["device"]` when the
    builder function records it, else `"cpu"`), torch's thread count, the process niceness and pid."""
    info = dict(getattr(index, "build_info", None) or {})
    return {
        "device": str(info.get("device", "cpu")),
        "num_threads": torch.get_num_threads(),
        "niceness": os.nice(0) if hasattr(os, "nice") else 0,
        "pid": os.getpid(),
    }


def builder_process_main(job_path: str, log_level: int, realm_hf_log_level: int) -> None:
    """Entry point of the spawned builder process (a module-level function, as spawn requires). It logs as the
    trainer does: `log_level` for the root logger, `realm_hf_log_level` for realm_hf's own (see `configure_logging`)."""
    logging.basicConfig(level=log_level, format="%(asctime)s [index builder] %(levelname)s %(name)s: %(message)s")
    logging.getLogger("realm_hf").setLevel(realm_hf_log_level)
    job = read_json_file(job_path)
    if job.get("num_threads"):
        torch.set_num_threads(int(job["num_threads"]))
    if job.get("niceness"):
        # lower the builder's priority, so that on shared cores the trainer gets the CPU whenever it wants it
        os.nice(int(job["niceness"]))
    run_build_job(job)
