"""What the `realm-hf` subcommands do (the CLI module only parses arguments)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import torch
from transformers import AutoTokenizer

from .corpus import split_into_blocks
from .index import RealmIndex
from .initial_weights import resolve_bert_path
from .modeling import RealmForOpenQA, RealmRetriever

logger = logging.getLogger(__name__)

DEMO_QUESTIONS = [
    "who developed the theory of general relativity",
    "what is the largest planet in the solar system",
    "which river flows through cairo",
    "what language is spoken in brazil",
]


def load_retriever(name_or_path: str) -> tuple[RealmRetriever, object]:
    """A retriever and its tokenizer from a RealmRetriever / RealmForOpenQA directory, or any BERT ('minilm').

    A plain BERT (such as the packaged all-MiniLM-L6-v2) is used as a sentence embedder: mean pooling, no
    projection, normalized, the geometry it was trained with; REALM training then learns its own.
    """
    path = resolve_bert_path(name_or_path)
    config_file = os.path.join(path, "config.json")
    model_type = None
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    if model_type == "realm_retriever":
        retriever = RealmRetriever.from_pretrained(path)
    elif model_type == "realm_open_qa":
        retriever = RealmForOpenQA.from_pretrained(path).retriever
    else:
        retriever = RealmRetriever.from_bert(path, projection_size=None, pooling="mean", normalize_embeddings=True)
    tokenizer_path = path if os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(
        os.path.join(path, "vocab.txt")
    ) else resolve_bert_path("minilm")
    return retriever.eval(), AutoTokenizer.from_pretrained(tokenizer_path)


def _load_articles(corpus: str, max_articles: int | None):
    from .training.pretrain import load_corpus_articles

    return load_corpus_articles(corpus, max_articles)


def build_index(
    corpus: str, model: str, output: str, index_type: str = "Flat", max_articles: int | None = None,
    block_length: int = 288, batch_size: int = 64, dtype: str = "bfloat16",
) -> RealmIndex:
    """Split a corpus into blocks, embed them with the retriever's document tower, save the index."""
    retriever, tokenizer = load_retriever(model)
    articles = _load_articles(corpus, max_articles)
    blocks = split_into_blocks(articles, tokenizer, max_length=min(block_length, retriever.config.block_max_length))
    autocast = None if dtype == "float32" else getattr(torch, dtype)
    index = RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size, dtype=autocast)
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


def _print_hits(query: str, hits: list[dict]) -> None:
    print(f"\nQ: {query}")
    for rank, hit in enumerate(hits, 1):
        snippet = hit["text"][:160].replace("\n", " ")
        print(f"  {rank}. [{hit['title']}] (block {hit['block_id']}, score {hit['score']:.3f}) {snippet}...")


def run_demo(max_articles: int | None, output: str, questions: list[str] | None, top_k: int, batch_size: int) -> None:
    """Index the embedded corpus with the packaged MiniLM and retrieve evidence for a few questions."""
    began = time.time()
    if os.path.isfile(os.path.join(output, "manifest.json")):
        logger.info("Reusing the index at %s (delete it to rebuild)", output)
        index = RealmIndex.from_pretrained(output)
    else:
        index = build_index("embedded", "minilm", output, max_articles=max_articles, batch_size=batch_size)
    retriever, tokenizer = load_retriever("minilm")
    logger.info("Index of %d blocks ready in %.0fs", index.num_blocks, time.time() - began)
    for question in questions or DEMO_QUESTIONS:
        _print_hits(question, search(index, retriever, tokenizer, [question], top_k)[0])


def build_index_command(args: argparse.Namespace) -> None:
    build_index(
        args.corpus, args.model, args.output, index_type=args.index_type, max_articles=args.max_articles,
        block_length=args.block_length, batch_size=args.batch_size, dtype=args.dtype,
    )


def search_command(args: argparse.Namespace) -> None:
    index = RealmIndex.from_pretrained(args.index)
    retriever, tokenizer = load_retriever(args.model)
    query = " ".join(args.query)
    _print_hits(query, search(index, retriever, tokenizer, [query], args.top_k)[0])
