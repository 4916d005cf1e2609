"""`BlockStore.take` (the trainers' candidate fetch: Arrow columns as arrays, one call) reads exactly what
`BlockStore.get` (rows as Python lists) does, whatever the blocks: reordered or filtered (an indices mapping), with
nulls, memory-mapped from several Arrow chunks; and `get` still follows an in-place change of the blocks' format."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch

from realm_hf.corpus.store import BlockStore, RaggedRows

FEATURES = datasets.Features(
    {
        "block_id": datasets.Value("int64"),
        "title": datasets.Value("string"),
        "input_ids": datasets.List(datasets.Value("int32")),
        "token_type_ids": datasets.List(datasets.Value("int8")),
    }
)


def make_blocks(count: int, seed: int = 0) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    ids, types = [], []
    for i in range(count):
        length = int(rng.integers(0, 12))
        ids.append(rng.integers(100, 200, size=length).tolist())
        types.append(None if i % 7 == 3 else [int(j > length // 2) for j in range(length)])
    return datasets.Dataset.from_dict(
        {"block_id": list(range(count)), "title": [f"t{i}" for i in range(count)], "input_ids": ids,
         "token_type_ids": types},
        features=FEATURES,
    )


def assert_take_matches_get(store: BlockStore, block_ids) -> None:
    columns = ["block_id", "title", "input_ids", "token_type_ids"]
    rows = store.get(block_ids, columns)
    taken = store.take(block_ids, columns)
    flat = np.asarray(block_ids).reshape(-1)
    width = np.asarray(block_ids).shape[-1]

    def unflatten(values):
        return [values[i : i + width] for i in range(0, len(values), width)]

    assert taken["block_id"].tolist() == rows["block_id"]
    assert taken["block_id"].shape == np.asarray(block_ids).shape
    assert taken["title"].tolist() == rows["title"]
    for name in ("input_ids", "token_type_ids"):
        assert isinstance(taken[name], RaggedRows) and len(taken[name]) == len(flat)
        assert unflatten(taken[name].tolist()) == rows[name]
        assert taken[name].lengths.tolist() == [len(row or []) for row in taken[name].tolist()]


@pytest.mark.parametrize("reorder", [False, True])
def test_take_reads_what_get_reads(reorder):
    blocks = make_blocks(40)
    if reorder:  # an indices mapping (as after RealmIndex.remove) and block ids that are not row positions
        blocks = blocks.select(np.random.default_rng(1).permutation(40)[:30])
    store = BlockStore(blocks)
    ids = store.block_ids
    for block_ids in (ids[:1].reshape(1, 1), ids[[3, 3, 10, 17, 2, 0]].reshape(2, 3), ids[5:25].reshape(4, 5)):
        assert_take_matches_get(store, block_ids)
    assert_take_matches_get(store, torch.as_tensor(ids[[4, 9]]).view(1, 2))
    empty = store.take(np.zeros((0, 3), dtype=np.int64), ["block_id", "input_ids"])
    assert empty["block_id"].shape == (0, 3) and len(empty["input_ids"]) == 0
    with pytest.raises(KeyError, match="not in the index"):
        store.take([[10_000]], ["input_ids"])


def test_take_reads_memory_mapped_blocks_of_several_chunks(tmp_path):
    make_blocks(50).save_to_disk(str(tmp_path / "blocks"), max_shard_size="1KB")
    blocks = datasets.load_from_disk(str(tmp_path / "blocks")).map(lambda row: row, batch_size=7, writer_batch_size=7)
    assert blocks.data.column("input_ids").num_chunks > 1
    assert_take_matches_get(BlockStore(blocks), np.array([[49, 0, 13], [7, 8, 48]]))


def test_get_follows_an_in_place_format_change():
    blocks = make_blocks(5)
    store = BlockStore(blocks)
    assert store.get([[1, 2]], ["input_ids"])["input_ids"] == [[blocks[1]["input_ids"], blocks[2]["input_ids"]]]
    blocks.set_format("numpy", columns=["block_id"])
    assert isinstance(store.get([0, 1], ["block_id"])["block_id"], np.ndarray)
    assert store.take([0, 1], ["block_id"])["block_id"].tolist() == [0, 1]


def padded_by_hand(rows: list, width: int, pad_value: int) -> np.ndarray:
    return np.array([(row or []) + [pad_value] * (width - len(row or [])) for row in rows], dtype=np.int64).reshape(
        len(rows), width
    )


def test_ragged_rows_pad_all_rows_or_chosen_ones():
    column = make_blocks(30).with_format("arrow")["token_type_ids"]  # nulls, empty rows, int8
    ragged = RaggedRows.from_arrow(column)
    rows = ragged.tolist()
    longest = max(len(row or []) for row in rows)
    assert np.array_equal(ragged.pad(pad_value=-1), padded_by_hand(rows, longest, -1))
    assert np.array_equal(ragged.pad(longest + 3, 7), padded_by_hand(rows, longest + 3, 7))
    assert np.array_equal(ragged.mask(longest + 3), padded_by_hand(rows, longest + 3, 7) != 7)
    for chosen in (np.array([29, 3, 0, 3, 17]), np.array([3]), np.zeros(0, dtype=np.int64)):
        picked = [rows[i] for i in chosen]
        width = max([len(row or []) for row in picked], default=0)
        assert np.array_equal(ragged.pad(pad_value=9, rows=chosen), padded_by_hand(picked, width, 9))
        mask = padded_by_hand(picked, width + 2, 9) != 9  # a mask given by the caller sets the width
        assert np.array_equal(ragged.pad(pad_value=9, rows=chosen, mask=mask), padded_by_hand(picked, width + 2, 9))
    empty = RaggedRows.from_lists([[], []])  # no items at all
    assert np.array_equal(empty.pad(4, 5, rows=np.array([1, 0])), np.full((2, 4), 5))
    assert RaggedRows.from_lists([[1, 2], (3,)]).tolist() == [[1, 2], [3]]
