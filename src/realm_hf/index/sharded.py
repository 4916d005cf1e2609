"""`ShardedRealmIndex`: each rank searches a contiguous shard; the global top-k is merged with all_gather.

Use it when the embeddings (or the faiss structure) do not fit one device. Every rank keeps the whole blocks
dataset, which is memory-mapped Arrow and costs no RAM, so [`ShardedRealmIndex.get_blocks`] works for any hit.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import datasets
import numpy as np
import torch

from ..corpus.store import BlockStore
from .embedding import collective_device, distributed_info, embed_blocks, resolve_fingerprint, shard_bounds
from .exclusion import normalize_exclude
from .manifest import IndexManifest
from .mips import RealmIndex, build_inputs
from .storage import read_index_files


logger = logging.getLogger(__name__)


def _all_gather_padded(tensor: torch.Tensor, rows: int, world_size: int) -> torch.Tensor:
    """all_gather a `[n, ...]` tensor whose `n` differs by rank, padded to `rows`: returns `[W, rows, ...]`."""
    device = collective_device()
    padded = torch.zeros((rows, *tensor.shape[1:]), dtype=tensor.dtype, device=device)
    padded[: len(tensor)] = tensor.to(device)
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    torch.distributed.all_gather(gathered, padded)
    return torch.stack(gathered).cpu()


def _all_gather_sizes(values: list[int], world_size: int) -> torch.Tensor:
    """Every rank's `values` as a `[W, len(values)]` long tensor."""
    local = torch.tensor([values], dtype=torch.long)  # [1, V]
    return _all_gather_padded(local, 1, world_size)[:, 0]  # [W, V]


def build_shard(
    blocks: datasets.Dataset,
    embedder: Any,
    rank: int,
    world_size: int,
    index_type: str = "Flat",
    batch_size: int = 64,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    pad_token_id: int = 0,
    fingerprint: str | None = None,
    step: int | None = None,
    search_params: dict[str, Any] | None = None,
) -> RealmIndex:
    r"""
    The [`RealmIndex`] of shard `rank` of `world_size`: the contiguous rows `[N*r/W, N*(r+1)/W)` of `blocks`,
    embedded here (no collective: also in a background builder) and indexed with their global block ids. The shard
    keeps only the `block_id` column of its rows (a saved shard holds ids and vectors, never the text, which
    [`ShardedRealmIndex`] reads from the whole corpus).

    Args:
        blocks (`datasets.Dataset`): The whole corpus (every rank passes the same), with a `block_id` column.
        embedder: A `RealmRetriever` or `embed_fn(batch) -> [N, D]`, as in [`RealmIndex.build`].
        rank (`int`), world_size (`int`): Which shard.
        index_type, batch_size, device, dtype, pad_token_id, fingerprint, step, search_params: as in
            [`RealmIndex.build`].
    """
    if "block_id" not in blocks.column_names:
        raise ValueError(f"blocks need a block_id column, got {blocks.column_names}; use split_into_blocks.")
    start, stop = shard_bounds(len(blocks), rank, world_size)
    rows = blocks.select(range(start, stop))
    embeddings = embed_blocks(
        blocks, embedder, batch_size, device=device, dtype=dtype, pad_token_id=pad_token_id, shard=(rank, world_size)
    )  # [n, D]
    logger.info("Shard %d/%d: blocks rows %d..%d of %d", rank, world_size, start, stop, len(blocks))
    return RealmIndex.from_embeddings(
        rows.select_columns(["block_id"]),
        embeddings,
        index_type=index_type,
        fingerprint=fingerprint if fingerprint is not None else resolve_fingerprint(embedder),
        step=step,
        search_params=search_params,
        device=device,
    )


class ShardedRealmIndex:
    r"""
    A [`RealmIndex`] split over the ranks of an initialized `torch.distributed` process group (gloo on CPU, NCCL
    on GPU, e.g. under `accelerate launch`). Rank `r` holds the contiguous rows `[N*r/W, N*(r+1)/W)` with their
    global block ids. `search` is a collective: every rank must call it (with its own queries, any batch size).

    Args:
        local ([`RealmIndex`]): This rank's shard.
        blocks (`datasets.Dataset`): All blocks (memory-mapped), for `get_blocks`.
        num_blocks (`int`): Blocks over all shards.
    """

    def __init__(self, local: RealmIndex, blocks: datasets.Dataset, num_blocks: int) -> None:
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            raise RuntimeError(
                "ShardedRealmIndex needs torch.distributed to be initialized (run under `accelerate launch` or "
                "`torchrun`, or call torch.distributed.init_process_group); use RealmIndex on a single process."
            )
        self.local = local
        self.store = BlockStore(blocks)
        self.num_blocks = int(num_blocks)
        self.rank, self.world_size = distributed_info()

    @property
    def dim(self) -> int:
        return self.local.dim

    @property
    def manifest(self) -> IndexManifest:
        return self.local.manifest

    def __len__(self) -> int:
        return self.num_blocks

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, shard={self.rank}/{self.world_size} "
            f"with {self.local.num_blocks} blocks, index_type={self.local.index_type!r})"
        )

    @classmethod
    def from_index(
        cls,
        index: RealmIndex,
        index_type: str | None = None,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
    ) -> ShardedRealmIndex:
        r"""
        Keep this rank's contiguous shard of a full index (the shard's search structure is built from its rows).

        Args:
            index ([`RealmIndex`]): The full index (e.g. memory-mapped with `RealmIndex.from_pretrained`).
            index_type (`str`, *optional*): Backend of the shard; defaults to the full index's.
            search_params (`dict`, *optional*): faiss search parameters of the shard.
            device (`str` or `torch.device`, *optional*): Device of the shard's backend.
        """
        rank, world_size = distributed_info()
        start, stop = shard_bounds(index.num_blocks, rank, world_size)
        local = RealmIndex.from_embeddings(
            index.blocks.select(range(start, stop)),
            np.asarray(index.embeddings[start:stop]),  # [n, D]
            index_type=index_type or index.index_type,
            fingerprint=index.fingerprint,
            step=index.step,
            search_params=search_params,
            device=device,
        )
        logger.info("Rank %d/%d holds blocks rows %d..%d of %d", rank, world_size, start, stop, index.num_blocks)
        return cls(local, index.blocks, index.num_blocks)

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        expected_dim: int | None = None,
        expected_fingerprint: str | None = None,
        index_type: str | None = None,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
    ) -> ShardedRealmIndex:
        r"""
        Load this rank's shard of a saved index: blocks and embeddings are checked against the manifest, memory-mapped
        and only the shard's rows are read; the shard's search structure is built from them (`index_type` defaults to
        the saved one).

        Raises:
            `FileNotFoundError` / `ValueError`: as [`RealmIndex.from_pretrained`].
        """
        directory = os.fspath(directory)
        # the faiss file is not read: each rank builds its shard's structure from its rows of the embeddings
        manifest, blocks, embeddings = read_index_files(
            directory, expected_dim, expected_fingerprint, mmap=True, read_index_file=False
        )
        rank, world_size = distributed_info()
        start, stop = shard_bounds(len(blocks), rank, world_size)
        local = RealmIndex.from_embeddings(
            blocks.select(range(start, stop)),
            np.asarray(embeddings[start:stop]),  # [n, D]
            index_type=index_type or manifest.index_type,
            fingerprint=manifest.fingerprint,
            step=manifest.step,
            search_params=search_params,
            device=device,
        )
        return cls(local, blocks, len(blocks))

    @classmethod
    def build(
        cls, blocks_or_articles: Any, embed_fn_or_retriever: Any, tokenizer: Any = None, **options: Any
    ) -> ShardedRealmIndex:
        r"""
        Each rank embeds and indexes only its own contiguous shard (nothing is gathered). Arguments as
        [`RealmIndex.build`] (`index_type`, `batch_size`, `device`, `dtype`, `fingerprint`, `step`, `search_params`,
        `max_length`; a shard is stored in float32 and split in one process); every rank must pass the same corpus.
        """
        blocks, pad_token_id = build_inputs(blocks_or_articles, tokenizer, max_length=options.pop("max_length", 288))
        if "block_id" not in blocks.column_names:
            blocks = blocks.add_column("block_id", np.arange(len(blocks), dtype=np.int64))
        rank, world_size = distributed_info()
        local = build_shard(blocks, embed_fn_or_retriever, rank, world_size, pad_token_id=pad_token_id, **options)
        return cls(local, blocks, len(blocks))

    @property
    def fingerprint(self) -> str | None:
        """The document tower the shards were embedded with (the same on every rank)."""
        return self.local.fingerprint

    @property
    def step(self) -> int | None:
        """The training step of the document tower the shards were embedded with."""
        return self.local.step

    @property
    def blocks(self) -> datasets.Dataset:
        """All blocks (every shard's), memory-mapped."""
        return self.store.blocks

    def to(self, device: str | torch.device | None) -> ShardedRealmIndex:
        """Move this rank's search backend to `device`."""
        self.local.to(device)
        return self

    def gather(self) -> RealmIndex:
        r"""
        The whole index, on every rank: the shards' embeddings gathered (a collective call), indexed with the shards'
        index type over all blocks. Memory: the whole `[N, D]` matrix on every rank, once (e.g. to save the final
        index of a sharded run).
        """
        local = np.asarray(self.local.embeddings, dtype=np.float32)  # [n, D]
        rows = int(_all_gather_sizes([len(local)], self.world_size)[:, 0].max())
        gathered = _all_gather_padded(torch.from_numpy(local), rows, self.world_size)  # [W, rows, D]
        embeddings = np.concatenate(
            [gathered[r, : stop - start].numpy() for r, (start, stop) in enumerate(
                shard_bounds(self.num_blocks, r, self.world_size) for r in range(self.world_size)
            )]
        )  # [N, D]
        manifest = self.local.manifest
        return RealmIndex.from_embeddings(
            self.store.blocks, embeddings.astype(self.local.embeddings.dtype, copy=False),
            index_type=manifest.index_type, fingerprint=manifest.fingerprint, step=manifest.step,
            search_params=dict(self.local.backend.search_params) or None,
        )

    def search(
        self, query_embeds: torch.Tensor | np.ndarray, k: int, exclude: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""
        Global top-`k` for this rank's queries (a collective call: all ranks must call it).

        Every rank's queries are gathered, each rank searches them in its shard, the per-shard hits are gathered
        and each rank keeps the best `k` of its own queries.

        Args:
            query_embeds (`torch.Tensor` or `np.ndarray` of shape `(B, D)`): This rank's queries (B may differ).
            k (`int`): Hits per query.
            exclude (*optional*): Global block ids to leave out per query, as in [`RealmIndex.search`].

        Returns:
            `tuple(torch.FloatTensor, torch.LongTensor)`: scores and global block ids, `[B, k]` each.
        """
        queries = self.local._check_queries(query_embeds)  # [B, D]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
            raise ValueError(f"k must be a positive integer, got k={k!r}.")
        if k > self.num_blocks:
            raise ValueError(f"k={k} is larger than the number of blocks in the index ({self.num_blocks}); lower k.")
        k = int(k)
        excluded = normalize_exclude(exclude, len(queries))  # [B, E]
        sizes = _all_gather_sizes([len(queries), excluded.shape[1]], self.world_size)  # [W, 2]
        max_queries, max_excluded = int(sizes[:, 0].max()), int(sizes[:, 1].max())
        padded_excluded = torch.cat(
            [excluded, excluded.new_full((len(excluded), max_excluded - excluded.shape[1]), -1)], dim=1
        )  # [B, E_max]
        all_queries = _all_gather_padded(queries, max_queries, self.world_size)  # [W, B_max, D]
        all_excluded = _all_gather_padded(padded_excluded, max_queries, self.world_size)  # [W, B_max, E_max]
        scores, ids, _ = self.local._search(
            all_queries.flatten(0, 1), k, all_excluded.flatten(0, 1)
        )  # [W * B_max, k] hits of every rank's queries in this shard
        all_scores = _all_gather_padded(scores, len(scores), self.world_size)  # [W_shards, W * B_max, k]
        all_ids = _all_gather_padded(ids, len(ids), self.world_size)  # [W_shards, W * B_max, k]
        mine = slice(self.rank * max_queries, self.rank * max_queries + len(queries))
        shard_scores = all_scores[:, mine].permute(1, 0, 2).flatten(1)  # [B, W_shards * k]
        shard_ids = all_ids[:, mine].permute(1, 0, 2).flatten(1)  # [B, W_shards * k]
        best_scores, order = shard_scores.topk(k, dim=1)  # [B, k]
        best_ids = shard_ids.gather(1, order)  # [B, k]
        missing = (best_ids < 0) | torch.isinf(best_scores)
        if bool(missing.any()):
            row = int(torch.nonzero(missing)[0, 0])
            raise ValueError(
                f"Query {row} has fewer than k={k} blocks left after excluding {excluded[row].tolist()}; "
                "lower k or exclude fewer blocks."
            )
        return best_scores, best_ids

    def get_blocks(self, block_ids: Any, columns: Iterable[str] | None = None) -> dict[str, list]:
        """Rows of global `block_ids` (any shard), as [`RealmIndex.get_blocks`]."""
        return self.store.get(block_ids, columns)

    def get_block_arrays(self, block_ids: Any, columns: Iterable[str]) -> dict[str, Any]:
        """Columns of global `block_ids` (any shard) as arrays, as [`RealmIndex.get_block_arrays`]."""
        return self.store.take(block_ids, columns)
