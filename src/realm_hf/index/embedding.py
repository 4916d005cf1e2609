"""Embed a blocks dataset with any "embed these token batches" callable (the only way the index sees a model)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import datasets
import numpy as np
import pyarrow.compute as pc
import torch
from torch import nn
from tqdm.auto import tqdm

from ..corpus.store import RaggedRows, lengths_mask
from .manifest import fingerprint_module
from .pacing import in_paced_build, pause_point


logger = logging.getLogger(__name__)

EmbedFn = Callable[[dict[str, torch.Tensor]], torch.Tensor]
"""`embed_fn(batch) -> [N, D]` where `batch` holds `input_ids`, `attention_mask`, `token_type_ids` ([N, L] long)."""


def as_embed_fn(embedder: Any) -> EmbedFn:
    r"""
    Turn an embedder into an [`EmbedFn`].

    Args:
        embedder: An object with an `embed_documents(input_ids=..., attention_mask=..., token_type_ids=...)`
            method (a `RealmRetriever`), or a callable taking the batch dict.

    Returns:
        [`EmbedFn`]
    """
    if hasattr(embedder, "embed_documents"):
        return lambda batch: embedder.embed_documents(**batch)
    if callable(embedder):
        return embedder
    raise TypeError(
        f"Expected a callable embed_fn(batch) -> [N, D] or an object with `embed_documents`, got {type(embedder)!r}."
    )


def resolve_fingerprint(embedder: Any) -> str | None:
    r"""
    Fingerprint of the document tower behind `embedder`: its `document_embedder` module when it has one (a
    `RealmRetriever`, so fine-tuning the query tower keeps the index valid), else the module itself, else `None`.
    """
    doc_tower = getattr(embedder, "document_embedder", None)
    if isinstance(doc_tower, nn.Module):
        return fingerprint_module(doc_tower)
    if isinstance(embedder, nn.Module):
        return fingerprint_module(embedder)
    return None


def infer_device(embedder: Any) -> torch.device:
    """The device of the first parameter of an `nn.Module` embedder, else CPU."""
    if isinstance(embedder, nn.Module):
        for parameter in embedder.parameters():
            return parameter.device
    return torch.device("cpu")


def block_lengths(blocks: datasets.Dataset) -> np.ndarray:
    """Token count of every block, read from the Arrow column without materializing Python lists."""
    column = blocks.with_format("arrow")["input_ids"]
    return pc.list_value_length(column).to_numpy().astype(np.int64)  # [N]


def shard_bounds(num_rows: int, rank: int, world_size: int) -> tuple[int, int]:
    """Contiguous `[start, stop)` rows of `rank` when `num_rows` are split over `world_size` ranks."""
    return num_rows * rank // world_size, num_rows * (rank + 1) // world_size


def distributed_info() -> tuple[int, int]:
    """`(rank, world_size)`, `(0, 1)` when `torch.distributed` is not initialized, off the main thread or in a paced
    build.

    Collectives must be issued by every rank in lockstep; a background build (the index refresher's thread, or a
    paced build running between the trainer's steps) embeds the rows it was given alone instead of waiting for ranks
    that never join.
    """
    if threading.current_thread() is not threading.main_thread() or in_paced_build():
        return 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def collective_device() -> torch.device:
    """NCCL collectives need CUDA tensors; gloo takes CPU tensors."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def pad_batch(rows: dict[str, list[list[int]]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Pad `input_ids` / `token_type_ids` lists to the batch's own max length; build the attention mask."""
    lengths = [len(ids) for ids in rows["input_ids"]]
    input_ids = np.full((len(lengths), max(lengths)), pad_token_id, dtype=np.int64)  # [N, L]
    token_type_ids = np.zeros_like(input_ids)  # [N, L]
    attention_mask = np.zeros_like(input_ids)  # [N, L]
    for i, (ids, types) in enumerate(zip(rows["input_ids"], rows["token_type_ids"])):
        input_ids[i, : len(ids)] = ids
        token_type_ids[i, : len(types)] = types
        attention_mask[i, : len(ids)] = 1
    return {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "token_type_ids": torch.from_numpy(token_type_ids),
    }


@contextlib.contextmanager
def _eval_mode(embedder: Any) -> Iterator[None]:
    module = embedder if isinstance(embedder, nn.Module) else None
    was_training = module.training if module is not None else False
    if module is not None:
        module.eval()
    try:
        yield
    finally:
        if module is not None and was_training:
            module.train()


class TokenColumns:
    r"""
    The `input_ids` and `token_type_ids` of a blocks dataset as [`~realm_hf.corpus.store.RaggedRows`] read once from
    Arrow (an indices mapping, e.g. after `select`, is applied), and padded batches gathered from them without Python
    lists: the host work of an index build was most of it on a GPU (row fetches and list padding: ~5k blocks/s on an
    H200).

    Args:
        blocks (`datasets.Dataset`): Rows with `input_ids` and `token_type_ids`.
    """

    def __init__(self, blocks: datasets.Dataset) -> None:
        table = blocks.select_columns(["input_ids", "token_type_ids"]).with_format("arrow")[:]  # [N] rows
        self.input_ids = RaggedRows.from_arrow(table.column("input_ids"))  # Arrow's integer type (no copy)
        self.token_type_ids = RaggedRows.from_arrow(table.column("token_type_ids"))
        self.lengths = self.input_ids.lengths  # [N]

    def batch(self, rows: np.ndarray, pad_token_id: int) -> dict[str, torch.Tensor]:
        """Rows `[b]` padded to their own longest: the tensors of [`pad_batch`]."""
        lengths = self.lengths[rows]  # [b]
        mask = lengths_mask(lengths, int(lengths.max(initial=0)))  # [b, L], shared by the three tensors
        return {
            "input_ids": torch.from_numpy(self.input_ids.pad(pad_value=pad_token_id, rows=rows, mask=mask)),
            "attention_mask": torch.from_numpy(mask.astype(np.int64)),
            "token_type_ids": torch.from_numpy(self.token_type_ids.pad(pad_value=0, rows=rows, mask=mask)),
        }


CHUNK_ROWS = 1 << 18
"""Blocks read from Arrow into memory at a time by an index build (~300 MB of wordpieces at 288 per block)."""


def _embed_rows(
    blocks: datasets.Dataset,
    start: int,
    stop: int,
    embed_fn: EmbedFn,
    batch_size: int,
    device: torch.device,
    dtype: torch.dtype | None,
    pad_token_id: int,
) -> np.ndarray:
    autocast = dtype is not None and dtype != torch.float32
    pinned = device.type == "cuda"
    parts = []
    for low in range(start, stop, CHUNK_ROWS):  # [low, high) read from Arrow at once
        columns = TokenColumns(blocks.select(range(low, min(low + CHUNK_ROWS, stop))))
        # longest first: batches of similar length waste little padding, and an out-of-memory shows up at once
        order = np.argsort(-columns.lengths, kind="stable")  # [n]
        outputs: list[torch.Tensor] = []  # on the device until the chunk ends: no host sync per batch
        for offset in tqdm(range(0, len(order), batch_size), desc="Embedding blocks", unit="batch"):
            pause_point()  # a paced build hands the thread back to the trainer here: outside no_grad and autocast
            batch = columns.batch(order[offset : offset + batch_size], pad_token_id)
            batch = {k: (t.pin_memory() if pinned else t).to(device, non_blocking=pinned) for k, t in batch.items()}
            with torch.no_grad(), torch.autocast(device_type=device.type, dtype=dtype, enabled=autocast):
                out = embed_fn(batch)
            if not isinstance(out, torch.Tensor):  # a ModelOutput or tuple: its first field is the embedding
                out = out[0]
            outputs.append(out.detach().float())  # [b, D]
        if outputs:
            in_length_order = torch.cat(outputs).cpu().numpy()  # [n, D]
            part = np.empty_like(in_length_order)
            part[order] = in_length_order  # back to the original row order
            parts.append(part)
    return np.concatenate(parts, axis=0) if parts else np.empty((0, 0), dtype=np.float32)


def _all_gather_rows(local: np.ndarray, num_rows: int, world_size: int) -> np.ndarray:
    """Concatenate every rank's contiguous shard; pads to the largest shard because all_gather needs equal shapes."""
    device = collective_device()
    dim = torch.tensor([local.shape[1] if local.size else 0], device=device)
    torch.distributed.all_reduce(dim, op=torch.distributed.ReduceOp.MAX)  # an empty shard does not know D
    max_rows = max(stop - start for start, stop in (shard_bounds(num_rows, r, world_size) for r in range(world_size)))
    padded = torch.zeros((max_rows, int(dim.item())), dtype=torch.float32, device=device)  # [M, D]
    if local.size:
        padded[: len(local)] = torch.from_numpy(local).to(device)
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    torch.distributed.all_gather(gathered, padded)
    parts = []
    for r, part in enumerate(gathered):
        start, stop = shard_bounds(num_rows, r, world_size)
        parts.append(part[: stop - start].cpu().numpy())
    return np.concatenate(parts, axis=0)  # [N, D]


def embed_blocks(
    blocks: datasets.Dataset,
    embedder: Any,
    batch_size: int = 64,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    pad_token_id: int = 0,
    gather: bool = True,
    shard: tuple[int, int] | None = None,
) -> np.ndarray:
    r"""
    Embed every block of `blocks` (its `input_ids` / `token_type_ids` columns) into a float32 matrix.

    Blocks are sorted by length and each batch is padded only to its own longest block; embeddings are put back in
    the original row order. When `torch.distributed` is initialized, each rank embeds a contiguous shard and (with
    `gather=True`) all ranks end with the same full matrix.

    Args:
        blocks (`datasets.Dataset`): Rows with `input_ids` and `token_type_ids` (see [`split_into_blocks`]).
        embedder: A callable `embed_fn(batch) -> [N, D]` or an object with `embed_documents` (a `RealmRetriever`).
        batch_size (`int`, defaults to 64): Blocks per forward pass.
        device (`str` or `torch.device`, *optional*): Where batches are sent; the model must already be there.
            Defaults to the device of an `nn.Module` embedder, else CPU.
        dtype (`torch.dtype`, *optional*): Autocast dtype (e.g. `torch.bfloat16`) for the forward pass.
        pad_token_id (`int`, defaults to 0): The tokenizer's pad id (`[PAD]` is 0 in BERT vocabularies).
        gather (`bool`, defaults to `True`): In distributed runs, gather the shards on every rank; `False` returns
            only this rank's contiguous shard.
        shard (`tuple[int, int]`, *optional*): `(rank, world_size)`: embed only that contiguous shard, in this
            process, with no collective (e.g. a background builder of one rank's shard); `gather` is then ignored.

    Returns:
        `np.ndarray` of shape `(N, D)` (or `(shard rows, D)` with `gather=False`), float32.
    """
    if "input_ids" not in blocks.column_names or "token_type_ids" not in blocks.column_names:
        raise ValueError(
            f"blocks must have input_ids and token_type_ids columns (got {blocks.column_names}); "
            "create them with realm_hf.corpus.split_into_blocks(articles, tokenizer)."
        )
    embed_fn = as_embed_fn(embedder)
    device = torch.device(device) if device is not None else infer_device(embedder)
    rank, world_size = distributed_info() if shard is None else shard
    start, stop = shard_bounds(len(blocks), rank, world_size)
    began = time.perf_counter()
    with _eval_mode(embedder):
        local = _embed_rows(blocks, start, stop, embed_fn, batch_size, device, dtype, pad_token_id)  # [n, D]
    seconds = time.perf_counter() - began
    logger.info(
        "Embedded %d blocks in %.1fs (%.0f blocks/s)%s",
        stop - start,
        seconds,
        (stop - start) / max(seconds, 1e-9),
        f" on rank {rank}/{world_size}" if world_size > 1 else "",
    )
    if world_size == 1 or not gather or shard is not None:
        return local
    return _all_gather_rows(local, len(blocks), world_size)
