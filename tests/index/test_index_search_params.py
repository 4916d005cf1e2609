"""RealmIndex.set_search_params: search-time knobs of a built index, measured against exact search, persisted."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from realm_hf.index import RealmIndex


pytest.importorskip("faiss")

K = 10


def _index(vectors: np.ndarray, index_type: str) -> RealmIndex:
    blocks = datasets.Dataset.from_dict({"text": [f"block {i}" for i in range(len(vectors))]})
    return RealmIndex.from_embeddings(blocks, vectors, index_type=index_type)


def _recall_curve(clustered_vectors, index_type: str, name: str, values: list, **fixed) -> list[float]:
    """Recall@K vs exact search of one index at each value of the search parameter `name` (built once)."""
    vectors, queries = clustered_vectors
    _, reference = _index(vectors, "torch-exact").search(queries, K)
    index = _index(vectors, index_type)
    curve = []
    for value in values:
        assert index.set_search_params(**fixed, **{name: value}).get(name, 0) == value  # rerank=0: off, not listed
        _, found = index.search(queries, K)
        curve.append(float(np.mean([len(set(a) & set(b)) / K for a, b in zip(reference.tolist(), found.tolist())])))
    return curve


@pytest.mark.parametrize(
    "index_type, name, values, fixed",
    [
        # measured on the 4000 x 32 clustered set: 0.83 / 0.96 / 0.98
        ("HNSW8", "efSearch", [1, 16, 256], {}),
        # 0.88 / 1.0 / 1.0: all 64 lists probed is exact search
        ("IVF64,Flat", "nprobe", [1, 4, 64], {}),
        # 0.18 / 0.64 / 1.0: re-scoring K * 16 of 4000 candidates exactly recovers the exact top-K
        ("IVF64,PQ8x4,RFlat", "k_factor", [1, 4, 16], {"nprobe": 64}),
        # the same codes, candidates re-scored with the stored embeddings instead of refinement codes: 0.18 / 0.64 / 1.0
        ("IVF64,PQ8x4", "rerank", [0, 40, 160], {"nprobe": 64}),
    ],
)
def test_recall_rises_with_the_search_parameter(clustered_vectors, index_type, name, values, fixed):
    curve = _recall_curve(clustered_vectors, index_type, name, values, **fixed)
    assert all(later >= earlier - 0.01 for earlier, later in zip(curve, curve[1:])), curve
    assert curve[-1] >= curve[0] + 0.1 and curve[-1] >= 0.95, curve


def test_set_search_params_keeps_the_others_and_persists(tmp_path, clustered_vectors):
    vectors, queries = clustered_vectors
    index = _index(vectors[:2000], "IVF32,PQ8x4,RFlat")
    assert set(index.search_params) == {"nprobe", "k_factor"}
    assert index.set_search_params(nprobe=3) == {"nprobe": 3, "k_factor": 4.0}
    assert index.set_search_params(k_factor=8) == {"nprobe": 3, "k_factor": 8.0}
    _, ids = index.search(queries, K)

    index.save_pretrained(tmp_path / "index")
    loaded = RealmIndex.from_pretrained(tmp_path / "index")
    assert loaded.search_params == {"nprobe": 3, "k_factor": 8.0}
    assert torch.equal(loaded.search(queries, K)[1], ids)
    overridden = RealmIndex.from_pretrained(tmp_path / "index", search_params={"nprobe": 32})
    assert overridden.search_params == {"nprobe": 32, "k_factor": 8.0}


def test_rerank_returns_exact_scores_and_persists(tmp_path, clustered_vectors):
    vectors, queries = clustered_vectors
    index = _index(vectors[:2000], "IVF16,PQ4x4")
    assert "rerank" not in index.search_params  # off unless asked for (the "compressed" preset asks)
    coarse_scores, _ = index.search(queries, K)
    assert index.set_search_params(rerank=50) == {"nprobe": 8, "rerank": 50}
    scores, ids = index.search(queries, K)
    stored = torch.einsum("bd,bkd->bk", torch.from_numpy(queries), index.get_embeddings(ids))
    torch.testing.assert_close(scores, stored)  # the stored embeddings' inner products, not the PQ estimates
    assert not torch.allclose(coarse_scores, scores, atol=1e-3)
    assert bool((scores[:, :-1] >= scores[:, 1:]).all())
    # every list probed and every block a candidate: exactly the exact top K
    index.set_search_params(nprobe=16, rerank=2000)
    _, exact_ids = _index(vectors[:2000], "torch-exact").search(queries, K)
    assert torch.equal(index.search(queries, K)[1], exact_ids)
    index.save_pretrained(tmp_path / "index")
    assert RealmIndex.from_pretrained(tmp_path / "index").search_params == {"nprobe": 16, "rerank": 2000}
    # exclusion still leaves K hits per query and never returns an excluded block
    top = exact_ids[:, 0]
    _, kept = index.search(queries, K, exclude=top)
    assert not bool((kept == top[:, None]).any())
    assert index.set_search_params(rerank=0) == {"nprobe": 16}


@pytest.mark.parametrize("bad", [-1, 2.5, True, "50"])
def test_a_bad_rerank_is_refused_and_changes_nothing(clustered_vectors, bad):
    vectors, _ = clustered_vectors
    index = _index(vectors[:2000], "IVF16,Flat")
    with pytest.raises(ValueError, match=rf"rerank must be an integer >= 0 .*got {bad!r}"):
        index.set_search_params(nprobe=2, rerank=bad)
    assert index.search_params == {"nprobe": 8}


def test_set_search_params_rejects_what_does_not_apply(clustered_vectors):
    vectors, queries = clustered_vectors
    index = _index(vectors[:2000], "IVF32,Flat")
    before = index.search_params
    _, ids = index.search(queries, K)
    with pytest.raises(ValueError, match=r"\['efSearch'\] do not apply"):
        index.set_search_params(nprobe=1, efSearch=64)
    assert index.search_params == before
    assert torch.equal(index.search(queries, K)[1], ids)  # nprobe=1 did not leak into the faiss index

    exact = _index(vectors[:100], "torch-exact")
    assert exact.set_search_params() == {} and exact.search_params == {}
    with pytest.raises(ValueError, match="takes no search parameters"):
        exact.set_search_params(nprobe=4)
