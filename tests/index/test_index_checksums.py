"""Checksums in the manifest: a damaged, truncated, swapped or reordered embeddings / faiss file is refused on load."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from index_helpers import MeanPoolEmbedder, make_blocks

from realm_hf.index import RealmIndex


pytest.importorskip("faiss")


@pytest.fixture
def saved(tmp_path) -> str:
    path = str(tmp_path / "index")
    RealmIndex.build(make_blocks(30), MeanPoolEmbedder(seed=0), index_type="Flat", step=1).save_pretrained(path)
    return path


def test_manifest_records_checksums_and_a_clean_index_loads(saved):
    manifest = json.loads(open(os.path.join(saved, "manifest.json")).read())
    assert sorted(manifest["checksums"]) == ["embeddings.npy", "index.faiss"]
    assert all(value.startswith("xxh3_128:") for value in manifest["checksums"].values())
    loaded = RealmIndex.from_pretrained(saved)
    assert loaded.manifest.checksums == manifest["checksums"]


def test_reordered_embeddings_are_refused_unless_verification_is_off(saved):
    path = os.path.join(saved, "embeddings.npy")
    embeddings = np.load(path)
    np.save(path, embeddings[::-1].copy(), allow_pickle=False)  # same shape and dtype: only the checksum can tell
    with pytest.raises(ValueError, match=r"embeddings.npy does not match the checksum .* Rebuild"):
        RealmIndex.from_pretrained(saved)
    assert RealmIndex.from_pretrained(saved, verify_checksums=False).num_blocks == 30  # the explicit opt-out


def test_faiss_file_of_another_index_is_refused(tmp_path, saved):
    other = str(tmp_path / "other")
    RealmIndex.build(make_blocks(30), MeanPoolEmbedder(seed=7), index_type="Flat").save_pretrained(other)
    shutil.copyfile(os.path.join(other, "index.faiss"), os.path.join(saved, "index.faiss"))
    with pytest.raises(ValueError, match=r"index.faiss does not match the checksum"):
        RealmIndex.from_pretrained(saved)


def test_truncated_faiss_file_is_refused_with_a_clear_error(saved):
    path = os.path.join(saved, "index.faiss")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(ValueError, match=r"damaged, truncated or replaced"):
        RealmIndex.from_pretrained(saved)


def test_changed_index_drops_its_stale_checksums_and_an_old_manifest_still_loads(tmp_path, saved):
    index = RealmIndex.from_pretrained(saved)
    index.remove([0, 1])
    assert index.manifest.checksums is None  # they described the saved files, not this index
    index.save_pretrained(tmp_path / "changed")
    assert RealmIndex.from_pretrained(tmp_path / "changed").num_blocks == 28
    # an index written before checksums existed has none to check
    manifest_path = os.path.join(saved, "manifest.json")
    manifest = json.loads(open(manifest_path).read())
    del manifest["checksums"]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    assert RealmIndex.from_pretrained(saved).manifest.checksums is None
