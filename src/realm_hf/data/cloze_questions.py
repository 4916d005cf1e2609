"""Wh-cloze reading questions: a sentence of the corpus with one named entity replaced by a wh-phrase of its type.

"London stands on the River Thames in southeast England" gives "london stands on which river in southeast england"
with the answer "River Thames": the rule-based cloze translation of Lewis et al. (2019), *Unsupervised Question
Answering by Cloze Translation* (identity mapping, a wh-word from the entity's label, a window of the sentence
around it). Reading such questions with their source block teaches a reader that has never extracted a span to
match a question to its evidence and to answer with the type asked ("which river" -> a river, not the city's
country), before Open-QA fine-tuning on real questions (see `realm-hf demo`).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..corpus.blocks import split_sentences

logger = logging.getLogger(__name__)

WH_BY_LABEL = {
    "PERSON": "who", "NORP": "what nationality", "ORG": "what organization", "GPE": "what place",
    "LOC": "what place", "FAC": "what building", "DATE": "when", "TIME": "when", "CARDINAL": "how many",
    "QUANTITY": "how much", "MONEY": "how much", "PERCENT": "what percentage", "LANGUAGE": "what language",
    "WORK_OF_ART": "what work", "EVENT": "what event", "PRODUCT": "what product", "LAW": "what law",
    "ORDINAL": "which",
}
"""The wh-phrase of each spaCy (OntoNotes) entity label."""
TYPE_NOUNS = frozenset({
    "river", "ocean", "sea", "lake", "mountain", "mountains", "island", "islands", "desert", "university", "city",
    "county", "state", "province", "party", "church", "war", "empire", "kingdom", "bay", "gulf", "strait", "canal",
    "valley", "peninsula", "channel", "falls", "park", "museum", "company", "league", "award", "prize", "treaty",
    "dynasty", "republic", "language", "cup", "act", "festival", "team", "club",
})
"""Nouns that name an entity's type when they start or end it ("River Thames", "Pacific Ocean"): "which river"."""
CONTEXT_WORDS = (8, 10)
"""Words of the sentence kept before and after the wh-phrase."""
TAGGING_CHUNK = 1000
"""Sentences tagged per call of the tagger (with a `limit`, tagging stops at the first chunk that reaches it)."""


def wh_phrase(entity: str, label: str) -> str:
    r"""
    The wh-phrase that replaces `entity`: "which <noun>" when the entity ends or starts with a [`TYPE_NOUNS`]
    noun, else the [`WH_BY_LABEL`] phrase of its label ("what" for a label not listed).

    Example: `wh_phrase("River Thames", "LOC") == "which river"`, `wh_phrase("Ada Lovelace", "PERSON") == "who"`.
    """
    words = entity.lower().split()
    for noun in (words[-1], words[0]):
        if noun in TYPE_NOUNS:
            return f"which {noun}"
    return WH_BY_LABEL.get(label, "what")


def cloze_question(sentence: str, start: int, end: int, label: str) -> str:
    r"""
    The question made from `sentence` by replacing its characters `start:end` (an entity of `label`) with
    [`wh_phrase`] (and the article before it), keeping [`CONTEXT_WORDS`] words either side; lower-cased, without a
    final full stop.
    """
    before = sentence[:start].split()[-CONTEXT_WORDS[0]:]
    if before and before[-1].lower() in ("the", "a", "an"):  # "on the River Thames" -> "on which river"
        before = before[:-1]
    after = sentence[end:].strip().rstrip(".").split()[: CONTEXT_WORDS[1]]
    question = " ".join([*before, wh_phrase(sentence[start:end], label), *after]).lower()
    return re.sub(r"\s+([,;:])", r"\1", question).strip(" ,;:")


def wh_cloze_questions(
    articles: Sequence[dict[str, Any]],
    tagger: Callable[[list[str]], list[list[tuple[int, int, str]]]] | None = None,
    skip_sentence: Callable[[str], bool] | None = None,
    limit: int | None = None,
    min_words: int = 6,
    seed: int = 0,
) -> list[dict[str, Any]]:
    r"""
    One wh-cloze question per sentence of `articles` that has a named entity (a seeded choice among its entities).

    Args:
        articles (`Sequence[dict]`): `{"id", "title", "text"}` articles.
        tagger (`Callable`, *optional*): `texts -> [[(char_start, char_end, label), ...], ...]`; defaults to the
            `entities` of a [`SalientSpanTagger`] keeping every label of [`WH_BY_LABEL`] (spaCy).
        skip_sentence (`Callable[[str], bool]`, *optional*): Sentences for which it returns `True` give no question
            (the demo leaves out every sentence that names an evaluation answer).
        limit (`int`, *optional*): Questions returned at most: a seeded sample of the sentences is tagged until it
            gives that many (tagging is slow, so a large corpus is not tagged whole for a few thousand questions).
        min_words (`int`): Shorter sentences give no question.
        seed (`int`): Seed of the entity choice and of the sample.

    Returns:
        `list[dict]`: rows of the QA JSONL format (`id`, `question`, `answers` = [the entity], `answer_format`
        `"text"`) with the source `title` and `article_id`, shuffled.
    """
    if tagger is None:
        from .salient_spans import SalientSpanTagger

        tagger = SalientSpanTagger(labels=tuple(WH_BY_LABEL)).entities
    sentences = [
        (article, sentence)
        for article in articles
        for _, sentence in split_sentences(article["text"])
        if len(sentence.split()) >= min_words and not (skip_sentence and skip_sentence(sentence))
    ]
    rng = random.Random(seed)
    if limit is not None:  # a seeded sample of sentences, tagged only until it gives `limit` questions
        rng.shuffle(sentences)
    rows = []
    tagged = 0
    for first in range(0, len(sentences), TAGGING_CHUNK):
        chunk = sentences[first : first + TAGGING_CHUNK]
        tagged += len(chunk)
        for (article, sentence), entities in zip(chunk, tagger([sentence for _, sentence in chunk])):
            entities = [(start, end, label) for start, end, label in entities if end - start > 1]
            if not entities:
                continue
            start, end, label = rng.choice(entities)
            rows.append({
                "question": cloze_question(sentence, start, end, label), "answers": [sentence[start:end]],
                "answer_format": "text", "title": article["title"], "article_id": article["id"],
            })
        if limit is not None and len(rows) >= limit:
            break
    rng.shuffle(rows)
    rows = rows[:limit] if limit is not None else rows
    logger.info("Made %d wh-cloze reading questions from %d tagged of %d sentences of %d articles", len(rows), tagged,
                len(sentences), len(articles))
    return [{"id": i, **row} for i, row in enumerate(rows)]
