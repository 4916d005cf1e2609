"""Index a corpus with a retriever's document tower, and search the index with its query tower (with provenance)."""

from __future__ import annotations

import os

import torch

from ..corpus import load_corpus_articles, split_into_blocks
from ..index import RealmIndex
from ..modeling import RealmRetriever
from ..utils.precision import autocast_dtype, resolve_embed_dtype, resolve_mixed_precision
from .loading import load_retriever

__all__ = ["build_index", "search"]


def build_index(
    corpus: str, model: str, output: str, index_type: str = "Flat", max_articles: int | None = None,
    block_length: int = 288, batch_size: int = 64, dtype: str = "auto",
) -> RealmIndex:
    """Split a corpus into blocks, embed them with the retriever's document tower, save the index; `dtype` "auto"
    embeds under bf16 autocast only where it is faster here (see `utils.precision`)."""
    articles = load_corpus_articles(corpus, max_articles)  # first: a malformed corpus fails before a model is loaded
    retriever, tokenizer = load_retriever(model)
    if dtype == "auto":
        device_type = next(retriever.parameters()).device.type
        dtype = resolve_embed_dtype("auto", resolve_mixed_precision("auto", device_type))
    blocks = split_into_blocks(articles, tokenizer, max_length=min(block_length, retriever.config.block_max_length))
    index = RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size,
                             dtype=autocast_dtype(dtype))
    index.save_pretrained(output)
    tokenizer.save_pretrained(os.path.join(output, "tokenizer"))
    return index


def search(index: RealmIndex, retriever: RealmRetriever, tokenizer, queries: list[str], k: int) -> list[list[dict]]:
    """Top-k blocks with provenance (block id, title, score, text) for each query."""
    encoded = tokenizer(queries, padding=True, truncation=True, max_length=retriever.config.query_max_length, return_tensors="pt")
    with torch.no_grad():
        embeds = retriever.embed_queries(encoded["input_ids"], encoded["attention_mask"], encoded.get("token_type_ids"))
    scores, ids = index.search(embeds, k)
    rows = index.get_blocks(ids, columns=["block_id", "title", "text"])
    return [
        [
            {"block_id": int(rows["block_id"][b][j]), "title": rows["title"][b][j], "score": float(scores[b, j]),
             "text": rows["text"][b][j]}
            for j in range(ids.shape[1])
        ]
        for b in range(len(queries))
    ]
