"""Crash-safe writes: a directory or a JSON file appears complete at its destination or not at all."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any


logger = logging.getLogger(__name__)


@contextlib.contextmanager
def atomic_directory(destination: str | os.PathLike) -> Iterator[str]:
    r"""
    Yield a fresh temporary directory next to `destination`; on success move it into place.

    The temporary directory lives in the same parent (same filesystem) so the final move is a `rename`. If the body
    raises (or the process dies), the destination is untouched and the temporary directory is removed (or, after a
    hard crash, left as a hidden `.<name>.tmp-*` sibling that is never mistaken for an index). An existing
    destination is moved aside only once the new directory is complete, then deleted.

    Args:
        destination (`str` or `os.PathLike`): The directory to create or replace.

    Yields:
        `str`: the temporary directory to write into.
    """
    destination = os.path.abspath(os.fspath(destination))
    parent, name = os.path.split(destination)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish_directory(tmp, destination)


def publish_directory(source: str | os.PathLike, destination: str | os.PathLike) -> None:
    r"""
    Rename the complete directory `source` to `destination` (same filesystem), replacing an existing one.

    For writers that cannot use [`atomic_directory`], e.g. several processes filling one temporary directory.

    Args:
        source (`str` or `os.PathLike`): The finished temporary directory.
        destination (`str` or `os.PathLike`): Where it goes.
    """
    source, destination = os.path.abspath(os.fspath(source)), os.path.abspath(os.fspath(destination))
    parent, name = os.path.split(destination)
    if os.path.lexists(destination):
        # rename() cannot replace a non-empty directory: move the old one aside first (it stays recoverable
        # under the .old name for the instant between the two renames)
        old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(destination, old)
        os.rename(source, destination)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(source, destination)
    logger.debug("Wrote %s atomically", destination)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    r"""
    Write `data` as JSON to `path` through a temporary file and `os.replace`, so readers never see half a file.

    Args:
        path (`str` or `os.PathLike`): Destination file.
        data: Anything `json.dump` accepts.
    """
    path = os.path.abspath(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
