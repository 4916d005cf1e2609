"""No symbolic link inside an index directory is followed: refused before anything is read, in one line naming it,
except the links of a Hugging Face cache snapshot into its own repo folder (how the cache stores files)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from index_helpers import make_blocks

from realm_hf.index import RealmIndex


pytest.importorskip("faiss")

VECTORS = np.random.default_rng(0).standard_normal((12, 8)).astype(np.float32)


@pytest.fixture
def saved(tmp_path) -> Path:
    path = tmp_path / "index"
    RealmIndex.from_embeddings(make_blocks(12), VECTORS, index_type="Flat").save_pretrained(path)
    return path


def _refused(directory: Path, link: Path) -> str:
    with pytest.raises(ValueError) as error:
        RealmIndex.from_pretrained(directory)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{link} is a symbolic link (to ")
    assert "cp -L" in message
    return message


def test_embeddings_linked_to_a_file_outside_the_folder_are_refused_though_the_checksum_matches(tmp_path, saved):
    outside = tmp_path / "elsewhere.npy"
    shutil.move(saved / "embeddings.npy", outside)
    (saved / "embeddings.npy").symlink_to(outside)  # same bytes: the checksum alone would let it through
    assert str(outside) in _refused(saved, saved / "embeddings.npy")


def test_a_link_inside_the_folder_and_a_linked_blocks_folder_are_refused(tmp_path, saved):
    shutil.move(saved / "index.faiss", saved / "real.faiss")
    (saved / "index.faiss").symlink_to("real.faiss")
    _refused(saved, saved / "index.faiss")
    (saved / "index.faiss").unlink()
    shutil.move(saved / "real.faiss", saved / "index.faiss")
    shutil.move(saved / "blocks", tmp_path / "blocks")
    (saved / "blocks").symlink_to(tmp_path / "blocks", target_is_directory=True)
    _refused(saved, saved / "blocks")


def test_the_index_folder_itself_may_be_a_link(tmp_path, saved):
    (tmp_path / "named").symlink_to(saved, target_is_directory=True)  # the user named it: not a file inside
    assert RealmIndex.from_pretrained(tmp_path / "named").num_blocks == 12


def _populate_cache(cache: Path, folder: Path, commit: str = "1" * 40) -> Path:
    """`folder` laid out as huggingface_hub's cache does: blobs named by hash, snapshot files linked to them."""
    repo = cache / "datasets--org--index"
    snapshot = repo / "snapshots" / commit
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, blob)
        pointer = snapshot / path.relative_to(folder)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    return snapshot


def test_a_hugging_face_cache_snapshot_loads_but_not_with_a_link_out_of_its_repo(tmp_path, saved):
    snapshot = _populate_cache(tmp_path / "hub", saved)
    assert os.path.islink(snapshot / "embeddings.npy")
    assert RealmIndex.from_pretrained(snapshot).num_blocks == 12

    outside = tmp_path / "outside.npy"
    shutil.copyfile(saved / "embeddings.npy", outside)
    (snapshot / "embeddings.npy").unlink()
    (snapshot / "embeddings.npy").symlink_to(outside)
    _refused(snapshot, snapshot / "embeddings.npy")
