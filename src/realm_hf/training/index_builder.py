"""The index builder that the asynchronous refresher runs: document-tower snapshot -> fresh `RealmIndex`.

A module-level function (the refresher starts it by import path in a spawned process); everything it needs
arrives as a state dict plus JSON-able paths.
"""

from __future__ import annotations

import logging

import datasets
import torch
from transformers import AutoTokenizer

from ..index import RealmIndex
from ..modeling import RealmRetriever

logger = logging.getLogger(__name__)


def build_index_from_snapshot(
    state_dict: dict[str, torch.Tensor],
    step: int,
    retriever_dir: str,
    blocks_dir: str,
    tokenizer_dir: str,
    index_type: str = "Flat",
    batch_size: int = 64,
    dtype: str | None = "bfloat16",
) -> RealmIndex:
    """Rebuild the document tower of the retriever saved at `retriever_dir` with `state_dict` and index the blocks.

    Args:
        state_dict: `RealmRetriever.document_embedder.state_dict()` at the snapshot step.
        step: The training step of the snapshot (recorded in the manifest).
        retriever_dir: A saved `RealmRetriever` (architecture and the weights not in the snapshot).
        blocks_dir: The blocks dataset (`datasets.Dataset.save_to_disk`).
        tokenizer_dir: The tokenizer (for the pad id).
        index_type: faiss factory string or `"torch-exact"`.
        batch_size: Blocks per forward.
        dtype: Autocast dtype name (`"bfloat16"`, `"float16"`, or None for fp32).
    """
    retriever = RealmRetriever.from_pretrained(retriever_dir)
    retriever.document_embedder.load_state_dict(state_dict)
    blocks = datasets.load_from_disk(blocks_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    autocast = getattr(torch, dtype) if dtype and dtype != "float32" else None
    return RealmIndex.build(
        blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size, dtype=autocast, step=step
    )
