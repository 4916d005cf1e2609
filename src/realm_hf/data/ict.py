"""Inverse Cloze Task (ICT, Lee et al. 2019) examples for the warm start of the REALM retriever.

A sentence of a block is the query; the block is the positive, with that sentence removed most of the time so the
retriever learns more than word matching. The other positives of a batch are the negatives.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import numpy as np
import torch
from datasets.fingerprint import Hasher

from ..corpus.blocks import split_sentences
from ..utils.cached_map import cached_map
from ..utils.tokenizer_fingerprint import tokenizer_fingerprint
from .collators import pad_sequences


logger = logging.getLogger(__name__)

__all__ = ["ICT_FEATURES", "IctCollator", "build_ict_dataset", "sentence_char_spans"]

_ICT_VERSION = 1

ICT_FEATURES = datasets.Features(
    {
        "block_id": datasets.Value("int64"),
        "query_input_ids": datasets.List(datasets.Value("int32")),
        "block_input_ids": datasets.List(datasets.Value("int32")),
        "block_token_type_ids": datasets.List(datasets.Value("int8")),
        "sentence_removed": datasets.Value("bool"),
    }
)


def sentence_char_spans(text: str) -> list[tuple[int, int]]:
    """`(start, end)` character offsets in `text` of the sentences of [`realm_hf.corpus.split_sentences`]."""
    spans, cursor = [], 0
    for _, sentence in split_sentences(text):
        start = text.find(sentence, cursor)
        if start < 0:  # cannot happen for stripped substrings; be safe rather than misalign
            continue
        spans.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    return spans


def _title_ids(input_ids: list[int], token_type_ids: list[int] | None, sep_id: int) -> list[int]:
    """The title wordpieces of `[CLS] title [SEP] body [SEP]`."""
    if token_type_ids is not None and 1 in token_type_ids:
        return list(input_ids[1 : token_type_ids.index(1) - 1])
    return list(input_ids[1 : input_ids.index(sep_id)]) if sep_id in input_ids else []


def _ict_batch(
    batch: dict[str, list],
    indices: list[int],
    *,
    tokenizer: Any,
    query_max_length: int,
    block_max_length: int,
    remove_probability: float,
    seed: int,
) -> dict[str, list]:
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    texts = [text or "" for text in batch["text"]]
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    has_block_ids = "input_ids" in batch
    out: dict[str, list] = {name: [] for name in ICT_FEATURES}
    for row, text in enumerate(texts):
        sentences = sentence_char_spans(text)
        if len(sentences) < 2:
            continue
        rng = np.random.default_rng([seed, indices[row]])
        start, end = sentences[int(rng.integers(len(sentences)))]
        remove = bool(rng.random() < remove_probability)

        ids = encoded["input_ids"][row]
        offsets = np.asarray(encoded["offset_mapping"][row], dtype=np.int64).reshape(-1, 2)
        inside = (offsets[:, 0] >= start) & (offsets[:, 1] <= end)  # wordpieces of the query sentence
        query = [ids[k] for k in np.flatnonzero(inside)][: query_max_length - 2]
        if not query:
            continue
        body = [ids[k] for k in np.flatnonzero(~inside)] if remove else list(ids)

        if has_block_ids:
            types = batch["token_type_ids"][row] if "token_type_ids" in batch else None
            title = _title_ids(list(batch["input_ids"][row]), None if types is None else list(types), sep_id)
        else:
            title = tokenizer(batch["title"][row] or "", add_special_tokens=False)["input_ids"]
        title = title[: max(block_max_length - 4, 0)]
        body = body[: block_max_length - 3 - len(title)]

        out["block_id"].append(int(batch["block_id"][row]))
        out["query_input_ids"].append([cls_id, *query, sep_id])
        out["block_input_ids"].append([cls_id, *title, sep_id, *body, sep_id])
        out["block_token_type_ids"].append([0] * (len(title) + 2) + [1] * (len(body) + 1))
        out["sentence_removed"].append(remove)
    return out


def build_ict_dataset(
    blocks: datasets.Dataset | Sequence[Mapping],
    tokenizer: Any,
    query_max_length: int = 96,
    block_max_length: int = 288,
    remove_probability: float = 0.9,
    seed: int = 0,
    num_proc: int | None = 1,
    cache_dir: str | os.PathLike | None = None,
    *,
    batch_size: int = 256,
) -> datasets.Dataset:
    r"""
    One Inverse Cloze Task example per block: a sentence of the block (chosen with a seeded generator) is the query
    `[CLS] sentence [SEP]`; the positive is the block `[CLS] title [SEP] body [SEP]` with that sentence removed with
    probability `remove_probability` (kept otherwise, so the retriever still learns that word overlap matters).
    Blocks with fewer than 2 sentences are skipped (their count is logged).

    Args:
        blocks: The blocks dataset of [`realm_hf.corpus.split_into_blocks`] (columns `block_id`, `title`, `text`,
            `input_ids`, `token_type_ids`), or a list of such rows.
        tokenizer (`PreTrainedTokenizerFast`): The fast BERT tokenizer that built the blocks.
        query_max_length (`int`, defaults to 96): Queries are cut to this length, `[CLS]` and `[SEP]` included.
        block_max_length (`int`, defaults to 288): Positives are cut to this length.
        remove_probability (`float`, defaults to 0.9): Probability that the query sentence is removed from its block.
        seed (`int`, defaults to 0): Seed of the choices (the result is the same for any `num_proc`).
        num_proc (`int`, *optional*, defaults to 1): Processes for `datasets.map`.
        cache_dir (`str` or `os.PathLike`, *optional*): Directory of the Arrow cache file.
        batch_size (`int`, defaults to 256): Blocks per `map` batch.

    Returns:
        `datasets.Dataset` with columns `block_id`, `query_input_ids`, `block_input_ids`, `block_token_type_ids`
        and `sentence_removed`; batch it with [`IctCollator`].
    """
    if query_max_length < 3:
        raise ValueError(f"query_max_length must be at least 3 ([CLS] x [SEP]), got {query_max_length}.")
    if block_max_length < 4:
        raise ValueError(f"block_max_length must be at least 4 ([CLS] title [SEP] body [SEP]), got {block_max_length}.")
    if not 0.0 <= remove_probability <= 1.0:
        raise ValueError(f"remove_probability must be in [0, 1], got {remove_probability}.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"build_ict_dataset needs a fast tokenizer (offset mappings), got {type(tokenizer).__name__}; "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True)."
        )
    if not isinstance(blocks, datasets.Dataset):
        blocks = datasets.Dataset.from_list([dict(row) for row in blocks])
    missing = [name for name in ("block_id", "text") if name not in blocks.column_names]
    if missing:
        raise ValueError(
            f"ICT needs the blocks dataset of split_into_blocks; missing columns {missing} in {blocks.column_names}."
        )
    if "input_ids" not in blocks.column_names and "title" not in blocks.column_names:
        raise ValueError(
            "ICT needs the block titles: an 'input_ids' ([CLS] title [SEP] body [SEP]) or a 'title' column."
        )

    fingerprint = Hasher.hash(
        (_ICT_VERSION, blocks._fingerprint, tokenizer_fingerprint(tokenizer), query_max_length, block_max_length, remove_probability, seed)
    )
    began = time.perf_counter()
    examples = cached_map(
        blocks,
        _ict_batch,
        cache_dir=cache_dir,
        name=f"ict-{fingerprint}.arrow",
        fingerprint=fingerprint,
        with_indices=True,
        batch_size=batch_size,
        num_proc=num_proc,
        features=ICT_FEATURES,
        fn_kwargs={
            "tokenizer": tokenizer,
            "query_max_length": query_max_length,
            "block_max_length": block_max_length,
            "remove_probability": remove_probability,
            "seed": seed,
        },
        desc="Building ICT examples",
    )
    skipped = len(blocks) - len(examples)
    logger.info(
        "Built %d ICT examples from %d blocks in %.1fs; %d blocks skipped (fewer than 2 sentences)",
        len(examples),
        len(blocks),
        time.perf_counter() - began,
        skipped,
    )
    return examples


class IctCollator:
    r"""
    Pad ICT examples into a batch. In-batch negatives: row `b` of the queries matches row `b` of the blocks, every
    other block of the batch is a negative, so the trainer computes `query_embeds @ block_embeds.T` (`[B, B]`) and a
    cross-entropy with labels `arange(B)`.

    Args:
        tokenizer: The BERT tokenizer (its pad id is used).
        pad_to_multiple_of (`int`, *optional*): Round padded lengths up to a multiple of this.

    Returns a dict of `torch.long` tensors: `query_input_ids`, `query_attention_mask`, `query_token_type_ids`
    (`[B, Lq]`), `block_input_ids`, `block_attention_mask`, `block_token_type_ids` (`[B, Lb]`) and `block_ids`
    (`[B]`, -1 when unknown).
    """

    def __init__(self, tokenizer: Any, pad_to_multiple_of: int | None = None):
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, examples: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ValueError("Cannot collate an empty batch.")
        queries = [list(example["query_input_ids"]) for example in examples]
        blocks = [list(example["block_input_ids"]) for example in examples]
        block_types = [list(example["block_token_type_ids"]) for example in examples]
        query_input_ids = pad_sequences(queries, self.pad_id, self.pad_to_multiple_of)  # [B, Lq]
        block_input_ids = pad_sequences(blocks, self.pad_id, self.pad_to_multiple_of)  # [B, Lb]

        def mask(sequences: list[list[int]], length: int) -> torch.Tensor:
            lengths = torch.tensor([len(sequence) for sequence in sequences])
            return (torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)).long()

        return {
            "query_input_ids": query_input_ids,
            "query_attention_mask": mask(queries, query_input_ids.shape[-1]),
            "query_token_type_ids": torch.zeros_like(query_input_ids),
            "block_input_ids": block_input_ids,
            "block_attention_mask": mask(blocks, block_input_ids.shape[-1]),
            "block_token_type_ids": pad_sequences(block_types, 0, length=block_input_ids.shape[-1]),
            "block_ids": torch.tensor([int(example.get("block_id", -1)) for example in examples], dtype=torch.long),
        }
