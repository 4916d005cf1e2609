"""Pieces shared by the REALM pipelines: input checks, query encoding, the index of one call."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import torch

from ..utils.messages import excerpt

logger = logging.getLogger(__name__)

def check_fast_tokenizer(tokenizer: Any, pipeline_name: str) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"{pipeline_name} needs a fast tokenizer (its offset mapping locates answers in the text), got "
            f"{type(tokenizer).__name__}; load it with AutoTokenizer.from_pretrained(..., use_fast=True)."
        )
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError(f"{pipeline_name} needs a BERT wordpiece tokenizer with [CLS] and [SEP] tokens.")


def check_text(value: Any, what: str, position: int | None = None) -> str:
    """A non-empty string, or a ValueError / TypeError that names the bad item."""
    where = f"{what} {position} of the batch" if position is not None else f"the {what}"
    if value is None:
        raise ValueError(f"{where[0].upper()}{where[1:]} is None; pass a non-empty string.")
    if not isinstance(value, str):
        raise TypeError(f"{where[0].upper()}{where[1:]} must be a string, got {type(value).__name__}: {value!r}.")
    if not value.strip():
        raise ValueError(f"{where[0].upper()}{where[1:]} is empty or only whitespace ({value!r}).")
    return value


def check_batch(inputs: Any, what: str) -> Any:
    """Validate a string or a list of strings up front, so a bad item is named by its position."""
    if isinstance(inputs, tuple):
        inputs = list(inputs)
    if isinstance(inputs, list):
        for position, item in enumerate(inputs):
            if isinstance(item, dict) and what in item:
                item = item[what]
            check_text(item, what, position)
    elif isinstance(inputs, (str, type(None))) or not hasattr(inputs, "__iter__"):
        check_text(inputs, what)
    return inputs


def encode_query(
    tokenizer: Any, text: str, max_length: int, what: str, keep_ids: Sequence[int] = ()
) -> dict[str, torch.Tensor]:
    """`[CLS] text [SEP]` as `[1, L]` tensors. Longer than `max_length` wordpieces: truncated, with a warning.

    Truncation drops wordpieces from the end of the text (the final [SEP] is kept). It raises when that would cut
    a token listed in `keep_ids` (e.g. a [MASK] to fill).
    """
    ids = tokenizer(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    if len(ids) <= 2:
        raise ValueError(f"The {what} {excerpt(text)} has no wordpieces the tokenizer keeps; pass some text.")
    if len(ids) > max_length:
        kept = ids[: max_length - 1] + [tokenizer.sep_token_id]
        lost = [i for i in ids[max_length - 1 : -1] if i in keep_ids]
        if lost:
            raise ValueError(
                f"The {what} has {len(ids)} wordpieces, more than query_max_length={max_length}, and truncating it "
                f"would cut {len(lost)} [MASK] token(s); shorten the text before the masks."
            )
        logger.warning(
            "The %s has %d wordpieces, more than the retriever's query_max_length=%d; it is truncated to its first "
            "%d wordpieces: %s",
            what,
            len(ids),
            max_length,
            max_length - 2,
            excerpt(text),
        )
        ids = kept
    input_ids = torch.tensor([ids], dtype=torch.long)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }


def check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
    return value


def block_embeddings(index: Any, block_ids: torch.Tensor) -> torch.Tensor | None:
    """The stored embeddings `[B, k, D]` of the blocks `block_ids` `[B, k]`, or `None` when the index keeps them out
    of reach (a sharded index: then the caller embeds the blocks with the document tower)."""
    if not hasattr(index, "get_embeddings"):
        return None
    return index.get_embeddings(block_ids)


def resolve_call_index(index: Any, default: Any, cache: dict[str, Any], **load_kwargs: Any) -> Any:
    """The index of one pipeline call: the pipeline's own (`index=None`), an index object (its dimension checked), or
    a path / repo id loaded once and kept in `cache`. `load_kwargs` go to [`load_index_for_model`]."""
    from ..checkpoints.index_location import load_index_for_model

    if index is None:
        return default
    if hasattr(index, "search"):
        return load_index_for_model(None, index=index, **load_kwargs)
    key = str(index)
    if key not in cache:
        cache[key] = load_index_for_model(None, index=index, **load_kwargs)
    return cache[key]
