"""Update what a trained REALM model knows by adding documents to its index, without retraining (REALM paper,
Appendix C: the retriever and the encoder are kept, only the knowledge corpus changes).

```python
>>> from transformers import pipeline
>>> from realm_hf.retrieval import add_articles_to_index
>>> qa = pipeline("open-domain-question-answering", model="outputs/openqa/final")
>>> new_ids = add_articles_to_index(qa.index, qa.model, qa.tokenizer, "../shared/data/wiki-2021-new")
>>> qa("who plays for trouville in the uruguayan basketball league")["block_id"] in new_ids
```

The new blocks are embedded with the model's own *document* tower, the one that built the index, so they are scored
on the same footing as the old ones; the old blocks, their ids and their embeddings do not change.
`realm_hf.data.title_probes.title_probe` makes a question (and a cloze query) about a new article from its first
sentence, to see the update.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from ..corpus import load_articles
from ..index import RealmIndex
from ..index.embedding import block_lengths

logger = logging.getLogger(__name__)

__all__ = ["add_articles_to_index"]


def _document_retriever(model: Any) -> Any:
    """The `RealmRetriever` of a `RealmForOpenQA` (or a `RealmRetriever` itself): what embeds documents."""
    retriever = getattr(model, "retriever", model)
    if not hasattr(retriever, "document_embedder") or not hasattr(retriever, "embed_documents"):
        raise TypeError(
            f"Expected a RealmForOpenQA or a RealmRetriever (the document tower embeds the new blocks), got "
            f"{type(model).__name__}."
        )
    return retriever


def add_articles_to_index(
    index: RealmIndex,
    model: Any,
    tokenizer: Any,
    articles: Any,
    max_length: int | None = None,
    batch_size: int = 64,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    skip_existing: bool = True,
) -> np.ndarray:
    r"""
    Split `articles` into blocks and add them to `index`, embedded with the model's own document tower.

    Args:
        index ([`RealmIndex`]): The model's index, updated in place (save it with `save_pretrained` to keep it).
        model (`RealmForOpenQA` or `RealmRetriever`): The trained model; its retriever's document tower embeds the
            new blocks (the tower that built `index`; another one is logged as a warning by [`RealmIndex.add`]).
        tokenizer (`PreTrainedTokenizerFast`): The model's fast tokenizer (splits the articles into blocks).
        articles: Anything [`load_articles`] takes: JSONL / JSONL.gz / Parquet paths, a directory, a
            `datasets.Dataset` or a list of `{"id", "title", "text"}` dicts.
        max_length (`int`, *optional*): Block length in wordpieces. Defaults to the longest block already in the
            index (the length it was built with), at most the retriever's `block_max_length`.
        batch_size (`int`, defaults to 64): Blocks per forward pass.
        device (`str` or `torch.device`, *optional*): Where the document tower runs (default: its device).
        dtype (`torch.dtype`, *optional*): Autocast dtype for embedding, e.g. `torch.bfloat16`.
        skip_existing (`bool`, defaults to `True`): Leave out articles whose `id` is already in the index's
            `article_id` column, so adding the same articles twice adds nothing.

    Returns:
        `np.ndarray`: the block ids of the new blocks (empty when nothing was added); they come after every old id.
    """
    retriever = _document_retriever(model)
    config_length = int(retriever.config.block_max_length)
    if max_length is None:
        longest = int(block_lengths(index.blocks).max()) if index.num_blocks else config_length
        max_length = min(longest, config_length)
    elif max_length > config_length:
        raise ValueError(
            f"max_length={max_length} is longer than the retriever's block_max_length={config_length}; pass at most "
            f"{config_length} (or leave it unset to use the index's block length)."
        )
    articles = load_articles(articles)
    if skip_existing and "article_id" in index.blocks.column_names and len(articles):
        indexed = set(index.blocks.unique("article_id"))
        keep = [i for i, article_id in enumerate(articles["id"]) if article_id not in indexed]
        if len(keep) < len(articles):
            logger.info("Skipping %d of %d articles already in the index", len(articles) - len(keep), len(articles))
            articles = articles.select(keep)
    if not len(articles):
        return np.zeros(0, dtype=np.int64)
    new_ids = index.add(
        articles, retriever, tokenizer=tokenizer, batch_size=batch_size, device=device, dtype=dtype,
        max_length=max_length,
    )
    logger.info("Added %d articles as %d blocks of at most %d wordpieces", len(articles), len(new_ids), max_length)
    return new_ids
