"""The index versions of a refresh on disk: `<root>/index-<step>` directories, the `LATEST` record the builder
publishes, and the clean-up that keeps the newest `keep_last`, the one in use and those a checkpoint pins."""

from __future__ import annotations

import os
import shutil
from typing import Any

from ...utils.files import read_json_file
from ..manifest import DAMAGED_INDEX_HINT
from ..refresh_job import LATEST_NAME

__all__ = ["clean_up", "index_steps", "read_latest"]


def read_latest(root: str) -> dict[str, Any] | None:
    """The `LATEST` record of the newest published build (`step`, `directory`, `snapshot_time`, `build_seconds`,
    `builder`), or None before the first."""
    path = os.path.join(root, LATEST_NAME)
    if not os.path.isfile(path):
        return None
    return read_json_file(path, DAMAGED_INDEX_HINT)


def index_steps(root: str) -> list[int]:
    """The steps of the `index-<step>` directories under `root`, oldest first."""
    return sorted(
        int(name.split("-", 1)[1])
        for name in os.listdir(root)
        if name.startswith("index-") and name.split("-", 1)[1].isdigit()
    )


def clean_up(root: str, keep_last: int, in_use: int, pinned: set[int]) -> None:
    """Delete the `index-<step>` directories beyond the newest `keep_last`, never the one in use nor a pinned one."""
    for old in index_steps(root)[:-keep_last]:
        if old != in_use and old not in pinned:
            shutil.rmtree(os.path.join(root, f"index-{old}"), ignore_errors=True)
