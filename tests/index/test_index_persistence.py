"""save_pretrained / from_pretrained: round trip, manifest, atomic replacement, refusal of mismatched indexes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from index_helpers import MeanPoolEmbedder, make_blocks

from realm_hf.index import RealmIndex, fingerprint_module
from realm_hf.index.manifest import FORMAT_VERSION


pytest.importorskip("faiss")


@pytest.mark.parametrize("index_type, embedding_dtype", [("HNSW32", "float32"), ("torch-exact", "float16")])
def test_round_trip(tmp_path, embedder, index_type, embedding_dtype):
    index = RealmIndex.build(make_blocks(40), embedder, index_type=index_type, step=3, embedding_dtype=embedding_dtype)
    queries = torch.randn(5, 16, generator=torch.Generator().manual_seed(0))
    scores, ids = index.search(queries, 6, exclude=[[1], [], [2, 3], [], [0]])
    index.save_pretrained(tmp_path / "index")

    files = sorted(os.listdir(tmp_path / "index"))
    expected = ["blocks", "embeddings.npy", "manifest.json"] + (["index.faiss"] if index_type != "torch-exact" else [])
    assert files == sorted(expected)
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION and manifest["num_blocks"] == 40 and manifest["dim"] == 16
    assert manifest["metric"] == "inner_product" and manifest["index_type"] == index_type
    assert manifest["embedding_dtype"] == embedding_dtype and manifest["step"] == 3
    assert manifest["fingerprint"] == fingerprint_module(embedder)
    assert manifest["created_at"].endswith("+00:00") and manifest["realm_hf_version"]

    loaded = RealmIndex.from_pretrained(tmp_path / "index", expected_dim=16, expected_fingerprint=index.fingerprint)
    assert isinstance(loaded.embeddings, np.memmap) and loaded.embeddings.dtype == np.dtype(embedding_dtype)
    loaded_scores, loaded_ids = loaded.search(queries, 6, exclude=[[1], [], [2, 3], [], [0]])
    assert torch.equal(ids, loaded_ids)
    torch.testing.assert_close(scores, loaded_scores)
    assert loaded.get_blocks(ids) == index.get_blocks(ids)
    assert loaded.backend.search_params == index.backend.search_params


def _leftovers(parent) -> list[str]:
    return [name for name in os.listdir(parent) if name.startswith(".")]


def test_crash_during_save_keeps_the_old_index(tmp_path, monkeypatch):
    destination = tmp_path / "index"
    old = RealmIndex.build(make_blocks(20), MeanPoolEmbedder(seed=0), index_type="Flat", step=1)
    old.save_pretrained(destination)
    new = RealmIndex.build(make_blocks(30), MeanPoolEmbedder(seed=5), index_type="Flat", step=2)

    def crash(*args, **kwargs):
        raise OSError("disk full (simulated)")

    # the blocks and embeddings are already written when the faiss file fails
    monkeypatch.setattr("realm_hf.index.backends.FaissBackend.save", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save_pretrained(destination)
    assert _leftovers(tmp_path) == []  # no half-written temporary directory
    survivor = RealmIndex.from_pretrained(destination)
    assert survivor.num_blocks == 20 and survivor.step == 1 and survivor.fingerprint == old.fingerprint

    # a first save that crashes leaves nothing at the destination
    with pytest.raises(OSError, match="simulated"):
        new.save_pretrained(tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists() and _leftovers(tmp_path) == []

    monkeypatch.undo()
    new.save_pretrained(destination)  # a complete save replaces the old index
    assert RealmIndex.from_pretrained(destination).step == 2
    assert sorted(os.listdir(tmp_path)) == ["index"]


def test_mismatched_index_is_refused_with_rebuild_instructions(tmp_path, embedder):
    RealmIndex.build(make_blocks(10), embedder, index_type="torch-exact").save_pretrained(tmp_path / "index")

    with pytest.raises(ValueError, match=r"embedding dim: index has 16, model expects 128") as err:
        RealmIndex.from_pretrained(tmp_path / "index", expected_dim=128)
    assert "realm-hf build-index --model" in str(err.value) and "RealmIndex.build(" in str(err.value)

    other = fingerprint_module(MeanPoolEmbedder(seed=9))
    with pytest.raises(ValueError, match=rf"built by {fingerprint_module(embedder)}, model has {other}"):
        RealmIndex.from_pretrained(tmp_path / "index", expected_fingerprint=other)

    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ValueError, match="format_version=99"):
        RealmIndex.from_pretrained(tmp_path / "index")
    manifest_path.write_text(json.dumps(manifest))

    os.remove(tmp_path / "index" / "embeddings.npy")
    with pytest.raises(FileNotFoundError, match="embeddings.npy"):
        RealmIndex.from_pretrained(tmp_path / "index")
    os.remove(manifest_path)
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        RealmIndex.from_pretrained(tmp_path / "index")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        RealmIndex.from_pretrained(tmp_path / "nowhere")


def test_missing_faiss_file_is_named(tmp_path, embedder):
    RealmIndex.build(make_blocks(10), embedder, index_type="Flat").save_pretrained(tmp_path / "index")
    os.remove(tmp_path / "index" / "index.faiss")
    with pytest.raises(FileNotFoundError, match="index.faiss"):
        RealmIndex.from_pretrained(tmp_path / "index")


def test_index_versions_of_one_corpus_share_its_block_files(tmp_path, embedder):
    # blocks read unchanged from a save_to_disk folder are hard-linked into each saved index, not copied: a run's
    # index versions store the corpus once; each directory stays complete (checksummed, loadable on its own)
    import datasets

    make_blocks(30).save_to_disk(tmp_path / "corpus")
    corpus = datasets.load_from_disk(tmp_path / "corpus")
    for step in (1, 2):
        RealmIndex.build(corpus, MeanPoolEmbedder(seed=step), index_type="Flat", step=step).save_pretrained(
            tmp_path / f"index-{step}"
        )
    arrow = [name for name in os.listdir(tmp_path / "corpus") if name.endswith(".arrow")]
    assert arrow
    for name in arrow:
        assert os.path.samefile(tmp_path / "corpus" / name, tmp_path / "index-1" / "blocks" / name)
        assert os.path.samefile(tmp_path / "corpus" / name, tmp_path / "index-2" / "blocks" / name)
    # deleting the corpus folder or a version leaves the others whole
    import shutil

    shutil.rmtree(tmp_path / "corpus")
    shutil.rmtree(tmp_path / "index-1")
    loaded = RealmIndex.from_pretrained(tmp_path / "index-2")
    assert loaded.get_blocks([3, 7]) == RealmIndex.build(make_blocks(30), MeanPoolEmbedder(seed=2)).get_blocks([3, 7])
    # a loaded index saved again links its own files; changed blocks are written anew
    loaded.save_pretrained(tmp_path / "again")
    assert os.path.samefile(tmp_path / "index-2" / "blocks" / arrow[0], tmp_path / "again" / "blocks" / arrow[0])
    subset = RealmIndex.build(loaded.blocks.select(range(10)), MeanPoolEmbedder(seed=2), index_type="Flat")
    subset.save_pretrained(tmp_path / "subset")
    assert len(RealmIndex.from_pretrained(tmp_path / "subset")) == 10
    assert not any(
        os.path.samefile(tmp_path / "again" / "blocks" / name, tmp_path / "subset" / "blocks" / name)
        for name in os.listdir(tmp_path / "subset" / "blocks") if os.path.exists(tmp_path / "again" / "blocks" / name)
    )
