"""A Hub that records instead of uploading: `HfApi.create_repo` and `HfApi.create_commit` patched (tests/test_hub.py's
`fake_hub` fixture), every uploaded file kept in a folder per commit, which `markdown_blocks.populate_cache` then lays
out as a Hugging Face cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitInfo, CommitOperationAdd, HfApi


class FakeHub:
    """Records `create_repo` / `create_commit` calls and keeps a copy of every uploaded file."""

    def __init__(self, tmp_path: Path) -> None:
        self.repos: list[dict] = []
        self.commits: list[dict] = []
        self.uploads = tmp_path / "uploads"

    def create_repo(self, api, repo_id, **kwargs):
        self.repos.append({"repo_id": repo_id, **kwargs})
        return f"https://huggingface.co/{repo_id}"

    def create_commit(self, api, repo_id, operations, **kwargs):
        operations = list(operations)
        oid = f"{len(self.commits) + 2:x}" * 40
        folder = self.uploads / f"{len(self.commits)}"
        for op in operations:
            if isinstance(op, CommitOperationAdd):
                target = folder / op.path_in_repo
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(op.path_or_fileobj, target)
        self.commits.append({"repo_id": repo_id, "operations": operations, "folder": folder, "oid": oid, **kwargs})
        return CommitInfo(
            commit_url=f"https://huggingface.co/{repo_id}/commit/{oid}", commit_message=kwargs["commit_message"],
            commit_description="", oid=oid,
        )


def added(commit: dict) -> dict[str, CommitOperationAdd]:
    """The files a recorded commit added, by their path in the repo."""
    return {op.path_in_repo: op for op in commit["operations"] if isinstance(op, CommitOperationAdd)}


def install_fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """Patch `HfApi.create_repo` / `HfApi.create_commit` (for the test) to record into a `FakeHub` under `tmp_path`."""
    hub = FakeHub(tmp_path)
    monkeypatch.setattr(HfApi, "create_repo", lambda api, repo_id, **kw: hub.create_repo(api, repo_id, **kw))
    monkeypatch.setattr(
        HfApi, "create_commit", lambda api, repo_id, ops, **kw: hub.create_commit(api, repo_id, ops, **kw)
    )
    return hub
