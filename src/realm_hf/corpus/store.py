"""`BlockStore`: look blocks up by `block_id` in an Arrow-backed blocks dataset."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import datasets
import numpy as np
import torch


def int_column(dataset: datasets.Dataset, name: str) -> np.ndarray:
    """An integer column as an int64 numpy array, read through Arrow in one go (not row by row)."""
    return np.array(dataset.with_format("arrow")[name].to_numpy(), dtype=np.int64)  # a writable copy


class BlockStore:
    r"""
    Block ids -> rows of a blocks dataset (memory-mapped rows are read on demand, never all loaded).

    Args:
        blocks (`datasets.Dataset`): Blocks with a unique int64 `block_id` column (see [`split_into_blocks`]).
    """

    def __init__(self, blocks: datasets.Dataset) -> None:
        if "block_id" not in blocks.column_names:
            raise ValueError(
                f"blocks need a block_id column, got {blocks.column_names}; create them with split_into_blocks."
            )
        self.blocks = blocks
        self.block_ids = int_column(blocks, "block_id")  # [N]
        # ids are assigned in increasing order, so a sorter is only needed for user-made blocks
        increasing = bool(np.all(self.block_ids[1:] > self.block_ids[:-1]))
        self._sorter = None if increasing else np.argsort(self.block_ids, kind="stable")
        if not increasing and len(np.unique(self.block_ids)) != len(self.block_ids):
            raise ValueError("blocks have duplicate block_id values; block ids must be unique.")
        # ids 0..N-1 in order (a corpus that was never edited): an id is its row, no search needed
        self._ids_are_rows = increasing and (len(self.block_ids) == 0 or self.block_ids[-1] == len(self.block_ids) - 1)

    def __len__(self) -> int:
        return len(self.block_ids)

    def rows_of(self, block_ids: Any) -> np.ndarray:
        r"""
        Row positions of `block_ids` (any shape), same shape.

        Raises:
            `KeyError`: naming the ids that are not in the store.
        """
        ids = np.asarray(block_ids.cpu() if isinstance(block_ids, torch.Tensor) else block_ids, dtype=np.int64)
        flat = ids.reshape(-1)
        if len(self.block_ids) == 0:
            if len(flat):
                raise KeyError(f"Block ids not in the index (it is empty): {flat[:10].tolist()}")
            return ids
        if self._ids_are_rows:
            rows = flat
            missing = flat[(flat < 0) | (flat >= len(self.block_ids))]
        else:
            positions = np.clip(np.searchsorted(self.block_ids, flat, sorter=self._sorter), 0, len(self.block_ids) - 1)
            rows = positions if self._sorter is None else self._sorter[positions]
            missing = flat[self.block_ids[rows] != flat]
        if len(missing):
            more = " ..." if len(missing) > 10 else ""
            raise KeyError(f"Block ids not in the index: {missing[:10].tolist()}{more}")
        return rows.reshape(ids.shape)

    def get(self, block_ids: Any, columns: Iterable[str] | None = None) -> dict[str, list]:
        r"""
        The rows of `block_ids`, as a dict of columns each shaped like `block_ids` (`[B][k]` for a 2-D input).

        Args:
            block_ids (`torch.LongTensor`, `np.ndarray` or list): Block ids, e.g. `[B, k]` search results.
            columns (`Iterable[str]`, *optional*): Columns to return; all when omitted.
        """
        rows = self.rows_of(block_ids)
        table = self.blocks if columns is None else self.blocks.select_columns(list(columns))
        flat = table[rows.reshape(-1).tolist()]
        if rows.ndim <= 1:
            return flat
        width = rows.shape[-1]
        return {name: [values[i : i + width] for i in range(0, len(values), width)] for name, values in flat.items()}
