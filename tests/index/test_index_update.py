"""add / remove keep the blocks, the embeddings and every backend consistent, without a full rebuild."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from index_helpers import make_blocks

from realm_hf.index import RealmIndex


pytest.importorskip("faiss")


def _check_consistent(index: RealmIndex, atol: float = 1e-4) -> None:
    assert len(index.blocks) == len(index.embeddings) == index.backend.ntotal == index.manifest.num_blocks
    # each stored row is its block's embedding: an exact search for row i's vector scores row i like the matmul
    rows = np.arange(0, len(index.embeddings), 7)
    vectors = torch.from_numpy(np.asarray(index.embeddings[rows], dtype=np.float32))
    scores, ids = index.search(vectors, 3)
    found = index.get_blocks(ids, columns=["block_id", "text"])
    assert found["text"] == [[f"block {i}" for i in row] for row in found["block_id"]]
    expected = (vectors @ torch.from_numpy(np.asarray(index.embeddings, dtype=np.float32)).T).topk(3).values
    torch.testing.assert_close(scores, expected, rtol=atol, atol=atol)


@pytest.mark.parametrize("index_type", ["torch-exact", "Flat", "SQfp16", "HNSW16", "IVF8,Flat", "IVF8,PQ4x4,RFlat"])
def test_add_then_remove(tmp_path, embedder, index_type, caplog):
    all_blocks = make_blocks(90, seed=3)
    first, extra = all_blocks.select(range(60)), all_blocks.select(range(60, 90))
    search_params = {"nprobe": 8} if "IVF" in index_type else None
    if index_type.endswith("RFlat"):
        search_params["k_factor"] = 50.0  # refine over everything: results are exact
    index = RealmIndex.build(first, embedder, index_type=index_type, search_params=search_params)
    atol = 5e-3 if index_type == "SQfp16" else 1e-4  # fp16 codes are lossy

    # the new blocks keep their text but get fresh ids after the current largest one
    extra = extra.map(lambda row: {"block_id": row["block_id"] + 1000})
    new_ids = index.add(extra, embedder)
    assert new_ids.tolist() == list(range(60, 90))
    assert index.get_blocks(new_ids[:2], columns=["text"])["text"] == ["block 60", "block 61"]
    reference = RealmIndex.build(all_blocks, embedder, index_type="torch-exact")
    np.testing.assert_allclose(np.asarray(index.embeddings, np.float32), reference.embeddings, rtol=1e-3, atol=1e-3)
    _check_consistent(index, atol)

    removed = [0, 5, 59, 60, 89]
    caplog.set_level("INFO", logger="realm_hf")
    index.remove(torch.tensor(removed))
    rebuilt = "cannot remove vectors in place; re-adding" in caplog.text
    assert rebuilt == (index_type in ("HNSW16", "IVF8,PQ4x4,RFlat"))  # the others remove in place
    assert index.num_blocks == 85 and not set(index.block_ids.tolist()) & set(removed)
    _check_consistent(index, atol)
    queries = torch.from_numpy(np.asarray(reference.embeddings[removed], dtype=np.float32))
    _, ids = index.search(queries, 10)
    assert not set(ids.reshape(-1).tolist()) & set(removed)
    reference.remove(removed)
    _, exact = reference.search(queries, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.tolist(), exact.tolist())])
    assert overlap >= (0.9 if index_type == "SQfp16" else 1.0)

    with pytest.raises(KeyError, match="5"):
        index.remove([5])
    # the updated index survives a round trip and keeps growing from the largest id
    index.save_pretrained(tmp_path / "index")
    loaded = RealmIndex.from_pretrained(tmp_path / "index")
    _check_consistent(loaded, atol)
    assert loaded.add(make_blocks(2), embedder).tolist() == [89, 90]


def test_add_articles_with_tokenizer(tmp_path, embedder):
    from transformers import BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "a", "b", "c", "title"]) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab))
    articles = [{"id": "x", "title": "title", "text": "A b c. C b a."}, {"id": "y", "title": "b", "text": "a a."}]
    index = RealmIndex.build(articles, embedder, tokenizer, index_type="Flat")
    before = index.num_blocks
    new_ids = index.add(datasets.Dataset.from_list(articles[:1]), embedder, tokenizer)
    assert new_ids.tolist() == list(range(before, before + len(new_ids)))
    rows = index.get_blocks(new_ids, columns=["article_id", "title"])
    assert set(rows["article_id"]) == {"x"} and set(rows["title"]) == {"title"}
