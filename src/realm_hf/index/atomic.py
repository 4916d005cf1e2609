"""Crash-safe writes: a directory or a JSON file appears complete at its destination or not at all.

"Complete" holds across a power loss too, not only a killed process: every file and directory of the new tree is
fsynced before the rename that publishes it, and the parent directory is fsynced after it, so the rename can never
reach the disk before the data it points to (on filesystems that reorder metadata and data writes, ext4 with
`data=writeback`, XFS, ...). Index saves, the index refresh and training checkpoints all publish through here.

What is published honours the user's umask (`realm_hf.utils.permissions`): the temporary folder `tempfile.mkdtemp`
makes is `0o700` and a `tempfile.mkstemp` file `0o600`, which would leave a team's shared output folder unreadable
to the rest of the team; the published tree gets `0o777 & ~umask` folders and `0o666 & ~umask` files instead.
"""

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

from ..utils.permissions import directory_mode, file_mode, honour_umask


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
    os.chmod(tmp, directory_mode())  # mkdtemp's 0o700 ignores the umask
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish_directory(tmp, destination)


def publish_directory(source: str | os.PathLike, destination: str | os.PathLike) -> None:
    r"""
    Rename the complete directory `source` to `destination` (same filesystem), replacing an existing one.

    For writers that cannot use [`atomic_directory`], e.g. several processes filling one temporary directory. Every
    file and directory under `source` is given the modes the umask asks for ([`honour_umask`]) and fsynced
    ([`fsync_tree`]) first, and `destination`'s parent is fsynced after the rename.

    Args:
        source (`str` or `os.PathLike`): The finished temporary directory.
        destination (`str` or `os.PathLike`): Where it goes.
    """
    source, destination = os.path.abspath(os.fspath(source)), os.path.abspath(os.fspath(destination))
    parent, name = os.path.split(destination)
    honour_umask(source)  # mkdtemp, mkstemp and safetensors write 0o700 / 0o600 whatever the umask
    fsync_tree(source)  # the data first: a rename that reaches the disk before its files would publish holes
    if os.path.lexists(destination):
        # rename() cannot replace a non-empty directory: move the old one aside first (it stays recoverable
        # under the .old name for the instant between the two renames)
        old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(destination, old)
        os.rename(source, destination)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(source, destination)
    fsync_directory(parent)  # the rename itself
    logger.debug("Wrote %s atomically", destination)


def fsync_directory(path: str | os.PathLike) -> None:
    r"""
    Flush a directory's entries (names created, renamed or removed in it) to disk.

    A no-op where directories cannot be opened for fsync (Windows), whose filesystems journal renames themselves.

    Args:
        path (`str` or `os.PathLike`): The directory.
    """
    if os.name != "nt":  # directories cannot be opened there
        _fsync(path)


def fsync_tree(directory: str | os.PathLike) -> None:
    r"""
    fsync every regular file under `directory`, then every directory from the deepest up to `directory` itself.

    Symbolic links are not followed (what they point to is not part of the tree being published).

    Args:
        directory (`str` or `os.PathLike`): The root of the tree, e.g. a temporary directory about to be renamed.
    """
    for root, _, files in os.walk(os.fspath(directory), topdown=False):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path) and os.path.isfile(path):
                _fsync(path)
        fsync_directory(root)


def _fsync(path: str | os.PathLike) -> None:
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    r"""
    Write `data` as JSON to `path` through a temporary file and `os.replace`, so readers never see half a file; the
    file is fsynced before the replace and its directory after it. Its mode honours the umask (`0o666 & ~umask`, not
    mkstemp's `0o600`).

    Args:
        path (`str` or `os.PathLike`): Destination file.
        data: Anything `json.dump` accepts.
    """
    path = os.path.abspath(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=os.path.dirname(path))
    try:
        if hasattr(os, "fchmod"):  # not on Windows before Python 3.13, whose files have no such modes
            os.fchmod(fd, file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(os.path.dirname(path))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
