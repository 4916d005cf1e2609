"""RealmIndex search: faiss backends measured against exact search, exclusion, input validation, building."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from index_helpers import MeanPoolEmbedder, make_blocks
from torch import nn

from realm_hf.index import RealmIndex, fingerprint_module


pytest.importorskip("faiss")


def _index(vectors: np.ndarray, index_type: str, **kwargs) -> RealmIndex:
    blocks = datasets.Dataset.from_dict({"text": [f"block {i}" for i in range(len(vectors))]})
    return RealmIndex.from_embeddings(blocks, vectors, index_type=index_type, **kwargs)


def _recall(reference: torch.Tensor, found: torch.Tensor) -> float:
    """Mean fraction of the exact top-k ids that the index also returned."""
    return float(np.mean([len(set(a) & set(b)) / len(a) for a, b in zip(reference.tolist(), found.tolist())]))


def test_faiss_flat_equals_torch_exact_equals_brute_force():
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((1500, 24)).astype(np.float32)
    queries = rng.standard_normal((12, 24)).astype(np.float32)
    exact = _index(vectors, "torch-exact")
    exact.backend.chunk_size = 128  # exercise the chunked top-k merge
    flat = _index(vectors, "Flat")

    exact_scores, exact_ids = exact.search(torch.from_numpy(queries), 10)
    flat_scores, flat_ids = flat.search(queries, 10)
    brute = queries @ vectors.T  # [B, N]
    brute_ids = np.argsort(-brute, axis=1)[:, :10]

    assert exact_ids.dtype == torch.int64 and exact_scores.dtype == torch.float32
    assert exact_ids.shape == flat_ids.shape == (12, 10)
    assert torch.equal(exact_ids, flat_ids)
    assert np.array_equal(exact_ids.numpy(), brute_ids)
    torch.testing.assert_close(exact_scores, flat_scores, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(exact_scores, torch.from_numpy(np.take_along_axis(brute, brute_ids, 1)))
    assert bool((exact_scores[:, :-1] >= exact_scores[:, 1:]).all())  # descending


@pytest.mark.parametrize(
    "index_type, search_params, min_recall",
    [
        ("SQfp16", None, 0.97),
        ("HNSW32", {"efSearch": 32}, 0.9),
        ("IVF32,Flat", {"nprobe": 8}, 0.9),
        ("IVF32,PQ32x4", None, 0.45),  # measured 0.63; a broken index scores ~0 (random ids) or ~0.13 (right cluster)
        ("IVF32,PQ16x4,RFlat", None, 0.7),  # measured 0.81
        ("IVF32,PQ8x4,Refine(Flat)", {"k_factor": 10}, 0.9),
    ],
)
def test_approximate_recall_against_exact(clustered_vectors, index_type, search_params, min_recall):
    vectors, queries = clustered_vectors
    _, reference = _index(vectors, "torch-exact").search(queries, 10)
    index = _index(vectors, index_type, search_params=search_params)
    _, found = index.search(queries, 10)
    assert found.shape == (len(queries), 10) and bool((found >= 0).all())
    assert _recall(reference, found) >= min_recall, index.backend.search_params


def test_ivf_short_lists_are_completed_exactly(clustered_vectors):
    vectors, queries = clustered_vectors
    index = _index(vectors[:300], "IVF64,Flat", search_params={"nprobe": 1})  # ~5 vectors per list: too few
    scores, ids = index.search(queries, 20)
    assert bool((ids >= 0).all()) and bool(torch.isfinite(scores).all())
    assert all(len(set(row)) == 20 for row in ids.tolist())


@pytest.mark.parametrize("index_type", ["torch-exact", "Flat", "HNSW32"])
def test_exclusion_removes_ids_and_keeps_k(clustered_vectors, index_type):
    vectors, queries = clustered_vectors
    index = _index(vectors, index_type)
    queries = torch.from_numpy(queries[:8])
    _, full = index.search(queries, 13)  # [8, 13]

    # a [B] tensor: drop each query's best hit
    _, ids = index.search(queries, 10, exclude=full[:, 0])
    assert ids.shape == (8, 10)
    assert torch.equal(ids, full[:, 1:11])

    # ragged lists, including an empty one and ids that are not hits at all
    ragged = [[int(full[i, 0]), int(full[i, 2])] if i % 2 else [] for i in range(8)]
    ragged[0] = [123456789]
    _, ids = index.search(queries, 10, exclude=ragged)
    for row, excluded, reference in zip(ids.tolist(), ragged, full.tolist()):
        assert len(row) == 10 and not set(row) & set(excluded)
        assert row == [i for i in reference if i not in excluded][:10]

    # a [B, E] tensor padded with -1
    padded = torch.full((8, 3), -1, dtype=torch.long)
    padded[:, :2] = full[:, :2]
    _, ids = index.search(queries, 10, exclude=padded)
    assert torch.equal(ids, full[:, 2:12])


def test_search_rejects_bad_input():
    index = _index(np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32), "torch-exact")
    good = torch.zeros(2, 8)
    with pytest.raises(ValueError, match=r"dim 7 but the index has dim 8"):
        index.search(torch.zeros(2, 7), 3)
    with pytest.raises(ValueError, match=r"\[B, D\].*query_embeds\[None\]"):
        index.search(torch.zeros(8), 3)
    with pytest.raises(ValueError, match=r"k=0"):
        index.search(good, 0)
    with pytest.raises(ValueError, match=r"k=21 is larger than the number of blocks in the index \(20\)"):
        index.search(good, 21)
    with pytest.raises(ValueError, match=r"one entry per query \(B=2\)"):
        index.search(good, 3, exclude=[[1]])
    with pytest.raises(ValueError, match=r"fewer than k=20"):
        index.search(good, 20, exclude=[[1], []])
    with pytest.raises(ValueError, match=r"index_type 'nonsense' is not an index type realm_hf builds"):
        _index(np.zeros((4, 8), np.float32), "nonsense")
    with pytest.raises(ValueError, match=r"efSearch"):
        _index(np.zeros((4, 8), np.float32), "Flat", search_params={"nprobe": 3})


class TwoTowerRetriever(nn.Module):
    """Shaped like RealmRetriever for the index: `embed_documents(...)` and a `document_embedder` module."""

    def __init__(self) -> None:
        super().__init__()
        self.query_embedder = MeanPoolEmbedder(seed=1)
        self.document_embedder = MeanPoolEmbedder(seed=2)

    def embed_documents(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self.document_embedder({"input_ids": input_ids, "attention_mask": attention_mask})


def test_build_sorted_batches_match_unpadded_embeddings(embedder):
    blocks = make_blocks(37)
    index = RealmIndex.build(blocks, embedder, index_type="Flat", batch_size=4, step=7)
    with torch.no_grad():
        one_by_one = torch.cat(
            [
                embedder(
                    {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
                )
                for ids in blocks["input_ids"]
            ]
        ).numpy()  # [N, D], no padding at all
    np.testing.assert_allclose(index.embeddings, one_by_one, rtol=1e-5, atol=1e-6)
    assert index.fingerprint == fingerprint_module(embedder)
    assert index.step == 7 and index.num_blocks == 37 and index.dim == 16
    assert embedder.training  # the module's mode is restored

    # a retriever-like object is wrapped through embed_documents; the fingerprint is that of its document tower
    retriever = TwoTowerRetriever()
    index = RealmIndex.build(blocks, retriever, batch_size=5, dtype=torch.bfloat16, embedding_dtype="float16")
    assert index.embeddings.dtype == np.float16
    assert index.fingerprint == fingerprint_module(retriever.document_embedder) != fingerprint_module(retriever)
    expected = RealmIndex.build(blocks, retriever.document_embedder).embeddings
    np.testing.assert_allclose(index.embeddings.astype(np.float32), expected, rtol=0.05, atol=0.05)


def test_get_blocks_returns_rows_shaped_like_the_ids(embedder):
    blocks = make_blocks(30)
    index = RealmIndex.build(blocks, embedder, index_type="torch-exact")
    _, ids = index.search(torch.from_numpy(np.asarray(index.embeddings[:3])), 4)  # [3, 4]
    rows = index.get_blocks(ids)
    assert set(rows) >= {"block_id", "title", "text", "input_ids", "token_type_ids"}
    assert len(rows["text"]) == 3 and all(len(r) == 4 for r in rows["text"])
    assert rows["block_id"] == ids.tolist()
    assert rows["text"] == [[f"block {i}" for i in row] for row in ids.tolist()]
    assert index.get_blocks([5, 6], columns=["text"]) == {"text": ["block 5", "block 6"]}
    with pytest.raises(KeyError, match="999"):
        index.get_blocks([1, 999])


def test_a_faiss_index_asked_for_a_gpu_that_faiss_lacks_says_so_once_and_searches_on_the_cpu(caplog):
    import faiss

    if hasattr(faiss, "index_cpu_to_all_gpus") and faiss.get_num_gpus() > 0:
        pytest.skip("faiss has GPUs here: the index moves to them")
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((50, 8)).astype(np.float32)
    with caplog.at_level("WARNING", logger="realm_hf.index.backends"):
        # a trainer on a GPU loads a refreshed index at every swap: one warning, not one per index
        indexes = [_index(vectors, "Flat", device="cuda:7") for _ in range(3)]
    said = [r for r in caplog.records if "faiss has no GPUs" in r.getMessage()]
    assert len(said) == 1 and "cuda:7" in said[0].getMessage()
    scores, ids = indexes[-1].search(vectors[:2], 1)
    assert ids[:, 0].tolist() == np.argmax(vectors[:2] @ vectors.T, axis=1).tolist()


def test_built_in_chunks_from_a_selection_the_embeddings_are_those_of_each_block(embedder, monkeypatch):
    """The build reads the wordpieces from Arrow in chunks (`CHUNK_ROWS`) and pads batches with numpy: the result is
    each block's own embedding, in the dataset's row order, also for a selection (an indices mapping) of rows."""
    import realm_hf.index.embedding as embedding

    blocks = make_blocks(40).select([39, 3, 17, 0, 25, 8, 31, 12, 5, 22, 2, 36])  # rows of another dataset
    monkeypatch.setattr(embedding, "CHUNK_ROWS", 5)  # chunks of 5, 5 and 2 rows
    built = embedding.embed_blocks(blocks, embedder, batch_size=3)
    with torch.no_grad():
        one_by_one = torch.cat(
            [
                embedder({"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)})
                for ids in blocks["input_ids"]
            ]
        ).numpy()  # [N, D]
    np.testing.assert_allclose(built, one_by_one, rtol=1e-5, atol=1e-6)


def test_token_columns_pad_like_pad_batch():
    from realm_hf.index.embedding import TokenColumns, pad_batch

    blocks = make_blocks(30, max_len=40).select(list(range(29, -1, -2)))
    rows = np.array([4, 0, 14, 7])
    fast = TokenColumns(blocks).batch(rows, pad_token_id=9)
    reference = pad_batch(blocks[rows.tolist()], pad_token_id=9)
    assert fast.keys() == reference.keys()
    for name in reference:
        assert torch.equal(fast[name], reference[name]), name
