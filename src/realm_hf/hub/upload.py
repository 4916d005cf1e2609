"""Upload: one commit per repo (created if missing), deleting the files an earlier upload would leave behind."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..index.backends import FAISS_FILE
from .bundles import BLOCKS_DIR, CARD_FILE, write_index_bundle
from .cards import render_model_card


logger = logging.getLogger(__name__)

__all__ = ["commit_files", "push_index_to_hub"]


def _stale_paths(api: Any, repo_id: str, repo_type: str, revision: str | None, keep: set[str],
                 prefixes: Sequence[str], files: Sequence[str]) -> list[str]:
    """Files of an earlier upload that the new one would leave behind (old block shards, a faiss file of another
    index type). Best effort: a repo that cannot be listed (new, offline) has nothing stale."""
    try:
        existing = api.list_repo_files(repo_id, repo_type=repo_type, revision=revision)
    except Exception as error:  # noqa: BLE001 - a new repo, a missing branch or no network: nothing to delete
        logger.debug("Could not list %s (%s); not deleting stale files", repo_id, error)
        return []
    return sorted(
        path for path in existing
        if path not in keep and (path in files or any(path.startswith(prefix) for prefix in prefixes))
    )


def commit_files(
    api: Any, repo_id: str, repo_type: str, staging: str, paths: Iterable[str], *, revision: str | None,
    private: bool | None, commit_message: str, commit_description: str | None, create_pr: bool | None,
    stale: Sequence[str] = (),
) -> Any:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    if revision is not None and revision != "main":
        api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
    operations = [CommitOperationDelete(path_in_repo=path) for path in stale]
    operations += [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=os.path.join(staging, *path.split("/")))
        for path in sorted(paths)
    ]
    return api.create_commit(
        repo_id, operations, commit_message=commit_message, commit_description=commit_description,
        repo_type=repo_type, revision=revision, create_pr=create_pr,
    )


def push_index_to_hub(
    index: Any,
    repo_id: str,
    revision: str | None = None,
    private: bool | None = None,
    commit_message: str | None = None,
    token: str | bool | None = None,
    *,
    commit_description: str | None = None,
    create_pr: bool | None = None,
    card_facts: Mapping[str, Any] | None = None,
    max_shard_size: str | int = "500MB",
) -> Any:
    r"""
    Publish an index as a Hub *dataset* repo in one commit (see the module docstring for the files).

    Args:
        index ([`RealmIndex`]): The index to publish.
        repo_id (`str`): The dataset repo, created if missing.
        revision (`str`, *optional*): Branch to commit to (created from main if missing).
        private (`bool`, *optional*): Visibility of a newly created repo.
        commit_message (`str`, *optional*): Defaults to a summary of the manifest.
        token (`str`, *optional*): Hub token (default: the logged-in one).
        commit_description, create_pr: as in `HfApi.create_commit`.
        card_facts (`dict`, *optional*): Extra facts for the dataset card (`model_repo_id`, `corpus`, `license`,
            `corpus_description`, ...), see `model_cards/index.md.j2`.
        max_shard_size (`str` or `int`, defaults to `"500MB"`): Size bound of one Parquet shard of blocks.

    Returns:
        `huggingface_hub.CommitInfo`: `.oid` is the commit to pin in `config.index_revision`.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    manifest = index.manifest
    message = commit_message or (
        f"Upload REALM index: {manifest.num_blocks} blocks, dim {manifest.dim}, {manifest.index_type}"
        + (f", doc tower step {manifest.step}" if manifest.step is not None else "")
    )
    with tempfile.TemporaryDirectory(prefix="realm-index-bundle-") as staging:
        paths = write_index_bundle(index, staging, max_shard_size=max_shard_size)
        facts = {"repo_id": repo_id, **dict(card_facts or {})}
        card = render_model_card("index", manifest=manifest, files=paths, **facts)
        card.save(os.path.join(staging, CARD_FILE))
        paths.append(CARD_FILE)
        stale = _stale_paths(
            api, repo_id, "dataset", revision, set(paths), prefixes=(f"{BLOCKS_DIR}/",), files=(FAISS_FILE,)
        )
        info = commit_files(
            api, repo_id, "dataset", staging, paths, revision=revision, private=private, commit_message=message,
            commit_description=commit_description, create_pr=create_pr, stale=stale,
        )
    logger.info("Pushed %r to dataset repo %s (%s)", index, repo_id, getattr(info, "oid", None))
    return info
