"""Hub resolution: is a name a repo id, and the local snapshot of an index bundle (downloaded or from the cache).

Parquet from the Hub is converted once to a memory-mapped Arrow cache by `datasets` (under `HF_DATASETS_CACHE`) when
the blocks are read.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..index.manifest import MANIFEST_NAME, IndexManifest
from .bundles import check_index_bundle, index_bundle_patterns


__all__ = ["hub_offline", "is_repo_id", "resolve_index_dir"]


def is_repo_id(name: str | os.PathLike) -> bool:
    """Whether `name` can be a Hub repo id (`name` or `namespace/name`) rather than only a local path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    name = os.fspath(name)
    if os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or os.sep in name.replace("/", ""):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` is set, as huggingface_hub read it (tests and callers may patch its constant)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _where(repo_id: str, revision: str | None) -> str:
    return f"dataset repo '{repo_id}'" + (f" (revision '{revision}')" if revision else "")


def resolve_index_dir(
    repo_id: str,
    revision: str | None = None,
    *,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
    force_download: bool = False,
    include_index_file: bool = True,
) -> str:
    r"""
    Download (or find in the cache) the files of an index bundle and return the local snapshot directory.

    The manifest comes first (`hf_hub_download`), then only what its index type needs (`snapshot_download` with
    `allow_patterns`, pinned to the manifest's commit so the files belong together). With `HF_HUB_OFFLINE=1` or
    `local_files_only=True` everything is read from the cache (`HF_HUB_CACHE`).

    Args:
        repo_id (`str`): The dataset repo, e.g. `"org/realm-cc-news-index"`.
        revision (`str`, *optional*): Branch, tag or commit (a commit hash pins the index).
        token, cache_dir, local_files_only, force_download: as in `huggingface_hub.snapshot_download`.
        include_index_file (`bool`, defaults to `True`): Fetch the faiss file too. `RealmIndex.from_pretrained`
            leaves it out unless it will read it (`trust_index_file=True`): it rebuilds the structure from the
            embeddings otherwise.

    Returns:
        `str`: the snapshot directory (same layout as a local index directory).

    Raises:
        `FileNotFoundError`: naming the repo and the missing file (manifest, embeddings, faiss file or blocks).
    """
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = _where(repo_id, revision)
    offline_hint = (
        f"It is not in the local Hugging Face cache and the Hub cannot be reached (offline or HF_HUB_OFFLINE=1); "
        f"fetch it once with network access: `realm-hf download {repo_id} --index"
        + (f" --revision {revision}" if revision else "")
        + "`."
    )
    # offline means the cache only: huggingface_hub < 2 would list a pinned commit's files online even with
    # HF_HUB_OFFLINE=1 (OfflineModeIsEnabled) unless told so
    local_files_only = local_files_only or hub_offline()
    kwargs = {"repo_type": "dataset", "token": token, "cache_dir": cache_dir, "local_files_only": local_files_only}
    try:
        manifest_path = hf_hub_download(
            repo_id, MANIFEST_NAME, revision=revision, force_download=force_download, **kwargs
        )
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(f"{MANIFEST_NAME} of the index {where}: {offline_hint}") from error
    except RepositoryNotFoundError as error:
        raise FileNotFoundError(
            f"No index {where} on the Hub (and no local directory of that name): the repo does not exist or you "
            "have no access to it (pass token=... / `hf auth login` for a private repo)."
        ) from error
    except RevisionNotFoundError as error:
        raise FileNotFoundError(f"The index {where} has no such revision.") from error
    except EntryNotFoundError as error:
        raise FileNotFoundError(
            f"The {where} has no {MANIFEST_NAME}: it is not a RealmIndex bundle. Publish one with "
            "`RealmIndex.push_to_hub(...)` or `realm-hf publish`."
        ) from error
    manifest = IndexManifest.from_json_file(manifest_path)
    snapshot = Path(manifest_path).parent
    # pin the rest of the bundle to the commit the manifest came from
    commit = snapshot.name if snapshot.parent.name == "snapshots" else revision
    try:
        directory = snapshot_download(
            repo_id, revision=commit, allow_patterns=index_bundle_patterns(manifest, include_index_file),
            force_download=force_download, **kwargs,
        )
    except LocalEntryNotFoundError as error:  # includes an incomplete cached snapshot
        raise FileNotFoundError(f"Files of the index {where} are missing: {error}. {offline_hint}") from error
    check_index_bundle(directory, manifest, where, include_index_file)
    return os.fspath(directory)
