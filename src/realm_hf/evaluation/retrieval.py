"""Retrieval for Open-QA evaluation and fine-tuning: the top-k blocks of each question (dense MIPS with the query
tower, or BM25 over the same blocks), the `RealmForOpenQA` batch collated from them, and Recall@k at several depths
without reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.openqa import OpenQaCollator
from .answer_match import has_answer


__all__ = [
    "RETRIEVALS", "block_embeddings", "block_text", "make_collator", "retrieval_hits", "retrieve_and_collate",
    "retrieve_blocks",
]

RETRIEVALS = ("dense", "bm25")
_BLOCK_COLUMNS = ("block_id", "title", "text", "input_ids", "token_type_ids")


def block_embeddings(index: Any, block_ids: torch.Tensor | np.ndarray) -> torch.Tensor:
    """The stored embeddings `[..., D]` of `block_ids` (see [`RealmIndex.get_embeddings`])."""
    return index.get_embeddings(block_ids)


def make_collator(
    model: Any,
    tokenizer: Any,
    query_max_length: int | None = None,
    reader_max_length: int | None = None,
    truncate_questions: bool = False,
) -> OpenQaCollator:
    """An [`OpenQaCollator`] sized by the model's config (overrides may only shorten)."""
    retriever_length = model.config.retriever_config.query_max_length
    reader_length = model.config.reader_config.max_length
    return OpenQaCollator(
        tokenizer,
        query_max_length=min(query_max_length or retriever_length, retriever_length),
        reader_max_length=min(reader_max_length or reader_length, reader_length),
        max_span_width=model.config.reader_config.max_span_width,
        truncate_questions=truncate_questions,
    )


def retrieve_blocks(
    model: Any,
    index: Any,
    collator: OpenQaCollator,
    examples: Sequence[dict[str, Any]],
    k: int,
    device: torch.device | str | None = None,
    retrieval: str = "dense",
    bm25: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    `(scores, block_ids)`, each `[B, k]` on CPU: the top-`k` blocks of each question, best first, that
    [`retrieve_and_collate`] collates (same arguments; `examples` already normalized), found without reading them.
    """
    if retrieval not in RETRIEVALS:
        raise ValueError(f"retrieval must be one of {RETRIEVALS}, got {retrieval!r}.")
    if retrieval == "bm25":
        if bm25 is None:
            raise ValueError("retrieval='bm25' needs a Bm25Retriever: pass bm25=Bm25Retriever(index).")
        block_ids, scores = bm25.search_text([e["question"] for e in examples], k, return_scores=True)
        return scores, block_ids
    queries = collator.encode_questions(examples)
    if device is None:
        device = next(model.parameters()).device
    # the choice of blocks should not depend on dropout: search with the query tower in eval mode
    tower = getattr(model, "retriever", model)
    was_training = tower.training
    tower.eval()
    try:
        with torch.no_grad():
            query_embeds = model.embed_queries(
                queries["query_input_ids"].to(device),
                queries["query_attention_mask"].to(device),
                queries["query_token_type_ids"].to(device),
            )  # [B, D]
    finally:
        tower.train(was_training)
    return index.search(query_embeds.float().cpu(), k)  # [B, k]


def retrieve_and_collate(
    model: Any,
    index: Any,
    collator: OpenQaCollator,
    examples: Sequence[Any],
    k: int,
    device: torch.device | str | None = None,
    retrieval: str = "dense",
    bm25: Any = None,
) -> dict[str, Any]:
    r"""
    Retrieve the top-`k` blocks of each question ([`retrieve_blocks`]) and collate the `RealmForOpenQA` batch (see
    [`OpenQaCollator`]).

    Args:
        model: A `RealmForOpenQA` (or anything with `embed_queries`); queries are embedded without gradient.
        index (`RealmIndex`): The fixed index (blocks + stored embeddings).
        collator ([`OpenQaCollator`]): Builds the tensors.
        examples: QA dicts or question strings.
        k (`int`): Blocks per question.
        device: Where the query tower runs (default: the model's device).
        retrieval (`str`): `"dense"` (MIPS with the query tower) or `"bm25"` (with `bm25`, a [`Bm25Retriever`]);
            either way the candidates are scored with their stored dense embeddings for `p(z|x)`.

    Returns:
        The collated batch on CPU, plus `retrieval_scores` `[B, k]` (the index's or BM25's scores).
    """
    examples = collator.normalize_examples(examples)
    scores, block_ids = retrieve_blocks(model, index, collator, examples, k, device, retrieval=retrieval, bm25=bm25)
    columns = [c for c in _BLOCK_COLUMNS if c in index.blocks.column_names]
    rows = index.get_blocks(block_ids, columns=columns)
    batch = collator(examples, rows, block_embeddings(index, block_ids))
    batch["retrieval_scores"] = scores
    return batch


def block_text(title: Any, text: Any) -> str:
    """A block as Recall@k searches it: title and body."""
    return f"{title or ''} {text or ''}".strip()


def retrieval_hits(
    model: Any,
    index: Any,
    collator: OpenQaCollator,
    examples: Sequence[dict[str, Any]],
    depths: Sequence[int],
    batch_size: int = 16,
    device: torch.device | str | None = None,
    retrieval: str = "dense",
    bm25: Any = None,
    progress: bool = True,
) -> list[dict[str, bool]]:
    r"""
    Per question, whether an answer is in its top-`k` retrieved blocks for each `k` of `depths`: one retrieval
    ([`retrieve_blocks`], `max(depths)` blocks a question, `batch_size` questions a search) and nothing read.

    A block holds an answer by DPR's [`has_answer`] on its title and body, as [`recall_at_k`] decides it, so the
    percentage of `True` under `str(k)` is `recall_at_k` of the top-`k` blocks.

    Returns:
        `list[dict[str, bool]]`: `{"5": bool, "20": bool, ...}` a question, the keys in the order of `depths`.
    """
    depth = max(depths)
    columns = [c for c in ("title", "text") if c in index.blocks.column_names]
    hits: list[dict[str, bool]] = []
    bar = tqdm(total=len(examples), desc=f"retrieval recall@{depth}", disable=not progress)
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        _, block_ids = retrieve_blocks(model, index, collator, chunk, depth, device, retrieval=retrieval, bm25=bm25)
        rows = index.get_blocks(block_ids, columns=columns)
        for b, example in enumerate(chunk):
            titles = rows["title"][b] if "title" in rows else [""] * len(rows["text"][b])
            texts = (block_text(title, text) for title, text in zip(titles, rows["text"][b]))
            # the rank of the first block with an answer (`depth` when none): found at k iff it is below k
            answers, answer_format = example["answers"], example["answer_format"]
            first = next((rank for rank, text in enumerate(texts) if has_answer(text, answers, answer_format)), depth)
            hits.append({str(k): first < k for k in depths})
        bar.update(len(chunk))
    bar.close()
    return hits
