"""How messages echo a user's text: a long question is quoted by its first words, and counts read as sentences."""

from __future__ import annotations

import logging

from openqa_helpers import load_tokenizer

from realm_hf.data.openqa import OpenQaCollator
from realm_hf.pipelines._utils import encode_query
from realm_hf.utils.messages import excerpt

LONG_QUESTION = " ".join(f"where is the word number {i}" for i in range(350))  # 2,100 words


def test_excerpt_keeps_a_short_text_and_cuts_a_long_one():
    assert excerpt("who wrote hamlet") == "'who wrote hamlet'"
    cut = excerpt(LONG_QUESTION)
    assert cut.startswith(repr(LONG_QUESTION[:80]) + "…") and f"({len(LONG_QUESTION):,} characters)" in cut
    assert len(cut) < 120


def test_a_long_question_s_warning_echoes_its_beginning_only(caplog):
    tokenizer = load_tokenizer()
    with caplog.at_level(logging.WARNING, logger="realm_hf.pipelines._utils"):
        encoded = encode_query(tokenizer, LONG_QUESTION, 32, "question")
    assert encoded["input_ids"].shape == (1, 32)
    (record,) = [record for record in caplog.records if record.name == "realm_hf.pipelines._utils"]
    assert "more than the retriever's query_max_length=32" in record.getMessage()
    assert len(record.getMessage()) < 300


def test_the_count_of_long_questions_reads_as_a_sentence(caplog):
    collator = OpenQaCollator(load_tokenizer(), query_max_length=16, reader_max_length=64, truncate_questions=True)
    examples = [{"id": "0", "question": LONG_QUESTION}, {"id": "1", "question": "who wrote hamlet"}]
    with caplog.at_level(logging.WARNING, logger="realm_hf.data.openqa"):
        assert collator.check_question_lengths(examples) == 1
        assert collator.check_question_lengths(examples, "dev.jsonl") == 1
    first, second = (record.getMessage() for record in caplog.records if record.name == "realm_hf.data.openqa")
    assert first.startswith("1 of 2 questions are longer than query_max_length=16")
    assert second.startswith("1 of 2 questions of dev.jsonl are longer")
