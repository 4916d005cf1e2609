"""Split articles into REALM blocks: `[CLS] title [SEP] body [SEP]` of at most `max_length` wordpieces."""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

import datasets
import numpy as np
from datasets.fingerprint import Hasher

from ..utils.cached_map import cached_map
from ..utils.tokenizer_fingerprint import tokenizer_fingerprint
from .articles import load_articles


logger = logging.getLogger(__name__)

__all__ = ["BLOCK_FEATURES", "load_articles", "split_into_blocks", "split_sentences"]

BLOCK_FEATURES = datasets.Features(
    {
        "article_id": datasets.Value("string"),
        "title": datasets.Value("string"),
        "text": datasets.Value("string"),
        "input_ids": datasets.List(datasets.Value("int32")),
        "token_type_ids": datasets.List(datasets.Value("int8")),
    }
)

# a boundary is whitespace after . ! ? (optionally followed by a closing quote or bracket) and before what looks
# like the start of a sentence; "simple" on purpose: abbreviations such as "Mr. Smith" split too
_SENTENCE_BOUNDARY = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[tuple[int, str]]:
    r"""
    Split `text` into `(paragraph_index, sentence)` pairs; paragraphs are separated by `"\n"`.

    Args:
        text (`str`): Article body.

    Returns:
        `list[tuple[int, str]]`: non-empty, stripped sentences with the index of their paragraph.
    """
    sentences = []
    for paragraph_index, paragraph in enumerate(text.split("\n")):
        for sentence in _SENTENCE_BOUNDARY.split(paragraph.strip()):
            sentence = sentence.strip()
            if sentence:
                sentences.append((paragraph_index, sentence))
    return sentences


def _pieces(
    sentence: str, ids: list[int], offsets: list[tuple[int, int]], word_ids: list[int | None], budget: int
) -> list[tuple[str, list[int]]]:
    """A sentence as one piece, or cut into pieces of at most `budget` wordpieces when it is longer.

    Cuts fall between words where possible, so each piece's text tokenizes back to its ids; only a single word
    longer than `budget` wordpieces is cut inside.
    """
    if len(ids) <= budget:
        return [(sentence, ids)]
    pieces = []
    start = 0
    while start < len(ids):
        stop = min(start + budget, len(ids))
        if stop < len(ids):
            boundary = stop
            while boundary > start and word_ids[boundary] is not None and word_ids[boundary] == word_ids[boundary - 1]:
                boundary -= 1
            stop = boundary if boundary > start else stop
        pieces.append((sentence[offsets[start][0] : offsets[stop - 1][1]], ids[start:stop]))
        start = stop
    return pieces


def _pack(pieces: list[tuple[int, str, list[int]]], budget: int) -> list[tuple[str, list[int]]]:
    """Greedily pack `(paragraph, text, ids)` pieces into bodies of at most `budget` wordpieces."""
    bodies: list[tuple[str, list[int]]] = []
    text, ids, last_paragraph = "", [], -1
    for paragraph, piece_text, piece_ids in pieces:
        if ids and len(ids) + len(piece_ids) > budget:
            bodies.append((text, ids))
            text, ids = "", []
        separator = "" if not text else ("\n" if paragraph != last_paragraph else " ")
        text, ids, last_paragraph = text + separator + piece_text, ids + piece_ids, paragraph
    if ids:
        bodies.append((text, ids))
    return bodies


def _split_batch(batch: dict[str, list], tokenizer: Any, max_length: int, max_title_length: int) -> dict[str, list]:
    """`datasets.map` function: a batch of articles in, a (differently sized) batch of blocks out."""
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    titles = [title or "" for title in batch["title"]]
    # verbose=False: a sentence longer than the model's maximum is expected here (it is cut across blocks below), and
    # transformers would otherwise warn "Token indices sequence length is longer than ..." on it
    title_ids = tokenizer(titles, add_special_tokens=False, verbose=False)["input_ids"]
    sentences, owners, paragraphs = [], [], []
    for article, text in enumerate(batch["text"]):
        for paragraph, sentence in split_sentences(text or ""):
            sentences.append(sentence)
            owners.append(article)
            paragraphs.append(paragraph)
    encoded = (
        tokenizer(sentences, add_special_tokens=False, return_offsets_mapping=True, verbose=False) if sentences else None
    )

    out: dict[str, list] = {name: [] for name in BLOCK_FEATURES}
    next_sentence = 0
    for article in range(len(titles)):
        title = title_ids[article][: min(max_title_length, max_length - 4)]
        budget = max_length - 3 - len(title)  # room for the body in [CLS] title [SEP] body [SEP]
        pieces = []
        while next_sentence < len(sentences) and owners[next_sentence] == article:
            i = next_sentence
            for piece in _pieces(
                sentences[i], encoded["input_ids"][i], encoded["offset_mapping"][i], encoded.word_ids(i), budget
            ):
                pieces.append((paragraphs[i], *piece))
            next_sentence += 1
        for body_text, body_ids in _pack(pieces, budget):
            out["article_id"].append(batch["id"][article])
            out["title"].append(titles[article])
            out["text"].append(body_text)
            out["input_ids"].append([cls_id, *title, sep_id, *body_ids, sep_id])
            out["token_type_ids"].append([0] * (len(title) + 2) + [1] * (len(body_ids) + 1))
    return out


def split_into_blocks(
    articles: Any,
    tokenizer: Any,
    max_length: int = 288,
    max_title_length: int = 64,
    num_proc: int | None = None,
    batch_size: int = 256,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.Dataset:
    r"""
    Greedily pack the sentences of each article into blocks of at most `max_length` wordpieces, counting
    `[CLS] title [SEP] body [SEP]` (REALM's `join(title, body)`). A sentence longer than the room left for the body
    is cut by wordpieces. Articles with an empty body give no block.

    Args:
        articles: Anything [`load_articles`] takes: JSONL / JSONL.gz / Parquet paths, globs or a directory, a
            `datasets.Dataset`, or a list of `{"id", "title", "text"}` dicts.
        tokenizer (`PreTrainedTokenizerFast`): A fast BERT tokenizer (offsets are needed to cut long sentences).
        max_length (`int`, defaults to 288): Block length in wordpieces, special tokens included.
        max_title_length (`int`, defaults to 64): Titles are truncated to this many wordpieces.
        num_proc (`int`, *optional*): Processes for `datasets.map`.
        batch_size (`int`, defaults to 256): Articles per `map` batch.
        cache_dir (`str` or `os.PathLike`, *optional*): Directory for the Arrow cache of the blocks (reused when the
            articles, tokenizer and lengths are the same).

    Returns:
        `datasets.Dataset` (Arrow-backed) with columns `block_id` (int64, `0..N-1` in article order), `article_id`,
        `title`, `text` (the block body), `input_ids` (int32, the full `[CLS] title [SEP] body [SEP]`) and
        `token_type_ids` (int8, 0 for `[CLS] title [SEP]`, 1 for `body [SEP]`).
    """
    if max_length < 5:
        raise ValueError(f"max_length must be at least 5 ([CLS] title [SEP] body [SEP]), got {max_length}.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"split_into_blocks needs a fast tokenizer (offset mappings), got {type(tokenizer).__name__}; "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True)."
        )
    articles = load_articles(articles)
    # the fingerprint of the blocks (and so of every dataset made from them) does not depend on where the tokenizer
    # was loaded from: a pre-training output and the BERT it started from share the cache
    key = Hasher.hash((articles._fingerprint, tokenizer_fingerprint(tokenizer), max_length, max_title_length))
    began = time.perf_counter()
    blocks = cached_map(
        articles,
        _split_batch,
        cache_dir=cache_dir,
        name=f"blocks-{key}.arrow",
        fingerprint=key,
        batch_size=batch_size,
        num_proc=num_proc,
        features=BLOCK_FEATURES,
        fn_kwargs={"tokenizer": tokenizer, "max_length": max_length, "max_title_length": max_title_length},
        desc="Splitting articles into blocks",
    )
    # map keeps article order (shards are contiguous), so row numbers are deterministic block ids
    blocks = blocks.add_column("block_id", np.arange(len(blocks), dtype=np.int64))
    blocks = blocks.select_columns(["block_id", *BLOCK_FEATURES])
    seconds = time.perf_counter() - began
    logger.info(
        "Split %d articles into %d blocks of <= %d wordpieces in %.1fs (%.0f blocks/s)",
        len(articles),
        len(blocks),
        max_length,
        seconds,
        len(blocks) / max(seconds, 1e-9),
    )
    return blocks
