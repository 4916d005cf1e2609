"""Where an index directory lies, and what may not lie in it: whether it is a Hugging Face Hub download, and the
refusal of symbolic links inside it (a link can make the loader read any file the user can read; only the links of a
Hugging Face cache snapshot into its own repo folder are allowed, which is how the cache stores files).

Where a directory lies does not decide whether its faiss file is trusted (who wrote it does, see
`realm_hf.index.provenance`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .manifest import MANIFEST_NAME, REBUILD_HINT

__all__ = ["came_from_hub", "check_no_links", "hub_repo_folder"]

_HUB_CACHE_PREFIXES = ("models--", "datasets--", "spaces--")
_LOCAL_DIR_METADATA = os.path.join(".cache", "huggingface", "download")  # what `hf download --local-dir` leaves


def came_from_hub(directory: str | os.PathLike) -> bool:
    r"""
    Whether `directory` holds files downloaded from the Hugging Face Hub: it lies inside a snapshot of a Hugging Face
    cache (`.../datasets--org--name/snapshots/<commit>/...`, symbolic links followed), or its manifest was written by
    a `local_dir` download (`hf download --local-dir`, which keeps `.cache/huggingface/download/` metadata).

    Not a reason to trust or distrust a faiss file (who wrote it decides, see the module docstring): it tells a
    download that left the faiss file out (it is fetched only when it will be read) from a directory that lost it,
    and sets the level of the rebuild's log line.

    Args:
        directory (`str` or `os.PathLike`): An index directory.
    """
    directory = os.fspath(directory)
    if hub_repo_folder(directory) is not None:
        return True
    for start in {Path(os.path.abspath(directory)), Path(os.path.realpath(directory))}:
        for folder in (start, *start.parents):
            relative = os.path.relpath(os.path.join(start, MANIFEST_NAME), folder)
            if os.path.isfile(os.path.join(folder, _LOCAL_DIR_METADATA, relative + ".metadata")):
                return True
    return False


def hub_repo_folder(directory: str) -> str | None:
    """The Hugging Face cache repo folder (`.../datasets--org--name`) whose snapshot holds `directory`, or None."""
    for start in (Path(os.path.abspath(directory)), Path(os.path.realpath(directory))):
        for folder in (start, *start.parents):
            if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith(_HUB_CACHE_PREFIXES):
                return str(folder.parent.parent)
    return None


def check_no_links(directory: str | os.PathLike) -> None:
    r"""
    Refuse a symbolic link inside an index directory before anything is read: a link can make the loader read (and,
    where its checksum is edited to match, trust) any file the user can read. Links of a Hugging Face cache snapshot
    into its own repo folder (`snapshots/<commit>/x -> ../../blobs/<hash>`) are how the cache stores files: allowed.

    Args:
        directory (`str` or `os.PathLike`): The index directory (itself possibly a link: the user named it).

    Raises:
        `ValueError`: one line naming the link, where it leads and the fix.
    """
    directory = os.fspath(directory)
    repo = hub_repo_folder(directory)
    allowed = os.path.realpath(repo) + os.sep if repo is not None else None
    for root, folders, files in os.walk(directory):
        for name in [*folders, *files]:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if allowed is not None and target.startswith(allowed):
                continue
            raise ValueError(
                f"{path} is a symbolic link (to {target}): an index directory must hold its own files, and a link "
                "could make realm_hf read any file; replace the link with a copy of what it points to (`cp -L`), "
                f"or save the index again. {REBUILD_HINT}"
            )
        folders[:] = [name for name in folders if not os.path.islink(os.path.join(root, name))]
