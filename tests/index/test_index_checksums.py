"""Checksums in the manifest: a damaged, truncated, swapped, reordered or tampered file of an index (blocks,
embeddings, faiss file) is refused on load, before anything parses it."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil

import datasets
import numpy as np
import pytest
from index_helpers import MeanPoolEmbedder, make_blocks

from realm_hf.index import RealmIndex
from realm_hf.index.manifest import FORMAT_VERSION


pytest.importorskip("faiss")


@pytest.fixture
def saved(tmp_path) -> str:
    path = str(tmp_path / "index")
    RealmIndex.build(make_blocks(30), MeanPoolEmbedder(seed=0), index_type="Flat", step=1).save_pretrained(path)
    return path


def _manifest(directory: str) -> dict:
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _write_manifest(directory: str, manifest: dict) -> None:
    with open(os.path.join(directory, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)


def _block_file(directory: str) -> str:
    (path,) = glob.glob(os.path.join(directory, "blocks", "data-*.arrow"))
    return path


def _refuse_parsing(monkeypatch) -> None:
    """Make every reader of block files fail loudly: a refusal must come before any of them runs."""

    def parsed(*args, **kwargs):
        raise AssertionError("a block file was parsed before its checksum was checked")

    monkeypatch.setattr(datasets, "load_from_disk", parsed)
    monkeypatch.setattr(datasets.Dataset, "from_parquet", parsed)


def test_manifest_records_checksums_of_every_file_and_a_clean_index_loads(saved):
    manifest = _manifest(saved)
    on_disk = sorted(
        os.path.relpath(os.path.join(root, name), saved).replace(os.sep, "/")
        for root, _, files in os.walk(saved)
        for name in files
        if name != "manifest.json"
    )
    assert sorted(manifest["checksums"]) == on_disk
    assert {"embeddings.npy", "index.faiss", "blocks/state.json"} <= set(on_disk)
    assert any(name.startswith("blocks/data-") for name in on_disk)  # the Arrow file: the evidence text users see
    assert manifest["format_version"] == FORMAT_VERSION == 2
    assert all(value.startswith("xxh3_128:") for value in manifest["checksums"].values())
    loaded = RealmIndex.from_pretrained(saved)
    assert loaded.manifest.checksums == manifest["checksums"]


def test_tampered_block_file_is_refused_before_it_is_parsed(saved, monkeypatch):
    path = _block_file(saved)
    data = open(path, "rb").read()
    assert b"block 7" in data
    with open(path, "wb") as f:  # same size, still valid Arrow: evidence text swapped under the reader's eyes
        f.write(data.replace(b"block 7", b"block X"))
    _refuse_parsing(monkeypatch)
    with pytest.raises(ValueError, match=r"blocks/data-\S+\.arrow does not match the checksum .* Rebuild"):
        RealmIndex.from_pretrained(saved)


def test_block_file_the_manifest_does_not_record_is_refused(saved, monkeypatch):
    manifest = _manifest(saved)
    name = os.path.relpath(_block_file(saved), saved).replace(os.sep, "/")
    del manifest["checksums"][name]
    _write_manifest(saved, manifest)
    _refuse_parsing(monkeypatch)
    with pytest.raises(ValueError, match=rf"records no checksum for {name}.* Rebuild"):
        RealmIndex.from_pretrained(saved)


def test_manifest_naming_a_file_outside_the_directory_is_refused(saved, tmp_path):
    manifest = _manifest(saved)
    manifest["checksums"]["blocks/../../elsewhere.parquet"] = manifest["checksums"]["embeddings.npy"]
    _write_manifest(saved, manifest)
    with pytest.raises(ValueError, match=r"'blocks/\.\./\.\./elsewhere.parquet', which is not a path inside"):
        RealmIndex.from_pretrained(saved)


def test_older_manifest_loads_with_a_warning_saying_how_to_record_the_missing_checksums(saved, tmp_path, caplog):
    manifest = _manifest(saved)
    manifest["format_version"] = 1  # realm_hf before block checksums: embeddings and faiss file only
    manifest["checksums"] = {name: manifest["checksums"][name] for name in ("embeddings.npy", "index.faiss")}
    _write_manifest(saved, manifest)
    with caplog.at_level(logging.WARNING, logger="realm_hf.index.storage"):
        assert RealmIndex.from_pretrained(saved).num_blocks == 30
    assert "older realm_hf (index format 1)" in caplog.text and "blocks/" in caplog.text
    assert ".save_pretrained(<new dir>)" in caplog.text
    RealmIndex.from_pretrained(saved).save_pretrained(tmp_path / "resaved")  # the upgrade the warning names
    assert _manifest(str(tmp_path / "resaved"))["format_version"] == FORMAT_VERSION
    assert any(name.startswith("blocks/") for name in _manifest(str(tmp_path / "resaved"))["checksums"])

    np.save(os.path.join(saved, "embeddings.npy"), np.zeros((30, 16), np.float32))  # what it records is still checked
    with pytest.raises(ValueError, match="embeddings.npy does not match the checksum"):
        RealmIndex.from_pretrained(saved)


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
    manifest = _manifest(saved)
    del manifest["checksums"]
    _write_manifest(saved, {**manifest, "format_version": 1})
    assert RealmIndex.from_pretrained(saved).manifest.checksums is None
    # a current manifest without them was edited: refused
    _write_manifest(saved, manifest)
    with pytest.raises(ValueError, match="records no checksum for"):
        RealmIndex.from_pretrained(saved)
