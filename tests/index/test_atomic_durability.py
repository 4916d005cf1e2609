"""Saves survive a power loss: every file and directory of a new index (or checkpoint) is fsynced before the rename
that publishes it, and the parent directory after it."""

from __future__ import annotations

import os

import pytest
from index_helpers import MeanPoolEmbedder, make_blocks

from realm_hf.index import RealmIndex
from realm_hf.index.atomic import publish_directory, write_json_atomic


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names fsynced files through /proc")


@pytest.fixture
def events(monkeypatch) -> list[tuple[str, str]]:
    """`("fsync", path)` and `("rename", destination)` in the order they happen."""
    recorded: list[tuple[str, str]] = []
    fsync, rename, replace = os.fsync, os.rename, os.replace

    def record_fsync(fd):
        recorded.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return fsync(fd)

    def record_rename(source, destination):
        rename(source, destination)
        recorded.append(("rename", os.fspath(destination)))

    def record_replace(source, destination):
        replace(source, destination)
        recorded.append(("rename", os.fspath(destination)))

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "rename", record_rename)
    monkeypatch.setattr(os, "replace", record_replace)
    return recorded


def _tree(directory: str) -> set[str]:
    """Every file and directory under `directory`, relative to it ("." for itself)."""
    found = {"."}
    for root, dirs, files in os.walk(directory):
        found.update(os.path.relpath(os.path.join(root, name), directory) for name in dirs + files)
    return found


def _check_published(events: list[tuple[str, str]], destination: str) -> None:
    publish = events.index(("rename", destination))
    synced_before = {path for kind, path in events[:publish] if kind == "fsync"}
    (temporary,) = {  # the hidden sibling the tree was written in, renamed into place
        path for path in synced_before if os.path.basename(path).startswith(f".{os.path.basename(destination)}.tmp")
    }
    synced = {os.path.relpath(path, temporary) for path in synced_before if path.startswith(temporary)}
    assert synced == _tree(destination)  # every file and directory, the root included, before the rename
    assert ("fsync", os.path.dirname(destination)) in events[publish + 1 :]  # and the rename itself after it


def test_index_save_fsyncs_every_file_and_directory_before_the_rename(tmp_path, events):
    destination = os.path.realpath(tmp_path / "index")  # /proc names real paths
    RealmIndex.build(make_blocks(12), MeanPoolEmbedder(), index_type="Flat").save_pretrained(destination)
    _check_published(events, destination)
    assert {"manifest.json", "index.faiss", "embeddings.npy", "blocks/state.json"} <= _tree(destination)

    events.clear()  # replacing an existing index: the same guarantees
    RealmIndex.build(make_blocks(14), MeanPoolEmbedder(), index_type="Flat").save_pretrained(destination)
    _check_published(events, destination)


def test_a_directory_filled_by_other_writers_is_fsynced_before_it_is_published(tmp_path, events):
    # what a training checkpoint does: every rank writes into one temporary directory, the main process publishes it
    tmp_path = type(tmp_path)(os.path.realpath(tmp_path))  # /proc names real paths
    tmp = tmp_path / ".checkpoint-5.tmp"
    (tmp / "rank1").mkdir(parents=True)
    (tmp / "rank1" / "optimizer.bin").write_bytes(b"\0" * 64)
    (tmp / "model.safetensors").write_bytes(b"\1" * 64)
    write_json_atomic(tmp / "trainer_state.json", {"step": 5})
    assert ("fsync", str(tmp)) in events  # the JSON file's directory entry, after its replace
    events.clear()
    (tmp / "trainer.tmp-name").write_text("")  # any name: the whole tree is synced
    publish_directory(tmp, tmp_path / "checkpoint-5")
    synced = {os.path.relpath(path, tmp) for kind, path in events if kind == "fsync" and path.startswith(str(tmp))}
    assert synced == _tree(str(tmp_path / "checkpoint-5"))
    assert events[-1] == ("fsync", str(tmp_path))
