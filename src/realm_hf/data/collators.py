"""Batch collators for REALM pre-training: masked sentences + retrieved blocks -> retriever and encoder tensors."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..corpus.store import RaggedRows, lengths_mask
from ..modeling.knowledge_encoder import IGNORE_INDEX


__all__ = ["RETRIEVER_INPUT_NAMES", "RealmPretrainingCollator", "pad_sequences", "retriever_inputs"]

RETRIEVER_INPUT_NAMES = (
    "query_input_ids",
    "query_attention_mask",
    "query_token_type_ids",
    "candidate_input_ids",
    "candidate_attention_mask",
    "candidate_token_type_ids",
)
"""The `RealmRetriever.forward` arguments that a `RealmPretrainingCollator` batch holds, under the same names."""


def retriever_inputs(batch: dict) -> dict:
    """The `RealmRetriever.forward` arguments of a `RealmPretrainingCollator` batch (query and K candidate blocks)."""
    return {name: batch[name] for name in RETRIEVER_INPUT_NAMES}


def _as_list(values: Any) -> list[int]:
    """Token ids from a list, a numpy array or a tensor."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [int(value) for value in values]


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_value: int, pad_to_multiple_of: int | None = None, length: int | None = None
) -> torch.Tensor:
    """Right-pad lists of ids to one length (the longest, or `length`, rounded up to `pad_to_multiple_of`): `[N, L]`."""
    lengths = [len(sequence) for sequence in sequences]
    longest = max(lengths, default=0)
    length = longest if length is None else max(length, longest)
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    if longest and all(isinstance(sequence, (list, tuple)) for sequence in sequences):
        # one conversion for the whole batch (numpy reads Python ints several times faster than torch.tensor)
        return torch.from_numpy(RaggedRows.from_lists(sequences).pad(length, pad_value))
    out = torch.full((len(sequences), length), pad_value, dtype=torch.long)
    if not longest:
        return out
    for row, sequence in enumerate(sequences):
        if len(sequence):
            out[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return out


def _round_up(length: int, multiple: int | None) -> int:
    return -(-length // multiple) * multiple if multiple else length


class RealmPretrainingCollator:
    r"""
    Collate masked sentences and their retrieved blocks into the inputs of [`RealmRetriever`] and
    [`RealmKnowledgeEncoder`].

    For each masked example `x` (`[CLS] x_masked [SEP]` with `labels`, from [`build_masked_dataset`]) and its
    retrieved blocks `z` (rows of the blocks dataset with `input_ids` `[CLS] title [SEP] body [SEP]` and
    `token_type_ids`, the trivial candidate already excluded), it builds K candidates: the null document ∅ (the empty
    block `[CLS] [SEP] [SEP]`) first when `use_null_document`, then the retrieved blocks in order.

    Args:
        tokenizer: The BERT tokenizer (its `[CLS]`, `[SEP]` and pad ids are used).
        block_max_length (`int`, defaults to 288): Candidates longer than this are cut (their last id kept `[SEP]`).
        joined_max_length (`int`, defaults to 288):
            Length limit of `[CLS] x [SEP] z_body [SEP]`; the body is cut to fit.
        use_null_document (`bool`, defaults to `True`): Whether ∅ is candidate 0.
        pad_to_multiple_of (`int`, *optional*): Round padded lengths up to a multiple of this.

    Call it as `collator(examples, retrieved_blocks)` with `retrieved_blocks[b]` the list of block rows of example
    `b` (the same number for every example), or `collator(examples)` with each example holding them under
    `"retrieved_blocks"`. `retrieved_blocks` may also be the columns that [`BlockStore.take`] (or
    [`RealmIndex.get_block_arrays`]) returns for `[B, k]` block ids: `block_id` `[B, k]` and the
    [`~realm_hf.corpus.store.RaggedRows`] of `input_ids` (and `token_type_ids`), which the trainer passes: the same
    batch, built without a Python object per wordpiece.

    Returns a dict of `torch.long` tensors:
        - `query_input_ids`, `query_attention_mask`, `query_token_type_ids`: `[B, Lq]`;
        - `candidate_input_ids`, `candidate_attention_mask`, `candidate_token_type_ids`: `[B, K, Lb]`;
        - `input_ids`, `attention_mask`, `token_type_ids`: `[B, K, L]`, the joined sequences (token types 0 for
          `[CLS] x [SEP]`, 1 for `z_body [SEP]`);
        - `labels`: `[B, L]`, the example labels at the positions of the sentence (the same in every candidate),
          -100 elsewhere;
        - `candidate_block_ids`: `[B, K]`, the `block_id` of each candidate (-1 for ∅ or when unknown);
        - `source_block_ids`: `[B]`, the block each sentence came from (-1 when unknown);
    and `null_candidate_index`: the int 0 with the null document, else `None`.
    """

    def __init__(
        self,
        tokenizer: Any,
        block_max_length: int = 288,
        joined_max_length: int = 288,
        use_null_document: bool = True,
        pad_to_multiple_of: int | None = None,
    ):
        if block_max_length < 3:
            raise ValueError(f"block_max_length must be at least 3 ([CLS] [SEP] [SEP]), got {block_max_length}.")
        if joined_max_length < 4:
            raise ValueError(f"joined_max_length must be at least 4 ([CLS] x [SEP] [SEP]), got {joined_max_length}.")
        self.tokenizer = tokenizer
        self.block_max_length = block_max_length
        self.joined_max_length = joined_max_length
        self.use_null_document = use_null_document
        self.pad_to_multiple_of = pad_to_multiple_of
        self.cls_id = tokenizer.cls_token_id
        self.sep_id = tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if self.cls_id is None or self.sep_id is None:
            raise ValueError("The tokenizer needs [CLS] and [SEP] tokens (a BERT wordpiece tokenizer).")

    @property
    def null_document(self) -> dict[str, list[int]]:
        """The null document ∅: an empty block `[CLS] [SEP] [SEP]` (empty title, empty body)."""
        return {"input_ids": [self.cls_id, self.sep_id, self.sep_id], "token_type_ids": [0, 0, 1], "block_id": -1}

    def __call__(
        self,
        examples: Sequence[Mapping],
        retrieved_blocks: Sequence[Sequence[Mapping]] | Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        if not examples:
            raise ValueError("Cannot collate an empty batch.")
        if retrieved_blocks is None:
            if any("retrieved_blocks" not in example for example in examples):
                raise ValueError(
                    "Pass the retrieved blocks: collator(examples, retrieved_blocks) or a 'retrieved_blocks' key "
                    "in every example."
                )
            retrieved_blocks = [example["retrieved_blocks"] for example in examples]
        if isinstance(retrieved_blocks, Mapping):  # columns of `BlockStore.take`: block_id [B, k], RaggedRows
            block_ids = np.asarray(retrieved_blocks["block_id"], dtype=np.int64)
            if block_ids.ndim != 2 or len(block_ids) != len(examples):
                raise ValueError(
                    f"Retrieved blocks as columns need a block_id array [B={len(examples)}, k], got shape "
                    f"{list(block_ids.shape)}."
                )
            for name in ("input_ids", "token_type_ids"):
                rows = retrieved_blocks.get(name)
                if rows is not None and len(rows) != block_ids.size:
                    raise ValueError(f"Got {len(rows)} rows of {name} for {block_ids.size} retrieved blocks.")
            num_retrieved = block_ids.shape[1]
        else:
            if len(retrieved_blocks) != len(examples):
                raise ValueError(f"Got {len(retrieved_blocks)} lists of retrieved blocks for {len(examples)} examples.")
            counts = {len(blocks) for blocks in retrieved_blocks}
            if len(counts) != 1:
                raise ValueError(
                    f"Every example needs the same number of retrieved blocks, got {sorted(counts)}; retrieve k-1 "
                    "blocks for each (after excluding the trivial candidate)."
                )
            num_retrieved = counts.pop()
        if num_retrieved == 0 and not self.use_null_document:
            raise ValueError("No retrieved blocks and no null document: every example needs at least one candidate.")

        queries, labels, source_block_ids = [], [], []
        for index, example in enumerate(examples):
            query = _as_list(example["input_ids"])
            example_labels = _as_list(example["labels"])
            if len(example_labels) != len(query):
                raise ValueError(
                    f"Example {index} has {len(query)} input_ids but {len(example_labels)} labels; they must align."
                )
            if len(query) + 1 > self.joined_max_length:
                raise ValueError(
                    f"Example {index} has {len(query)} wordpieces, which leaves no room in joined_max_length="
                    f"{self.joined_max_length}; build the masked dataset with query_max_length < joined_max_length."
                )
            queries.append(query)
            labels.append(example_labels)
            source_block_ids.append(int(example.get("source_block_id", -1)))
        ids, types, lengths, block_ids = self._candidates(retrieved_blocks, len(examples), num_retrieved)
        return self._batch(queries, labels, source_block_ids, ids, types, lengths, block_ids)

    # ------------------------------------------------------------------------------------------- candidates
    def _candidates(
        self, retrieved_blocks: Any, batch_size: int, num_retrieved: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The `B*K` candidates, ∅ first in each example's when `use_null_document`, cut to `block_max_length`
        (the last id of a cut block set to [SEP]): ids and token types `[B*K, W]` (0 past each row's length), the
        lengths `[B*K]` and the block ids `[B, K]` (-1 for ∅ and for rows without one)."""
        if isinstance(retrieved_blocks, Mapping):
            block_ids = np.asarray(retrieved_blocks["block_id"], dtype=np.int64).reshape(batch_size, num_retrieved)
            id_rows, type_rows = retrieved_blocks["input_ids"], retrieved_blocks.get("token_type_ids")
            lengths = id_rows.lengths  # [B*k]
            if type_rows is None:
                type_rows = RaggedRows(np.zeros(0, np.int64), np.zeros(len(lengths) + 1, np.int64))
                has_types = np.zeros(len(lengths), dtype=bool)
            else:
                type_lengths = type_rows.lengths
                has_types = np.ones(len(lengths), bool) if type_rows.valid is None else np.asarray(type_rows.valid)
                bad = np.flatnonzero(has_types & (type_lengths != lengths))
                if len(bad):
                    raise ValueError(
                        f"A block has {lengths[bad[0]]} input_ids but {type_lengths[bad[0]]} token_type_ids."
                    )
        else:
            id_lists, type_lists, has_list, block_list = [], [], [], []
            for blocks in retrieved_blocks:
                for row in blocks:
                    row_ids = _as_list(row["input_ids"])
                    row_types = _as_list(row["token_type_ids"]) if row.get("token_type_ids") is not None else []
                    has_list.append(row.get("token_type_ids") is not None)
                    if has_list[-1] and len(row_types) != len(row_ids):
                        raise ValueError(f"A block has {len(row_ids)} input_ids but {len(row_types)} token_type_ids.")
                    id_lists.append(row_ids)
                    type_lists.append(row_types)
                    block_list.append(int(row.get("block_id", -1)))
            id_rows, type_rows = RaggedRows.from_lists(id_lists), RaggedRows.from_lists(type_lists)
            lengths = id_rows.lengths  # [B*k]
            has_types = np.asarray(has_list, dtype=bool)
            block_ids = np.asarray(block_list, dtype=np.int64).reshape(batch_size, num_retrieved)

        width = int(lengths.max(initial=0))
        ids = id_rows.pad(width)  # [B*k, W]
        types = type_rows.pad(width)  # [B*k, W]
        if not has_types.all() and width:
            # no token types: 0 up to the first [SEP] (the title), 1 after it (the body); without [SEP], all 0
            is_sep = (ids == self.sep_id) & lengths_mask(lengths, width)
            first_sep = np.where(is_sep.any(1), is_sep.argmax(1), lengths - 1)  # [B*k]
            derived = (np.arange(width)[None, :] > first_sep[:, None]).astype(np.int64)
            types = np.where(has_types[:, None], types, derived)
        if self.use_null_document:
            # ∅ = [CLS] [SEP] [SEP] with token types 0 0 1, before each example's retrieved blocks
            width = max(width, 3)
            null_ids, null_types = np.zeros((batch_size, 1, width), np.int64), np.zeros((batch_size, 1, width), np.int64)
            null_ids[:, 0, :3] = [self.cls_id, self.sep_id, self.sep_id]
            null_types[:, 0, :3] = [0, 0, 1]

            def per_example(rows: np.ndarray) -> np.ndarray:
                """The retrieved rows [B*k, W'] padded to ∅'s width and grouped by example: [B, k, W]."""
                return np.pad(rows, ((0, 0), (0, width - rows.shape[1]))).reshape(batch_size, num_retrieved, width)

            ids = np.concatenate([null_ids, per_example(ids)], axis=1).reshape(-1, width)
            types = np.concatenate([null_types, per_example(types)], axis=1).reshape(-1, width)
            lengths = np.concatenate(
                [np.full((batch_size, 1), 3, np.int64), lengths.reshape(batch_size, num_retrieved)], axis=1
            ).reshape(-1)
            block_ids = np.concatenate([np.full((batch_size, 1), -1, np.int64), block_ids], axis=1)
        if width > self.block_max_length:
            cut = lengths > self.block_max_length
            ids, types = ids[:, : self.block_max_length].copy(), types[:, : self.block_max_length]
            ids[cut, -1] = self.sep_id
            lengths = np.minimum(lengths, self.block_max_length)
        valid = lengths_mask(lengths, ids.shape[1])
        return np.where(valid, ids, 0), np.where(valid, types, 0), lengths, block_ids

    def _batch(
        self, queries: list[list[int]], labels: list[list[int]], source_block_ids: list[int], ids: np.ndarray,
        types: np.ndarray, lengths: np.ndarray, block_ids: np.ndarray,
    ) -> dict[str, Any]:
        """The tensors of the batch from the queries and the candidates of `_candidates`."""
        batch_size, num_candidates = block_ids.shape
        count, width = ids.shape
        multiple = self.pad_to_multiple_of
        query_rows = RaggedRows.from_lists(queries)
        # labels align with the queries (checked in `__call__`): the same offsets
        label_rows = RaggedRows(np.fromiter(itertools.chain.from_iterable(labels), np.int64), query_rows.offsets)
        query_lengths = query_rows.lengths  # [B]

        # the body of `[CLS] title [SEP] body [SEP]`: from the first token type 1, without the final [SEP], cut to
        # the room the sentence leaves in `[CLS] x [SEP] body [SEP]`
        rows = np.arange(count)
        if width:
            is_body = (types == 1) & lengths_mask(lengths, width)
            first = np.where(is_body.any(1), is_body.argmax(1), lengths)  # [B*K]
            last = ids[rows, np.maximum(lengths - 1, 0)]
        else:
            first, last = lengths.copy(), np.full(count, -1)
        ends_with_sep = (lengths > first) & (last == self.sep_id)
        query_of = np.repeat(query_lengths, num_candidates)  # [B*K] the sentence length of each candidate's example
        room = self.joined_max_length - query_of - 1
        body_lengths = np.minimum(lengths - first - ends_with_sep, room)  # [B*K]
        joined_lengths = query_of + body_lengths + 1  # [B*K]

        joined_length = _round_up(int(joined_lengths.max()), multiple)
        positions = np.arange(joined_length)[None, :]
        queries_padded = query_rows.pad(joined_length, self.pad_id)  # [B, L]
        joined = np.repeat(queries_padded, num_candidates, axis=0)  # [B*K, L] the sentence, then padding
        in_body = (positions >= query_of[:, None]) & (positions < (query_of + body_lengths)[:, None])
        if width:
            source = np.clip(first[:, None] + positions - query_of[:, None], 0, width - 1)
            joined = np.where(in_body, np.take_along_axis(ids, source, axis=1), joined)
        joined[rows, query_of + body_lengths] = self.sep_id
        joined_types = ((positions >= query_of[:, None]) & (positions < joined_lengths[:, None])).astype(np.int64)

        query_length = _round_up(int(query_lengths.max()), multiple)
        block_length = _round_up(int(lengths.max(initial=0)), multiple)
        candidate_ids = np.full((count, block_length), self.pad_id, dtype=np.int64)
        candidate_types = np.zeros((count, block_length), dtype=np.int64)
        kept = min(width, block_length)
        valid = lengths_mask(lengths, kept)
        candidate_ids[:, :kept] = np.where(valid, ids[:, :kept], self.pad_id)
        candidate_types[:, :kept] = types[:, :kept]

        def tensor(array: np.ndarray, *shape: int) -> torch.Tensor:
            return torch.from_numpy(np.require(array, np.int64, ["C", "W"])).view(*shape)

        query_input_ids = tensor(query_rows.pad(query_length, self.pad_id), batch_size, -1)
        return {
            "query_input_ids": query_input_ids,
            "query_attention_mask": tensor(query_rows.mask(query_length), batch_size, query_length),
            "query_token_type_ids": torch.zeros_like(query_input_ids),
            "candidate_input_ids": tensor(candidate_ids, batch_size, num_candidates, block_length),
            "candidate_attention_mask": tensor(
                lengths_mask(lengths, block_length), batch_size, num_candidates, block_length
            ),
            "candidate_token_type_ids": tensor(candidate_types, batch_size, num_candidates, block_length),
            "input_ids": tensor(joined, batch_size, num_candidates, joined_length),
            "attention_mask": tensor(
                lengths_mask(joined_lengths, joined_length), batch_size, num_candidates, joined_length
            ),
            "token_type_ids": tensor(joined_types, batch_size, num_candidates, joined_length),
            # the sentence comes first in every joined sequence, so its label positions are the query's
            "labels": tensor(label_rows.pad(joined_length, IGNORE_INDEX), batch_size, -1),
            "candidate_block_ids": tensor(block_ids, batch_size, num_candidates),
            "source_block_ids": torch.tensor(source_block_ids, dtype=torch.long),
            "null_candidate_index": 0 if self.use_null_document else None,
        }
