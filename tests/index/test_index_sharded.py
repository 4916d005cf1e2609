"""Distributed: 2 real processes (gloo). The sharded top-k equals the unsharded one; a distributed build gathers."""

from __future__ import annotations

import os
import socket
import threading

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from realm_hf.index import RealmIndex, ShardedRealmIndex
from realm_hf.index.sharded import build_shard


pytest.importorskip("faiss")

WORLD_SIZE = 2


class _Embedder(nn.Module):
    """Mean-pooled fixed random embeddings (defined here so the spawned workers can import it)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 16)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(50, 16, generator=torch.Generator().manual_seed(0)))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch["attention_mask"].unsqueeze(-1).float()  # [N, L, 1]
        return (self.embedding(batch["input_ids"]) * mask).sum(1) / mask.sum(1)  # [N, D]


def _worker(rank: int, port: int, directory: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        full = RealmIndex.from_pretrained(directory)  # the unsharded reference, built by the test process

        # a distributed build: each rank embeds its contiguous shard, all ranks end with the whole matrix
        built = RealmIndex.build(full.blocks, _Embedder(), index_type="torch-exact", batch_size=8)
        np.testing.assert_allclose(built.embeddings, full.embeddings, rtol=1e-6, atol=1e-6)

        # ranks search different numbers of queries; exclusion uses global ids
        queries = torch.randn(5 - 2 * rank, 16, generator=torch.Generator().manual_seed(rank))  # [B_rank, D]
        _, top = full.search(queries, 12)
        exclude = [[int(top[i, 0]), int(top[i, 3])] for i in range(len(queries))]
        for sharded in (
            ShardedRealmIndex.from_index(full),
            ShardedRealmIndex.from_pretrained(directory, index_type="Flat"),
            ShardedRealmIndex.build(full.blocks, _Embedder(), index_type="HNSW16", batch_size=8),
        ):
            assert sharded.local.num_blocks in (len(full) // 2, len(full) - len(full) // 2)
            for k, excl in ((10, None), (10, exclude), (len(full), None)):
                expected_scores, expected_ids = full.search(queries, k, exclude=excl)
                scores, ids = sharded.search(queries, k, exclude=excl)
                assert torch.equal(ids, expected_ids), (rank, k, excl)
                torch.testing.assert_close(scores, expected_scores)
            assert sharded.get_blocks(ids) == full.get_blocks(ids)  # hits from the other shard too
            arrays = sharded.get_block_arrays(ids, ["block_id", "input_ids"])
            assert np.array_equal(arrays["block_id"], ids.numpy())
            # the whole index again, gathered from the shards (a collective)
            whole = sharded.gather()
            np.testing.assert_allclose(whole.embeddings, full.embeddings, rtol=1e-6, atol=1e-6)
            assert torch.equal(whole.search(queries, 10)[1], full.search(queries, 10)[1])
            assert whole.fingerprint == sharded.fingerprint == full.fingerprint
        # a shard built off the main thread (a background refresh of one rank's shard) runs no collective, and
        # keeps only the block ids of its rows
        results = {}
        worker = threading.Thread(target=lambda: results.update(
            shard=build_shard(full.blocks, _Embedder(), rank, WORLD_SIZE, index_type="torch-exact", batch_size=8)
        ))
        worker.start()
        worker.join()
        shard = results["shard"]
        assert shard.blocks.column_names == ["block_id"]
        assert np.array_equal(shard.embeddings, sharded.local.embeddings)
        assert np.array_equal(shard.block_ids, sharded.local.block_ids)
        with pytest.raises(ValueError, match="larger than the number of blocks"):
            sharded.search(queries, len(full) + 1)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sharded_search_equals_unsharded(tmp_path):
    from index_helpers import make_blocks

    RealmIndex.build(make_blocks(41, seed=4), _Embedder(), index_type="Flat").save_pretrained(tmp_path / "full")
    mp.spawn(_worker, args=(_free_port(), str(tmp_path / "full")), nprocs=WORLD_SIZE, join=True)


def test_sharded_index_needs_distributed(tmp_path):
    from index_helpers import make_blocks

    index = RealmIndex.build(make_blocks(5), _Embedder(), index_type="torch-exact")
    with pytest.raises(RuntimeError, match="torch.distributed to be initialized"):
        ShardedRealmIndex(index, index.blocks, len(index))
