"""The `index_type="compressed"` preset: MIPS->L2 transform + IVF + residual PQ, checked against exact search."""

from __future__ import annotations

import json
import os

import datasets
import numpy as np
import pytest
import torch
from index_helpers import MeanPoolEmbedder, make_blocks

from realm_hf.index import RealmIndex
from realm_hf.index.compressed import CODE_BYTES, DEFAULT_RERANK, MipsToL2, compressed_faiss_index
from realm_hf.training.validation import check_index_type


faiss = pytest.importorskip("faiss")

K = 5


def _varied_norms(num: int = 3000, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Clustered vectors whose norms vary 6x (0.5 to 3 times the cluster scale), and 64 queries of the same clusters."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((20, dim)).astype(np.float32)
    vectors = centers[rng.integers(0, 20, num)] + 0.4 * rng.standard_normal((num, dim)).astype(np.float32)
    vectors *= rng.uniform(0.5, 3.0, (num, 1)).astype(np.float32)
    queries = centers[rng.integers(0, 20, 64)] + 0.4 * rng.standard_normal((64, dim)).astype(np.float32)
    return vectors, queries


def _index(vectors: np.ndarray, index_type: str = "compressed", **kwargs) -> RealmIndex:
    blocks = datasets.Dataset.from_dict({"text": [f"block {i}" for i in range(len(vectors))]})
    return RealmIndex.from_embeddings(blocks, vectors, index_type=index_type, **kwargs)


def _recall(found: torch.Tensor, reference: torch.Tensor) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found.tolist(), reference.tolist())]))


@pytest.fixture(scope="module")
def varied():
    vectors, queries = _varied_norms()
    return vectors, queries, _index(vectors)


def test_the_codes_agree_with_exact_search_on_vectors_of_varied_norms(varied):
    vectors, queries, index = varied
    exact_scores, exact_ids = _index(vectors, "torch-exact").search(queries, K)
    index.set_search_params(rerank=0)  # the PQ codes alone
    scores, ids = index.search(queries, K)
    index.set_search_params(rerank=DEFAULT_RERANK)
    # measured 0.89, as IVF12,PQ32 over inner products; L2 search without the transform finds none of them (0.0)
    assert _recall(ids, exact_ids) >= 0.85
    # the scores are inner products (turned back from L2 distances), descending, close to the exact ones
    true_scores = torch.einsum("bd,bkd->bk", torch.from_numpy(queries), index.get_embeddings(ids))
    error = (scores - true_scores).abs() / exact_scores.abs().max()
    assert float(error.median()) < 0.02 and float(error.max()) < 0.25  # measured 0.008 / 0.11 (codes of tails)
    assert bool((scores[:, :-1] >= scores[:, 1:]).all())


def test_the_default_rerank_recovers_the_exact_top_k(varied):
    """The preset re-scores its best DEFAULT_RERANK candidates with the stored embeddings: the codes only have to
    bring the true top K among them."""
    vectors, queries, index = varied
    exact_scores, exact_ids = _index(vectors, "torch-exact").search(queries, K)
    scores, ids = index.search(queries, K)
    assert index.search_params["rerank"] == DEFAULT_RERANK
    assert _recall(ids, exact_ids) >= 0.98  # the codes alone: 0.89 (test above)
    torch.testing.assert_close(scores, exact_scores, rtol=1e-4, atol=1e-4)  # exact inner products now


def test_the_transform_is_what_makes_varied_norms_work(varied):
    """The same faiss structure over the raw vectors ranks by L2 distance, which is not the inner product ranking."""
    vectors, queries, _ = varied
    _, exact_ids = _index(vectors, "torch-exact").search(queries, K)
    raw = faiss.IndexFlatL2(vectors.shape[1])
    raw.add(vectors)
    _, l2_ids = raw.search(queries, K)
    assert _recall(torch.from_numpy(l2_ids), exact_ids) < 0.1  # measured 0.0


def test_layout_and_search_params(varied):
    vectors, _, index = varied
    assert index.index_type == "compressed"
    assert index.search_params == {"nprobe": 8, "rerank": DEFAULT_RERANK}
    assert index.manifest.max_norm == pytest.approx(float(np.linalg.norm(vectors, axis=1).max()))
    # ids live in the IVF lists (no IDMap2 wrapper with 8 more bytes per block); codes are CODE_BYTES per block
    assert isinstance(faiss.downcast_index(index.backend.index), faiss.IndexPreTransform)
    ivf = faiss.extract_index_ivf(index.backend.index)
    assert ivf.code_size == CODE_BYTES and ivf.metric_type == faiss.METRIC_L2 and ivf.by_residual
    # each block more costs its code and its id in the saved file: measured, not the constants added up; with the
    # centroids and codebooks that is <= 64 B/block from ~200k blocks (benchmarks/results/index.md)
    before = len(faiss.serialize_index(index.backend.index))
    grown = faiss.deserialize_index(faiss.serialize_index(index.backend.index))
    grown.add(index.backend.transform.documents(vectors[:1000]))
    assert (len(faiss.serialize_index(grown)) - before) / 1000 == CODE_BYTES + 8 <= 60


@pytest.mark.parametrize("dim", [16, 128, 384])
def test_the_placement_keeps_inner_products(dim):
    index = compressed_faiss_index(dim, 10_000)  # the owner: a downcast proxy alone would dangle
    placement = faiss.downcast_VectorTransform(faiss.downcast_index(index).chain.at(0))
    vectors = np.random.default_rng(0).standard_normal((8, dim + 1)).astype(np.float32)
    placed = placement.apply(vectors)  # [8, 52 * dsub]
    assert placed.shape[1] % CODE_BYTES == 0
    np.testing.assert_allclose(placed @ placed.T, vectors @ vectors.T, rtol=1e-5, atol=1e-4)
    # the extra coordinate (the norm) has the last sub-vector to itself
    dsub = placed.shape[1] // CODE_BYTES
    np.testing.assert_array_equal(placed[:, -dsub:], np.pad(vectors[:, -1:], ((0, 0), (0, dsub - 1))))


def test_round_trip(tmp_path, varied):
    vectors, queries, index = varied
    index.set_search_params(nprobe=3)
    scores, ids = index.search(queries, K)
    index.save_pretrained(tmp_path / "index")
    with open(os.path.join(tmp_path, "index", "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["index_type"] == "compressed" and manifest["search_params"] == {"nprobe": 3, "rerank": 100}
    assert manifest["max_norm"] == pytest.approx(index.manifest.max_norm)
    loaded = RealmIndex.from_pretrained(tmp_path / "index")
    assert loaded.index_type == "compressed" and loaded.search_params == {"nprobe": 3, "rerank": 100}
    loaded_scores, loaded_ids = loaded.search(queries, K)
    torch.testing.assert_close(loaded_ids, ids)
    torch.testing.assert_close(loaded_scores, scores)
    overridden = RealmIndex.from_pretrained(tmp_path / "index", search_params={"nprobe": 8, "rerank": 0})
    assert overridden.search_params == {"nprobe": 8}
    index.set_search_params(nprobe=8)


def test_manifest_without_max_norm_is_refused(tmp_path):
    vectors, _ = _varied_norms(num=600)
    _index(vectors).save_pretrained(tmp_path / "index")
    path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["max_norm"] = None
    path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="max_norm.*rebuild"):
        RealmIndex.from_pretrained(tmp_path / "index")


def test_wrong_dims_are_named(varied):
    vectors, queries, index = varied
    with pytest.raises(ValueError, match="dim 33 but the index has dim 32"):
        index.search(np.zeros((2, 33), dtype=np.float32), K)
    with pytest.raises(ValueError, match=r"must have shape \[N, 32\].*got \[2, 31\]"):
        index.backend.add(np.zeros((2, 31), np.float32), np.array([10**6, 10**6 + 1]), None, None)
    with pytest.raises(ValueError, match=r"shape \[N, 32\]"):
        MipsToL2(32, 1.0).queries(np.zeros((4,), np.float32))
    with pytest.raises(ValueError, match=r"embeddings must have shape \[320, D\], got \[320\]"):
        _index(vectors[:10].reshape(-1))


def test_too_small_a_corpus_is_refused():
    with pytest.raises(ValueError, match="at least 256 blocks.*'Flat'"):
        _index(np.ones((100, 8), dtype=np.float32))


def test_add_and_remove_keep_ids(caplog):
    embedder = MeanPoolEmbedder(dim=16)
    index = RealmIndex.build(make_blocks(1000), embedder, index_type="compressed", batch_size=256)
    new_ids = index.add(make_blocks(500, seed=1), embedder, batch_size=256)
    assert index.num_blocks == 1500 and new_ids.tolist() == list(range(1000, 1500))
    index.remove(np.arange(0, 1000, 2))
    queries = torch.from_numpy(np.asarray(index.embeddings[::23], dtype=np.float32))  # [44, 16]
    exact = RealmIndex.from_embeddings(index.blocks, np.asarray(index.embeddings), index_type="torch-exact")
    _, exact_ids = exact.search(queries, K)
    _, ids = index.search(queries, K)
    assert _recall(ids, exact_ids) >= 0.8  # measured 0.87
    assert not bool(torch.isin(ids, torch.arange(0, 1000, 2)).any())
    # a vector longer than the build's max norm cannot be placed exactly: said, not silently mis-ranked
    with caplog.at_level("WARNING"):
        index.backend.add(4 * np.asarray(index.embeddings[:1]), np.array([10**6]), None, None)
    assert "longer than the norm M" in caplog.text


def test_the_preset_the_cli_accepts_finds_what_exact_search_finds(tmp_path, varied):
    """`--index-type compressed` passes the CLI's check, and the index it names, saved and loaded as `realm-hf
    build-index` and `realm-hf search` do, returns the exact top 10 of 3000 clustered blocks of varied norms (recall
    measured against exact search, not assumed)."""
    check_index_type("compressed")
    vectors, queries, built = varied  # [3000, 32], [64, 32], the preset's index
    built.save_pretrained(tmp_path / "index")
    index = RealmIndex.from_pretrained(tmp_path / "index")
    assert index.index_type == "compressed" and index.search_params == {"nprobe": 8, "rerank": DEFAULT_RERANK}
    k = 10
    _, exact_ids = _index(vectors, "torch-exact").search(queries, k)
    _, ids = index.search(queries, k)
    recall = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ids.tolist(), exact_ids.tolist())]))
    assert recall >= 0.95, recall  # measured 1.0 (the codes alone: 0.89 at k=5, test above)
