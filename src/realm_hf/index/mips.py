"""`RealmIndex`: blocks + cached document embeddings + a MIPS backend + a manifest, saved as one directory.

Building, search, add/remove live here; the files of an index directory (layout, checksums, what is trusted) in
`realm_hf.index.storage`, exclusion of blocks from a search in `realm_hf.index.exclusion`, the search structures in
`realm_hf.index.backends`, the Hub bundle in `realm_hf.hub`.

Why this module is long: it is the one public class `RealmIndex`, whose methods (build, search, add/remove, save and
load) all keep its blocks, embeddings, backend and manifest consistent with each other; about half of it is the
documentation of its public arguments.

Why it imports realm_hf.hub.download and realm_hf.hub.upload (the one climb of the index, lazily, inside
`from_pretrained` and `push_to_hub`): a transformers user expects `RealmIndex.from_pretrained(repo_id)` and
`index.push_to_hub(repo_id)` beside `save_pretrained`, as on a model. The Hub bundle itself (its files, the checks
of a download, the dataset card) belongs to `realm_hf.hub`, which builds on the index's storage; these two methods
only hand over to it. Nothing of the index imports the Hub at module level.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import Any

import datasets
import numpy as np
import torch

from ..corpus.blocks import split_into_blocks
from ..corpus.store import BlockStore, int_column
from .atomic import atomic_directory
from .backends import TORCH_EXACT, FaissBackend, TorchExactBackend
from .embedding import embed_blocks, resolve_fingerprint
from .exclusion import drop_excluded, normalize_exclude
from .manifest import IndexManifest, fingerprint_module
from .storage import load_backend, read_index_files, write_index_files


logger = logging.getLogger(__name__)

__all__ = ["RealmIndex", "as_blocks", "build_inputs", "fingerprint_module"]

_EMBEDDING_DTYPES = {"float32": np.float32, "float16": np.float16}


class RealmIndex:
    r"""
    Maximum inner product search over the cached document embeddings of a blocks corpus.

    Build one with [`RealmIndex.build`], load one with [`RealmIndex.from_pretrained`]. Search returns *block ids*
    (the `block_id` column), which stay valid across [`RealmIndex.add`] and [`RealmIndex.remove`].

    Args:
        blocks (`datasets.Dataset`): One row per block with `block_id`, `title`, `text`, `input_ids`, ...
        embeddings (`np.ndarray` of shape `(N, D)`): float32 or float16 rows aligned with `blocks`.
        backend ([`TorchExactBackend`] or [`FaissBackend`]): The search structure over `embeddings`.
        manifest ([`IndexManifest`]): What the index is and which weights built it.
    """

    def __init__(
        self,
        blocks: datasets.Dataset,
        embeddings: np.ndarray,
        backend: TorchExactBackend | FaissBackend,
        manifest: IndexManifest,
    ) -> None:
        if embeddings.ndim != 2 or len(blocks) != embeddings.shape[0] or backend.ntotal != len(blocks):
            raise ValueError(
                f"Inconsistent index: {len(blocks)} blocks, embeddings of shape {list(embeddings.shape)}, "
                f"{backend.ntotal} vectors in the {manifest.index_type} backend. Rebuild the index."
            )
        self.store = BlockStore(blocks)
        self.embeddings = embeddings  # [N, D]
        self.backend = backend
        self.manifest = manifest
        self.manifest.num_blocks = len(blocks)
        self._exact_backend: TorchExactBackend | None = None

    @property
    def blocks(self) -> datasets.Dataset:
        """The blocks dataset, rows aligned with `embeddings`."""
        return self.store.blocks

    @property
    def block_ids(self) -> np.ndarray:
        """`[N]` int64 block id of every row."""
        return self.store.block_ids

    def _set_blocks(self, blocks: datasets.Dataset) -> None:
        self.store = BlockStore(blocks)
        self.manifest.num_blocks = len(blocks)
        self.manifest.checksums = None  # they describe the files saved before this change
        self._exact_backend = None

    # ----------------------------------------------------------------------------------------------------- build
    @classmethod
    def build(
        cls,
        blocks_or_articles: Any,
        embed_fn_or_retriever: Any,
        tokenizer: Any = None,
        index_type: str = "Flat",
        batch_size: int = 64,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        fingerprint: str | None = None,
        step: int | None = None,
        *,
        embedding_dtype: str = "float32",
        search_params: dict[str, Any] | None = None,
        max_length: int = 288,
        num_proc: int | None = None,
        train_size: int = 262_144,
    ) -> RealmIndex:
        r"""
        Embed a corpus with the document tower and build the search structure.

        Args:
            blocks_or_articles: A blocks `datasets.Dataset` (with `input_ids`, from [`split_into_blocks`]), or
                articles in any form [`load_articles`] takes (then `tokenizer` is required).
            embed_fn_or_retriever: `embed_fn(batch) -> [N, D]` or an object with `embed_documents` (a
                `RealmRetriever`). An `nn.Module` is put in eval mode while embedding.
            tokenizer (`PreTrainedTokenizerFast`, *optional*): Needed to split articles into blocks; also gives the
                pad id.
            index_type (`str`, defaults to `"Flat"`): `"torch-exact"` (no faiss), a faiss factory string (`"Flat"`,
                `"HNSW32"`, `"IVF4096,PQ32"`, `"IVF4096,PQ32,RFlat"`, `"SQfp16"`, ...), or `"compressed"`: the preset
                of about 63 bytes per block (from ~200k blocks on; 52 B of PQ codes + 8 B of id) that searches by L2
                over a MIPS->L2 transform of the embeddings (`realm_hf.index.compressed`; default `nprobe=8`).
            batch_size (`int`, defaults to 64): Blocks per forward pass.
            device (`str` or `torch.device`, *optional*): Device of the model (batches are sent there; defaults to
                the module's device) and of the search backend.
            dtype (`torch.dtype`, *optional*): Autocast dtype for embedding, e.g. `torch.bfloat16`.
            fingerprint (`str`, *optional*): Fingerprint of the document tower; derived from the module's
                state dict when the embedder is an `nn.Module` (its `document_embedder` for a `RealmRetriever`).
            step (`int`, *optional*): Training step of the weights, recorded in the manifest.
            embedding_dtype (`str`, defaults to `"float32"`): `"float32"` or `"float16"` storage of the matrix.
            search_params (`dict`, *optional*): faiss search parameters (`nprobe`, `efSearch`, `k_factor`).
            max_length (`int`, defaults to 288): Block length in wordpieces when splitting articles.
            num_proc (`int`, *optional*): Processes for splitting articles.
            train_size (`int`, defaults to 262144): Vectors sampled to train IVF/PQ quantizers.

        Returns:
            [`RealmIndex`]: the same full index on every rank of a distributed run.
        """
        if embedding_dtype not in _EMBEDDING_DTYPES:
            raise ValueError(f"embedding_dtype must be 'float32' or 'float16', got {embedding_dtype!r}.")
        blocks, pad_token_id = build_inputs(blocks_or_articles, tokenizer, max_length=max_length, num_proc=num_proc)
        if fingerprint is None:
            fingerprint = resolve_fingerprint(embed_fn_or_retriever)
        embeddings = embed_blocks(
            blocks, embed_fn_or_retriever, batch_size=batch_size, device=device, dtype=dtype, pad_token_id=pad_token_id
        )  # [N, D]
        return cls.from_embeddings(
            blocks,
            embeddings.astype(_EMBEDDING_DTYPES[embedding_dtype], copy=False),
            index_type=index_type,
            fingerprint=fingerprint,
            step=step,
            search_params=search_params,
            device=device,
            train_size=train_size,
        )

    @classmethod
    def from_embeddings(
        cls,
        blocks: datasets.Dataset,
        embeddings: np.ndarray,
        index_type: str = "Flat",
        fingerprint: str | None = None,
        step: int | None = None,
        search_params: dict[str, Any] | None = None,
        device: str | torch.device | None = None,
        train_size: int = 262_144,
    ) -> RealmIndex:
        r"""
        Build the search structure over embeddings computed elsewhere (rows aligned with `blocks`).

        Args:
            blocks (`datasets.Dataset`): Blocks; a `block_id` column `0..N-1` is added when missing.
            embeddings (`np.ndarray` of shape `(N, D)`): float32 or float16.
            index_type, fingerprint, step, search_params, device, train_size: see [`RealmIndex.build`].
        """
        if embeddings.ndim != 2 or len(embeddings) != len(blocks):
            raise ValueError(f"embeddings must have shape [{len(blocks)}, D], got {list(embeddings.shape)}.")
        if embeddings.dtype.name not in _EMBEDDING_DTYPES:
            embeddings = embeddings.astype(np.float32)
        if "block_id" not in blocks.column_names:
            blocks = blocks.add_column("block_id", np.arange(len(blocks), dtype=np.int64))
        ids = int_column(blocks, "block_id")
        began = time.perf_counter()
        if index_type == TORCH_EXACT:
            if search_params:
                raise ValueError(f"index_type='torch-exact' takes no search_params, got {search_params}.")
            backend: TorchExactBackend | FaissBackend = TorchExactBackend(embeddings, ids, device=device)
        else:
            backend = FaissBackend.build(
                embeddings, ids, index_type, search_params=search_params, device=device, train_size=train_size
            )
        logger.info("Built %s index over %d blocks in %.1fs", index_type, len(ids), time.perf_counter() - began)
        manifest = IndexManifest(
            num_blocks=len(ids),
            dim=int(embeddings.shape[1]),
            index_type=index_type,
            embedding_dtype=embeddings.dtype.name,
            fingerprint=fingerprint,
            step=step,
            search_params=backend.search_params,
            max_norm=backend.transform.max_norm if getattr(backend, "transform", None) is not None else None,
        )
        return cls(blocks, embeddings, backend, manifest)

    # ---------------------------------------------------------------------------------------------- properties
    def __len__(self) -> int:
        return len(self.block_ids)

    @property
    def num_blocks(self) -> int:
        return len(self.block_ids)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def index_type(self) -> str:
        return self.manifest.index_type

    @property
    def fingerprint(self) -> str | None:
        return self.manifest.fingerprint

    @property
    def step(self) -> int | None:
        return self.manifest.step

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, dim={self.dim}, index_type={self.index_type!r}, "
            f"embedding_dtype={self.manifest.embedding_dtype!r}, step={self.step})"
        )

    # -------------------------------------------------------------------------------------------------- search
    @property
    def search_params(self) -> dict[str, Any]:
        """The search-time parameters in effect (`nprobe`, `efSearch`, `k_factor`, `rerank`; `{}` for exact types)."""
        return dict(self.backend.search_params)

    def set_search_params(self, **params: Any) -> dict[str, Any]:
        r"""
        Change the search-time speed/recall trade-off of a built or loaded index, without rebuilding it.

        Parameters not passed keep their current values. They apply to every later [`search`] and are written to
        the manifest, so [`save_pretrained`] persists them and [`from_pretrained`] restores them (its
        `search_params` argument overrides them again at load time). On a faiss-gpu backend the index is copied to
        the GPUs again. `benchmarks/results/index.md` has recall vs queries/s curves over these parameters.

        Args:
            nprobe (`int`, *optional*): IVF types: inverted lists visited per query. More lists, higher recall,
                fewer queries/s. Defaults at build time to `max(8, nlist // 16)`.
            efSearch (`int`, *optional*): HNSW types: size of the candidate list of the graph search (faiss uses at
                least `k`). Defaults to 128.
            k_factor (`float`, *optional*): Refine types (`...,RFlat`, `...,Refine(...)`): the base index returns
                `k * k_factor` candidates that are re-scored with the refinement codes. Defaults to 4.
            rerank (`int`, *optional*): Any faiss type: the index returns `max(k, rerank)` candidates that are
                re-scored exactly with the stored embeddings (see [`approximate_search`]); 0 turns it off.
                Defaults to 0, and to 100 for `index_type="compressed"`.

        Returns:
            `dict`: the parameters now in effect.

        Raises:
            `ValueError`: when a parameter does not apply to this index type (nothing is changed then).
        """
        if self.index_type == TORCH_EXACT:
            if params:
                raise ValueError(f"index_type='torch-exact' takes no search parameters, got {params}.")
            return {}
        current = self.backend
        try:
            self.backend = FaissBackend(
                current.index,
                self.index_type,
                search_params={**current.search_params, **params},
                device=current.device,
                transform=current.transform,
            )
        except ValueError:
            # the valid keys were already written into the shared faiss index: put the previous values back
            FaissBackend(
                current.index, self.index_type, search_params=current.search_params, transform=current.transform
            )
            raise
        self.manifest.search_params = self.search_params
        self.manifest.checksums = None  # faiss stores the search parameters in its file
        return self.search_params

    def search(
        self, query_embeds: torch.Tensor | np.ndarray, k: int, exclude: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""
        The `k` blocks with the largest inner product with each query.

        Args:
            query_embeds (`torch.Tensor` or `np.ndarray` of shape `(B, D)`): Query embeddings.
            k (`int`): Hits per query, `1 <= k <= num_blocks`.
            exclude (*optional*): Block ids to leave out per query (e.g. the block a masked sentence came from):
                a list of `B` lists, or an int tensor `[B]` / `[B, E]` padded with -1. Exactly `k` hits are still
                returned (the search over-fetches `k + E` and filters).

        Returns:
            `tuple(torch.FloatTensor, torch.LongTensor)`: scores `[B, k]` (float32, descending) and block ids `[B, k]`.
        """
        queries = self._check_queries(query_embeds)  # [B, D]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
            raise ValueError(f"k must be a positive integer, got k={k!r}.")
        if k > self.num_blocks:
            raise ValueError(f"k={k} is larger than the number of blocks in the index ({self.num_blocks}); lower k.")
        excluded = normalize_exclude(exclude, len(queries))  # [B, E]
        scores, ids, found = self._search(queries, int(k), excluded)
        if bool((found < k).any()):
            row = int(torch.nonzero(found < k)[0, 0])
            raise ValueError(
                f"Query {row} has only {int(found[row])} blocks left after excluding {excluded[row].tolist()}, "
                f"fewer than k={k}; lower k or exclude fewer blocks."
            )
        return scores, ids

    def _check_queries(self, query_embeds: torch.Tensor | np.ndarray) -> torch.Tensor:
        if isinstance(query_embeds, np.ndarray):
            query_embeds = torch.from_numpy(query_embeds)
        if not isinstance(query_embeds, torch.Tensor):
            raise TypeError(f"query_embeds must be a [B, D] tensor or array, got {type(query_embeds).__name__}.")
        if query_embeds.dim() != 2:
            raise ValueError(
                f"query_embeds must have shape [B, D], got {list(query_embeds.shape)}; "
                "use query_embeds[None] for a single query."
            )
        if query_embeds.shape[1] != self.dim:
            raise ValueError(
                f"query_embeds have dim {query_embeds.shape[1]} but the index has dim {self.dim}; the index was "
                "built by another retriever configuration. Rebuild it with RealmIndex.build(...)."
            )
        return query_embeds.detach().float()

    def _search(
        self, queries: torch.Tensor, k: int, excluded: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Search with exclusion; may return fewer than `k` hits per row (padded with -inf / -1; see `found`)."""
        fetch = min(k + excluded.shape[1], self.num_blocks)
        if fetch == 0:
            return drop_excluded(
                queries.new_zeros((len(queries), 0)), excluded.new_zeros((len(queries), 0)), excluded, k
            )
        scores, ids = self.approximate_search(queries, fetch)  # [B, fetch]
        scores, ids, found = drop_excluded(scores, ids, excluded, k)  # [B, k]
        short = found < min(k, self.num_blocks)
        if self.index_type != TORCH_EXACT and bool(short.any()):
            # approximate indexes can come up short (few IVF lists probed); exact search on those rows fills in
            rows = torch.nonzero(short)[:, 0]
            logger.debug(
                "%d queries got fewer than %d hits from %s; completing them exactly", len(rows), k, self.index_type
            )
            exact_scores, exact_ids = self._exact().search(queries[rows], fetch)
            scores[rows], ids[rows], found[rows] = drop_excluded(exact_scores, exact_ids, excluded[rows], k)
        return scores, ids, found

    def approximate_search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        r"""
        The search structure alone, with its `rerank` step: no exclusion, and no exact completion of the rows an
        approximate index leaves short (what [`search`] adds). `benchmarks/bench_index.py` measures this.

        With the search parameter `rerank=R` (the `"compressed"` preset's default), the backend returns
        `max(k, R)` candidates whose scores are then recomputed exactly from the stored embeddings (memory-mapped
        after [`from_pretrained`]: R rows read per query), so the compressed codes only have to bring the true top
        k among the first R.

        Args:
            queries (`torch.Tensor` of shape `(B, D)`): float32 query embeddings.
            k (`int`): Hits per query, `1 <= k <= num_blocks`.

        Returns:
            `tuple(torch.FloatTensor, torch.LongTensor)`: scores `[B, k]` (descending) and block ids `[B, k]`;
            rows with fewer than `k` hits are padded with -inf / -1.
        """
        rerank = int(self.backend.search_params.get("rerank", 0))
        scores, ids = self.backend.search(queries, min(max(k, rerank), self.num_blocks))  # [B, max(k, R)]
        if rerank:
            scores, ids = self._rescore(queries, ids)
        return scores[:, :k], ids[:, :k]

    def _rescore(self, queries: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact inner products of `queries` `[B, D]` with the stored embeddings of candidates `ids` `[B, C]` (-1:
        none), sorted descending: scores `[B, C]` (-inf where no candidate), ids `[B, C]`."""
        ids = ids.cpu()
        found = ids >= 0  # [B, C]
        vectors = self.get_embeddings(ids.where(found, int(self.block_ids[0])))  # [B, C, D] (a stand-in where none)
        scores = torch.bmm(vectors, queries.cpu()[:, :, None])[..., 0]  # [B, C]
        scores, order = scores.masked_fill(~found, float("-inf")).sort(dim=1, descending=True)
        return scores, ids.gather(1, order)

    def _exact(self) -> TorchExactBackend:
        if self._exact_backend is None:
            self._exact_backend = TorchExactBackend(self.embeddings, self.block_ids)
        return self._exact_backend

    # -------------------------------------------------------------------------------------------------- blocks
    def get_embeddings(self, block_ids: torch.Tensor | np.ndarray) -> torch.Tensor:
        r"""
        The stored document embeddings of `block_ids` (any shape, e.g. `[B, k]` search results): `[..., D]` float32.

        These are the vectors the index searched with, so relevance scores recomputed from them with the current
        query tower rank the candidates as the index would (only the choice of the k blocks is stale).

        Raises:
            `KeyError`: naming ids that are not in the index.
        """
        ids = block_ids.cpu().numpy() if isinstance(block_ids, torch.Tensor) else np.asarray(block_ids)
        rows = self.store.rows_of(ids)
        vectors = np.asarray(self.embeddings[rows.reshape(-1)], dtype=np.float32)  # [N, D] (a copy)
        return torch.from_numpy(vectors).view(*rows.shape, -1)

    def get_blocks(self, block_ids: Any, columns: Iterable[str] | None = None) -> dict[str, list]:
        r"""
        The block rows for a `[B, k]` (or `[n]`) tensor of block ids, e.g. the ids returned by [`search`].

        Args:
            block_ids (`torch.LongTensor`, `np.ndarray` or list): Block ids.
            columns (`Iterable[str]`, *optional*): Columns to return (default: all, e.g. `block_id`, `article_id`,
                `title`, `text`, `input_ids`, `token_type_ids`).

        Returns:
            `dict[str, list]`: per column, a list shaped like `block_ids` (`[B][k]` for a 2-D input).

        Raises:
            `KeyError`: naming ids that are not in the index.
        """
        return self.store.get(block_ids, columns)

    def get_block_arrays(self, block_ids: Any, columns: Iterable[str]) -> dict[str, Any]:
        r"""
        The `columns` of the blocks `block_ids` as arrays, read from Arrow in one call: what [`get_blocks`] returns,
        without a Python object per wordpiece (see [`realm_hf.corpus.store.BlockStore.take`]). The trainers' step
        reads its candidates this way.

        Returns:
            `dict`: per column, a numpy array shaped like `block_ids` (a column of scalars, e.g. `block_id`) or a
            [`~realm_hf.corpus.store.RaggedRows`] over the flattened ids (a list column, e.g. `input_ids`).

        Raises:
            `KeyError`: naming ids that are not in the index.
        """
        return self.store.take(block_ids, columns)

    # ------------------------------------------------------------------------------------------- add / remove
    def add(
        self,
        articles_or_blocks: Any,
        embed_fn: Any,
        tokenizer: Any = None,
        batch_size: int = 64,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        max_length: int = 288,
    ) -> np.ndarray:
        r"""
        Embed and add new blocks without rebuilding; they get fresh ids after the current largest id.

        Args:
            articles_or_blocks: Articles (then `tokenizer` is needed) or a blocks dataset.
            embed_fn: The embedder; it should be the document tower that built the index (a different fingerprint
                is logged as a warning).
            tokenizer, batch_size, device, dtype, max_length: see [`RealmIndex.build`].

        Returns:
            `np.ndarray`: the block ids given to the new blocks.
        """
        new_blocks = as_blocks(articles_or_blocks, tokenizer, max_length=max_length)
        first_id = int(self.block_ids.max()) + 1 if len(self.block_ids) else 0
        new_ids = np.arange(first_id, first_id + len(new_blocks), dtype=np.int64)
        if "block_id" in new_blocks.column_names:
            new_blocks = new_blocks.remove_columns("block_id")
        new_blocks = new_blocks.add_column("block_id", new_ids)
        new_blocks = new_blocks.select_columns(self.blocks.column_names).cast(self.blocks.features)
        fingerprint = resolve_fingerprint(embed_fn)
        if self.fingerprint is not None and fingerprint is not None and fingerprint != self.fingerprint:
            logger.warning(
                "Adding blocks embedded by weights %s to an index built by %s", fingerprint, self.fingerprint
            )
        pad_token_id = tokenizer.pad_token_id if tokenizer is not None and tokenizer.pad_token_id is not None else 0
        new_embeddings = embed_blocks(
            new_blocks, embed_fn, batch_size=batch_size, device=device, dtype=dtype, pad_token_id=pad_token_id
        ).astype(self.embeddings.dtype)  # [M, D]
        if new_embeddings.shape[1] != self.dim:
            raise ValueError(f"New embeddings have dim {new_embeddings.shape[1]}, the index has dim {self.dim}.")
        self.embeddings = np.concatenate([self.embeddings, new_embeddings], axis=0)  # [N + M, D]
        self._set_blocks(datasets.concatenate_datasets([self.blocks, new_blocks]))
        self.backend.add(new_embeddings, new_ids, self.embeddings, self.block_ids)
        logger.info(
            "Added %d blocks (ids %d..%d); index now holds %d",
            len(new_ids),
            first_id,
            new_ids[-1] if len(new_ids) else first_id,
            self.num_blocks,
        )
        return new_ids

    def remove(self, block_ids: Any) -> None:
        r"""
        Remove blocks by id, from the blocks, the embeddings and the search structure, without re-embedding.

        Raises:
            `KeyError`: naming ids that are not in the index.
        """
        ids = np.unique(
            np.asarray(block_ids.cpu() if isinstance(block_ids, torch.Tensor) else block_ids, dtype=np.int64)
        )
        self.store.rows_of(ids)  # raises KeyError on unknown ids
        keep = ~np.isin(self.block_ids, ids)  # [N]
        self.embeddings = np.ascontiguousarray(self.embeddings[keep])  # [N - R, D]
        self._set_blocks(self.blocks.select(np.flatnonzero(keep)))
        self.backend.remove(ids, self.embeddings, self.block_ids)
        logger.info("Removed %d blocks; index now holds %d", len(ids), self.num_blocks)

    def to(self, device: str | torch.device | None) -> RealmIndex:
        """Move the search backend to `device` (CUDA: torch matrix on the GPU, or faiss-gpu when installed)."""
        self.backend = self.backend.to(device)
        return self

    # -------------------------------------------------------------------------------------------- persistence
    def save_pretrained(self, save_directory: str | os.PathLike) -> None:
        r"""
        Write the index directory atomically: everything goes to a temporary sibling that is renamed into place
        once complete, so a crash never leaves half an index and an existing index is replaced only by a whole one.

        Args:
            save_directory (`str` or `os.PathLike`): Destination directory.
        """
        began = time.perf_counter()
        with atomic_directory(save_directory) as tmp:
            write_index_files(self, tmp)
        logger.info("Saved %r to %s in %.1fs", self, save_directory, time.perf_counter() - began)

    @classmethod
    def from_pretrained(
        cls,
        directory: str | os.PathLike,
        expected_dim: int | None = None,
        expected_fingerprint: str | None = None,
        mmap: bool = True,
        device: str | torch.device | None = None,
        search_params: dict[str, Any] | None = None,
        verify_checksums: bool = True,
        *,
        trust_index_file: bool = False,
        revision: str | None = None,
        token: str | bool | None = None,
        cache_dir: str | os.PathLike | None = None,
        local_files_only: bool = False,
    ) -> RealmIndex:
        r"""
        Load an index directory written by [`save_pretrained`], or an index bundle from a Hub dataset repo.

        Every file that is parsed (blocks, embeddings, the faiss file when it is read) is first checked against the
        manifest's checksums, and no symbolic link inside the directory is followed (but a Hugging Face cache
        snapshot's links into its repo's blobs). A faiss file is handed to faiss's native reader only when this
        user's realm_hf wrote it (the manifest's MAC verifies with this user's key, `realm_hf.index.provenance`) or
        `trust_index_file=True`, wherever it lies: otherwise (a Hub repo, a copied or cloned folder, another user's
        index, an index saved before realm_hf recorded who wrote it) the search structure is rebuilt from
        `embeddings.npy` with the manifest's factory string, with one log line saying so (exact types give the same
        results; approximate ones are retrained, seeded, on the same vectors).

        Args:
            directory (`str` or `os.PathLike`): The index directory, or a Hub dataset repo id (`"org/name-index"`,
                as in `RealmForOpenQAConfig.index_repo_id`) when no such directory exists. From the Hub, the manifest
                is fetched first, then only the files needed (see [`realm_hf.hub.resolve_index_dir`]);
                `HF_HUB_OFFLINE=1` reads the Hugging Face cache only.
            expected_dim (`int`, *optional*): Refuse the index unless its dim matches (the retriever's size).
            expected_fingerprint (`str`, *optional*): Refuse the index unless it was built by these weights.
            mmap (`bool`, defaults to `True`): Memory-map blocks and embeddings instead of reading them into RAM.
            device (`str` or `torch.device`, *optional*): Device of the search backend.
            search_params (`dict`, *optional*): Override stored faiss search parameters (`nprobe`, `efSearch`, ...).
            verify_checksums (`bool`, defaults to `True`): Check the files against the checksums in the manifest
                (reads each once). `False` is an explicit opt-out.
            trust_index_file (`bool`, defaults to `False`): Read the faiss file with faiss's native reader even when
                this user's realm_hf did not write it (faster than rebuilding; only for files you trust). Indexes
                this user saved are read as saved without it.
            revision (`str`, *optional*): Hub only: branch, tag or commit of the repo (`config.index_revision`).
            token, cache_dir, local_files_only: Hub only, as in `huggingface_hub.snapshot_download`.

        Raises:
            `FileNotFoundError`: naming the missing file (and the repo, from the Hub). `ValueError`: on a dim or
            fingerprint mismatch, or a file that does not match its checksum, saying how to rebuild.
        """
        directory = os.fspath(directory)
        if not os.path.isdir(directory):
            # ---- Hub resolution (realm_hf.hub): a repo id downloads/finds the bundle in the HF cache
            from ..hub.download import is_repo_id, resolve_index_dir

            if not is_repo_id(directory):
                raise FileNotFoundError(f"No index directory at {directory}.")
            try:
                directory = resolve_index_dir(
                    directory, revision=revision, token=token, cache_dir=cache_dir, local_files_only=local_files_only,
                    include_index_file=trust_index_file,
                )
            except FileNotFoundError as error:
                raise FileNotFoundError(f"No index directory at {directory}; as a Hub repo id: {error}") from error
        manifest, blocks, embeddings = read_index_files(
            directory, expected_dim, expected_fingerprint, mmap=mmap, verify_checksums=verify_checksums,
        )
        backend = load_backend(
            directory, manifest, embeddings, blocks, trust_index_file, search_params=search_params, device=device
        )
        return cls(blocks, embeddings, backend, manifest)

    def push_to_hub(
        self,
        repo_id: str,
        revision: str | None = None,
        private: bool | None = None,
        commit_message: str | None = None,
        token: str | bool | None = None,
        **kwargs: Any,
    ) -> Any:
        r"""
        Publish the index as a Hub *dataset* repo in one commit: `blocks/*.parquet`, `embeddings.npy`, the faiss
        file, `manifest.json` and a dataset card. See [`realm_hf.hub.push_index_to_hub`], which also takes
        `card_facts`, `max_shard_size`, `create_pr` and `commit_description`.

        Returns:
            `huggingface_hub.CommitInfo`: pin `.oid` as the model config's `index_revision`.
        """
        from ..hub.upload import push_index_to_hub

        return push_index_to_hub(
            self, repo_id, revision=revision, private=private, commit_message=commit_message, token=token, **kwargs
        )


def build_inputs(
    source: Any, tokenizer: Any, max_length: int = 288, num_proc: int | None = None
) -> tuple[datasets.Dataset, int]:
    """What a build embeds: the blocks ([`as_blocks`]) and the pad id (the tokenizer's, else 0); for
    [`RealmIndex.build`] and [`ShardedRealmIndex.build`]."""
    pad_token_id = tokenizer.pad_token_id if tokenizer is not None and tokenizer.pad_token_id is not None else 0
    return as_blocks(source, tokenizer, max_length=max_length, num_proc=num_proc), pad_token_id


def as_blocks(source: Any, tokenizer: Any, max_length: int = 288, num_proc: int | None = None) -> datasets.Dataset:
    """A blocks dataset as is, or articles split into blocks with `tokenizer`."""
    if isinstance(source, datasets.Dataset) and "input_ids" in source.column_names:
        return source
    if tokenizer is None:
        raise ValueError(
            "Got articles (no input_ids column) but no tokenizer: pass tokenizer=... so they can be split into "
            "blocks, or pass blocks from realm_hf.corpus.split_into_blocks."
        )
    return split_into_blocks(source, tokenizer, max_length=max_length, num_proc=num_proc)
