"""Exclusion of blocks from a search (e.g. the trivial candidate: the block a masked sentence came from)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


__all__ = ["drop_excluded", "normalize_exclude"]


def normalize_exclude(exclude: Any, batch_size: int) -> torch.Tensor:
    r"""
    Turn per-query exclusions into a `[B, E]` int64 tensor padded with -1.

    Args:
        exclude: `None`; an int tensor/array of shape `[B]` or `[B, E]` (-1 = nothing); or a sequence of `B` items,
            each `None`, an int, or an iterable of ints.
        batch_size (`int`): Number of queries `B`.
    """
    if exclude is None:
        return torch.empty((batch_size, 0), dtype=torch.long)
    if isinstance(exclude, np.ndarray):
        exclude = torch.from_numpy(exclude)
    if isinstance(exclude, torch.Tensor):
        tensor = exclude.detach().to("cpu", torch.long)
        if tensor.dim() == 1:
            tensor = tensor[:, None]  # [B, 1]
        if tensor.dim() != 2 or tensor.shape[0] != batch_size:
            raise ValueError(
                f"exclude must have shape [B={batch_size}] or [B={batch_size}, E], got {list(exclude.shape)}."
            )
        return tensor
    if not isinstance(exclude, Sequence) or len(exclude) != batch_size:
        raise ValueError(
            f"exclude must hold one entry per query (B={batch_size}): a list of lists of block ids, "
            f"got {type(exclude).__name__}" + (f" of length {len(exclude)}" if isinstance(exclude, Sequence) else "")
        )
    rows = []
    for item in exclude:
        if item is None:
            rows.append([])
        elif isinstance(item, (int, np.integer)):
            rows.append([int(item)])
        elif isinstance(item, torch.Tensor):
            rows.append(item.reshape(-1).tolist())
        else:
            rows.append([int(i) for i in item])
    width = max((len(row) for row in rows), default=0)
    tensor = torch.full((batch_size, width), -1, dtype=torch.long)  # [B, E]
    for i, row in enumerate(rows):
        tensor[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return tensor


def drop_excluded(
    scores: torch.Tensor, ids: torch.Tensor, exclude: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep the best `k` hits per row that are neither missing (-1) nor excluded; pad with (-inf, -1)."""
    drop = ids < 0  # [B, K']
    if exclude.shape[1]:
        drop |= (ids[:, :, None] == exclude[:, None, :]).any(-1)  # [B, K']
    if ids.shape[1] < k:  # fewer candidates than k: pad so the shapes hold
        pad = k - ids.shape[1]
        scores = torch.cat([scores, scores.new_full((len(ids), pad), float("-inf"))], dim=1)
        ids = torch.cat([ids, ids.new_full((len(ids), pad), -1)], dim=1)
        drop = torch.cat([drop, drop.new_ones((len(drop), pad))], dim=1)
    # a stable sort of the drop flags moves kept hits to the front without changing their rank order
    order = torch.sort(drop.to(torch.int8), dim=1, stable=True).indices[:, :k]  # [B, k]
    dropped = drop.gather(1, order)  # [B, k]
    scores = scores.gather(1, order).masked_fill(dropped, float("-inf"))  # [B, k]
    ids = ids.gather(1, order).masked_fill(dropped, -1)  # [B, k]
    return scores, ids, (~dropped).sum(dim=1)
