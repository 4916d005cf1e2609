"""`BlockStore`: look blocks up by `block_id` in an Arrow-backed blocks dataset."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch


def int_column(dataset: datasets.Dataset, name: str) -> np.ndarray:
    """An integer column as an int64 numpy array, read through Arrow in one go (not row by row)."""
    return np.array(dataset.with_format("arrow")[name].to_numpy(), dtype=np.int64)  # a writable copy


def lengths_mask(lengths: np.ndarray, width: int) -> np.ndarray:
    r"""
    Where the items of rows of `lengths` stand once the rows are right-padded to `width`.

    Args:
        lengths (`np.ndarray`): `[n]` length of each row.
        width (`int`): Length of the padded rows.

    Returns:
        `np.ndarray` of shape `(n, width)`, bool: True at the positions before each row's length.
    """
    return np.arange(width)[None, :] < lengths[:, None]


@dataclass(frozen=True, eq=False)
class RaggedRows:
    r"""
    The rows of a list column (e.g. the `input_ids` of `n` blocks) as one flat array: row `i` is
    `values[offsets[i] : offsets[i + 1]]`, or None where `valid` is False (a null in the column). The one reader of
    token-id columns: read from Arrow ([`from_arrow`]) or Python lists ([`from_lists`]), and padded into a batch
    ([`pad`], [`mask`]; chosen rows gathered on the way) without a Python object per item.

    Args:
        values (`np.ndarray`): The rows' items, concatenated (the column's dtype, e.g. int32).
        offsets (`np.ndarray`): `[n + 1]` int64, starting at 0.
        valid (`np.ndarray`, *optional*): `[n]` bool, False for a null row (empty in `values`); None: no nulls.
    """

    values: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """`[n]` int64 length of each row (0 for a null row)."""
        return self.offsets[1:] - self.offsets[:-1]  # np.diff's checks cost more than this on a batch's rows

    def row(self, i: int) -> np.ndarray | None:
        if self.valid is not None and not self.valid[i]:
            return None
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def tolist(self) -> list[list | None]:
        """The rows as Python lists (None for a null row), as `datasets` gives them."""
        return [None if row is None else row.tolist() for row in map(self.row, range(len(self)))]

    @staticmethod
    def _offsets(lengths: np.ndarray) -> np.ndarray:
        """`[n + 1]` int64 offsets of rows of `lengths` `[n]`."""
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets

    @classmethod
    def from_arrow(cls, column: pa.ChunkedArray | pa.Array) -> RaggedRows:
        """The rows of an Arrow list column (any number of chunks, sliced or not)."""
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        lengths = pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        values = array.flatten().to_numpy(zero_copy_only=False)  # nulls hold no items
        valid = None if array.null_count == 0 else ~array.is_null().to_numpy(zero_copy_only=False)
        return cls(values, cls._offsets(lengths), valid)

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], valid: np.ndarray | None = None) -> RaggedRows:
        r"""
        Rows of Python ints (lists or tuples) as int64 `RaggedRows`.

        Args:
            rows (`Sequence[Sequence[int]]`): The rows; a null row is given as an empty one, with `valid` False.
            valid (`np.ndarray`, *optional*): `[n]` bool, False for a null row; None: no nulls.
        """
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))  # [n]
        offsets = cls._offsets(lengths)
        values = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(offsets[-1]))
        return cls(values, offsets, valid)

    def mask(self, width: int | None = None) -> np.ndarray:
        r"""
        `[n, width]` bool: True at the positions of the rows' items once padded to `width` ([`lengths_mask`]).

        Args:
            width (`int`, *optional*): Length of the padded rows; defaults to the longest row's.
        """
        lengths = self.lengths
        return lengths_mask(lengths, int(lengths.max(initial=0)) if width is None else width)

    def pad(
        self,
        width: int | None = None,
        pad_value: int = 0,
        rows: np.ndarray | None = None,
        mask: np.ndarray | None = None,
    ) -> np.ndarray:
        r"""
        Rows right-padded to one width (a null row as all padding), gathered without a loop over rows.

        Args:
            width (`int`, *optional*): Length of the padded rows, at least the longest row's; defaults to it.
            pad_value (`int`, defaults to 0): What fills the positions past each row's length.
            rows (`np.ndarray`, *optional*): `[b]` positions of the rows to pad, in any order; all rows when omitted.
            mask (`np.ndarray`, *optional*): `[b, width]` [`lengths_mask`] of those rows, when the caller has it
                already (columns of the same row lengths, or an attention mask, share it); it sets the width.

        Returns:
            `np.ndarray` of shape `(b, width)` (`(n, width)` without `rows`), int64.
        """
        if mask is None:
            lengths = self.lengths if rows is None else self.offsets[rows + 1] - self.offsets[rows]  # [b]
            mask = lengths_mask(lengths, int(lengths.max(initial=0)) if width is None else width)  # [b, W]
        if rows is None or not len(self.values):
            out = np.full(mask.shape, pad_value, dtype=np.int64)  # [b, W]
            out[mask] = self.values  # a row-major mask: the items in the rows' order
            return out
        # each position's item: its row's start in `values` plus the position (past a row's end: the next rows'
        # items, clipped at the last one, then padding), a faster gather than one through a boolean mask
        out = self.values.take(self.offsets[rows][:, None] + np.arange(mask.shape[1]), mode="clip")  # [b, W]
        out = out.astype(np.int64)
        out[~mask] = pad_value
        return out


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
        self._views: dict[tuple, datasets.Dataset] = {}  # (columns, format) -> those columns of the blocks

    def __len__(self) -> int:
        return len(self.block_ids)

    def _view(self, columns: tuple[str, ...], format: str | None) -> datasets.Dataset:
        """The blocks' `columns` in `format` (None: the blocks' own), made once per state of the blocks
        (`select_columns` copies the dataset's metadata and hashes a new fingerprint: a millisecond that a training
        step would pay at every lookup). An in-place change of the blocks' format changes their fingerprint, and
        with it the view."""
        key = (columns, format, getattr(self.blocks, "_fingerprint", None))
        view = self._views.get(key)
        if view is None:
            view = self.blocks.select_columns(list(columns))
            if format is not None:
                view = view.with_format(format)
            self._views = {key: view, **{k: v for k, v in self._views.items() if k[2] == key[2]}}
        return view

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
        table = self.blocks if columns is None else self._view(tuple(columns), None)
        flat = table[rows.reshape(-1).tolist()]
        if rows.ndim <= 1:
            return flat
        width = rows.shape[-1]
        return {name: [values[i : i + width] for i in range(0, len(values), width)] for name, values in flat.items()}

    def take(self, block_ids: Any, columns: Iterable[str]) -> dict[str, np.ndarray | RaggedRows]:
        r"""
        The `columns` of the rows of `block_ids` as arrays, read from Arrow in one call (no Python object per
        item): what [`get`] returns, without building Python lists.

        Args:
            block_ids (`torch.LongTensor`, `np.ndarray` or list): Block ids, any shape (e.g. `[B, k]`).
            columns (`Iterable[str]`): Columns to return.

        Returns:
            `dict`: per column, a numpy array shaped like `block_ids` for a column of scalars, or [`RaggedRows`]
            over the flattened `block_ids` (row `i` of it is the block `block_ids.reshape(-1)[i]`) for a list column.

        Raises:
            `KeyError`: naming the ids that are not in the store.
        """
        rows = self.rows_of(block_ids)
        columns = tuple(columns)
        table = self._view(columns, "arrow")[rows.reshape(-1).tolist()]
        out: dict[str, np.ndarray | RaggedRows] = {}
        for name in columns:
            column = table.column(name)
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                out[name] = RaggedRows.from_arrow(column)
            else:
                out[name] = column.to_numpy().reshape(rows.shape)
        return out

