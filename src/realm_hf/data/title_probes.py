"""Title probes: a question (and a cloze query) about an article, made from its first sentence with its title taken
out, so that only the article itself answers it. They check a knowledge update (`realm_hf.retrieval.
add_articles_to_index`: is a new article found and read?) and make Open-QA training questions from a corpus itself
when no QA data is at hand ([`title_probe_examples`])."""

from __future__ import annotations

import re
from typing import Any

from ..corpus import load_articles, split_sentences

__all__ = ["title_probe", "title_probe_examples"]

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
