"""What a training run keeps in its `output_dir`, and the claim a new run lays on that directory.

A run writes `checkpoint-<step>/` directories, `final/` (the model), `trainer_state.json`, `history.json`, its index
versions (`index/`) and its tracker logs. A second run into the same directory would replace some of these and leave
the others beside its own, so that `--resume_from_checkpoint latest` could pick the wrong run's checkpoint: a run
refuses a directory that holds another run's outputs unless it resumes that run (`resume_from_checkpoint`) or
replaces it (`overwrite_output_dir`, which deletes those outputs first), as transformers' `Trainer` does.
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from accelerate import PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import broadcast_object_list

from ..index.manifest import MANIFEST_NAME
from ..utils.options import UsageError

logger = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_PATTERN", "FINAL_NAME", "HISTORY_NAME", "INDEX_VERSIONS_NAME", "TRACKER_RUN_NAME", "TRAINER_STATE",
    "claim_output_dir", "complete_checkpoints", "latest_checkpoint", "previous_run_outputs",
]

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"
HISTORY_NAME = "history.json"
FINAL_NAME = "final"
INDEX_VERSIONS_NAME = "index"
"""The run's index: pre-training's `index-<step>` versions (or fine-tuning's fixed index, an index directory itself)."""
TRACKER_RUN_NAME = "realm_hf"
"""The trackers' run name, and the folder of their logs in `output_dir` (TensorBoard's event files)."""

_PARTIAL_CHECKPOINT = re.compile(r"^\.checkpoint-(\d+)\.tmp$")  # a save that a crash interrupted
_PARTIAL_FINAL = re.compile(rf"^\.{FINAL_NAME}\.(?:tmp|old)-")  # a final save (atomic_directory) a crash interrupted


def previous_run_outputs(output_dir: str | os.PathLike) -> list[str]:
    r"""
    The entries of `output_dir` that show a run trained there: `checkpoint-<step>` directories (complete or not),
    `final`, `trainer_state.json` and `history.json`, sorted by name. What a run leaves before its first checkpoint
    (`training_args.json`, the corpus cache, index versions of the first steps) does not count: nothing could resume
    it.

    Args:
        output_dir (`str` or `os.PathLike`): A training run's output directory (need not exist).

    Returns:
        `list[str]`: the names found (empty for a new or an empty directory).
    """
    output_dir = os.fspath(output_dir)
    if not os.path.isdir(output_dir):
        return []
    markers = {FINAL_NAME, TRAINER_STATE, HISTORY_NAME}
    return sorted(name for name in os.listdir(output_dir) if name in markers or CHECKPOINT_PATTERN.match(name))


def complete_checkpoints(output_dir: str) -> list[str]:
    """The `checkpoint-<step>` directories of `output_dir` that hold a `trainer_state.json` (written last, so the
    checkpoint is whole), by increasing step. Incomplete ones (a save interrupted by an older realm_hf, or a directory
    copied in part) are skipped with a warning."""
    if not os.path.isdir(output_dir):
        return []
    steps = sorted(int(m.group(1)) for name in os.listdir(output_dir) if (m := CHECKPOINT_PATTERN.match(name)))
    complete = []
    for step in steps:
        directory = os.path.join(output_dir, f"checkpoint-{step}")
        if os.path.isfile(os.path.join(directory, TRAINER_STATE)):
            complete.append(directory)
        else:
            logger.warning("Skipping %s: it has no %s (an interrupted save)", directory, TRAINER_STATE)
    return complete


def latest_checkpoint(output_dir: str) -> str | None:
    """The complete `checkpoint-<step>` directory (see [`complete_checkpoints`]) with the highest step, or None."""
    checkpoints = complete_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


def _remove_previous_run(output_dir: str) -> list[str]:
    """Delete what a run wrote in `output_dir`: its checkpoints (and partial saves), final model, state, history,
    index versions and tracker logs. What a new run checks before it reuses it stays: the corpus cache (its checksum),
    fine-tuning's fixed index (its document-tower fingerprint) and `training_args.json` (rewritten). Returns the names
    deleted."""
    removed = []
    for name in sorted(os.listdir(output_dir)):
        path = os.path.join(output_dir, name)
        ours = name in (FINAL_NAME, TRAINER_STATE, HISTORY_NAME, TRACKER_RUN_NAME)
        versions = name == INDEX_VERSIONS_NAME and not os.path.isfile(os.path.join(path, MANIFEST_NAME))
        partial = _PARTIAL_CHECKPOINT.match(name) or _PARTIAL_FINAL.match(name)
        if not (ours or versions or partial or CHECKPOINT_PATTERN.match(name)):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        removed.append(name)
    return removed


def claim_output_dir(
    output_dir: str,
    resume_from_checkpoint: str | None,
    overwrite_output_dir: bool,
    state: PartialState | AcceleratorState,
) -> None:
    r"""
    Make `output_dir` this run's, before any work: refuse it when it holds another run's outputs (see
    [`previous_run_outputs`]), unless the run resumes (`resume_from_checkpoint`: the outputs are that run's own; with
    "latest" there must be a complete checkpoint to resume, else the run would start afresh over them) or
    `overwrite_output_dir` is set (the other run's outputs are deleted first, so that two runs never sit side by
    side). The main process decides and acts; every process gets its decision (the same error on every rank).

    Args:
        output_dir (`str`): The run's output directory.
        resume_from_checkpoint (`str`, *optional*): The run's `resume_from_checkpoint` ("latest" or a checkpoint).
        overwrite_output_dir (`bool`): Whether the run replaces what another run left there.
        state (`PartialState` or `AcceleratorState`): The processes of the run (Accelerate's).

    Raises:
        [`UsageError`]: one line naming the directory, what it holds, `--resume_from_checkpoint` and
            `--overwrite_output_dir`.
    """
    decision: list[str | None] = [None]
    if state.is_main_process:
        found = previous_run_outputs(output_dir)
        shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
        if found and resume_from_checkpoint == "latest" and latest_checkpoint(output_dir) is None:
            decision[0] = (
                f"--output_dir {output_dir} holds a run ({shown}) but no complete checkpoint for "
                "--resume_from_checkpoint latest to resume: pass --overwrite_output_dir to delete its outputs and start "
                "afresh, or another --output_dir."
            )
        elif found and resume_from_checkpoint:
            logger.info("Resuming in %s (it holds %s)", output_dir, shown)
        elif found and overwrite_output_dir:
            removed = _remove_previous_run(output_dir)
            logger.warning("overwrite_output_dir: deleted the earlier run's %s in %s", ", ".join(removed), output_dir)
        elif found:
            decision[0] = (
                f"--output_dir {output_dir} holds another run ({shown}): pass --resume_from_checkpoint latest to "
                "continue it, --overwrite_output_dir to delete its outputs and start afresh, or another --output_dir."
            )
    if state.num_processes > 1:
        broadcast_object_list(decision, from_process=0)  # also the barrier: no rank starts before the deletion ends
    if decision[0] is not None:
        raise UsageError(decision[0])
