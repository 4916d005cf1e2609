"""Update what a trained REALM model knows by adding documents to its index, without retraining (REALM paper,
Appendix C: the retriever and the encoder are kept, only the knowledge corpus changes).

```python
>>> from transformers import pipeline
>>> from realm_hf.knowledge import add_articles_to_index
>>> qa = pipeline("open-domain-question-answering", model="outputs/openqa/final")
>>> new_ids = add_articles_to_index(qa.index, qa.model, qa.tokenizer, "../shared/data/wiki-2021-new")
>>> qa("who plays for trouville in the uruguayan basketball league")["block_id"] in new_ids
```

The new blocks are embedded with the model's own *document* tower, the one that built the index, so they are scored
on the same footing as the old ones; the old blocks, their ids and their embeddings do not change.
[`title_probe`] makes a question (and a cloze query) about a new article from its first sentence, to see the update.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import torch

from .corpus import load_articles, split_sentences
from .index import RealmIndex
from .index.embedding import block_lengths

logger = logging.getLogger(__name__)

__all__ = ["add_articles_to_index", "title_probe", "title_probe_examples"]


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


_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_ARTICLES = ("the", "a", "an")


def _strip_parentheticals(text: str) -> str:
    while True:
        stripped = _PARENTHETICAL.sub("", text)
        if stripped == text:
            return " ".join(text.split())
        text = stripped


def title_probe(
    article: dict[str, Any], tokenizer: Any = None, min_words: int = 8, max_words: int = 40
) -> dict[str, str] | None:
    r"""
    A question and a cloze query about an article, made from its first sentence with its title taken out: the
    answer is the title, which the model can only know from the article itself (for a new article, only after the
    update).

    `"Jarred Shaw (born September 28, 1990) is an American professional basketball player for Trouville."` gives
    the question `"what is an American professional basketball player for Trouville?"` and the cloze
    `"[MASK] [MASK] is an American professional basketball player for Trouville."` (one mask per wordpiece of the
    title). Parentheticals are dropped, from the sentence and from the title (`"Foo (film)"` -> `"Foo"`).

    Args:
        article (`dict`): `{"title", "text"}` (and `"id"`).
        tokenizer (*optional*): With it, the cloze query is made (the title's wordpieces are masked).
        min_words (`int`, defaults to 8): Shorter first sentences give no probe (too unspecific: "X is an Indian
            cricketer" fits many articles).
        max_words (`int`, defaults to 40): Longer first sentences give no probe (they would be truncated).

    Returns:
        `dict` with `question`, `answer` (the title), `title`, `article_id` and, with a tokenizer, `cloze`; or
        `None` when the first sentence does not name the title, or is too short or too long.
    """
    sentences = split_sentences(article.get("text") or "")
    if not sentences:
        return None
    sentence = _strip_parentheticals(sentences[0][1])
    name = _strip_parentheticals(article.get("title") or "")
    match = re.search(re.escape(name), sentence, flags=re.IGNORECASE) if name else None
    if match is None or not min_words <= len(sentence.split()) <= max_words:
        return None
    before, after = sentence[: match.start()].strip(), sentence[match.end() :].strip()
    if before.lower() in _ARTICLES:
        before = ""
    question = " ".join(part for part in (before, "what", after.rstrip(". ")) if part) + "?"
    question = re.sub(r"\s+([,;:])", r"\1", question)  # "X, also known as Y, was ..." -> "what, also known as Y, ..."
    probe = {"question": question, "answer": name, "title": article.get("title"), "article_id": article.get("id")}
    if tokenizer is not None:
        masks = " ".join([tokenizer.mask_token] * len(tokenizer.tokenize(match.group(0))))
        probe["cloze"] = " ".join(part for part in (sentence[: match.start()].strip(), masks, after) if part)
    return probe


def title_probe_examples(articles: Any, exclude_ids: Any = None, **probe_kwargs: Any) -> list[dict[str, Any]]:
    r"""
    Open-QA training examples made from a corpus itself: one [`title_probe`] question per article, answered by the
    article's title (many factoid answers are Wikipedia titles, so a reader trained on these learns to point at
    entity spans). `realm-hf demo` fine-tunes on them when no QA data is at hand.

    Only probes whose answer occurs in the article's text are kept (a title matched only after dropping a
    parenthetical, `"John (Jack) Smith"`, has no span to train on).

    Args:
        articles: Anything [`realm_hf.corpus.load_articles`] takes (a list of `{"id", "title", "text"}` dicts, a
            `datasets.Dataset`, JSONL / Parquet paths).
        exclude_ids (*optional*): Article ids to make no question about (e.g. articles held out for evaluation).
        **probe_kwargs: `min_words` / `max_words` of [`title_probe`].

    Returns:
        `list[dict]`: rows of the QA JSONL format (`id`, `question`, `answers` (the title), `answer_format`
        `"text"`), with `title` and `article_id` for provenance, in corpus order.
    """
    excluded = set(exclude_ids or ())
    examples = []
    for article in load_articles(articles):
        if article.get("id") in excluded:
            continue
        probe = title_probe(article, **probe_kwargs)
        if probe is None or probe["answer"].lower() not in (article.get("text") or "").lower():
            continue
        examples.append(
            {"id": len(examples), "question": probe["question"], "answers": [probe["answer"]], "answer_format": "text",
             "title": probe["title"], "article_id": probe["article_id"]}
        )
    return examples
