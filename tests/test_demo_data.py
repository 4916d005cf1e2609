"""`realm_hf.demo.wikipedia_qa_data.shared_qa_training_questions`: what the demo fine-tunes on, on a synthetic corpus and QA file."""

from __future__ import annotations

import importlib.util
import json

import pytest

from realm_hf.demo.wikipedia_qa_data import shared_qa_training_questions

if importlib.util.find_spec("bm25s") is None:
    pytest.skip("the demo's training questions are chosen with BM25 (pip install bm25s)", allow_module_level=True)

ARTICLES = [
    {"id": "0", "title": "Chile", "text": "Chile is a country in South America. Spanish is spoken in Chile."},
    {"id": "1", "title": "Angola", "text": "Angola is a country in Africa. Portuguese is spoken in Angola."},
    {"id": "2", "title": "Rome", "text": "Rome was founded by Romulus, according to legend."},
    {"id": "3", "title": "Peru", "text": "Lima is the capital of Peru."},
    {"id": "4", "title": "Kenya", "text": "Nairobi is the capital of Kenya."},
    {"id": "5", "title": "Egypt", "text": "Cairo is the capital of Egypt."},
    {"id": "6", "title": "Norway", "text": "Oslo is the capital of Norway."},
    {"id": "7", "title": "Japan", "text": "Tokyo is the capital of Japan."},
    {"id": "8", "title": "Hamlet", "text": "Hamlet is a tragedy written by William Shakespeare."},
    {"id": "9", "title": "Telephone", "text": "Alexander Graham Bell patented the telephone."},
]
QA = [
    ("what language is spoken in chile", ["Spanish"]),
    ("what language do they speak in angola", ["Portuguese"]),  # an evaluation answer: never a target
    ("where is portuguese spoken", ["Angola"]),  # names an evaluation answer: left out too
    ("who founded rome", ["Romulus"]),
    ("what is the capital of peru", ["Lima"]),
    ("what is the capital of kenya", ["Nairobi"]),
    ("what is the capital of egypt", ["Cairo"]),
    ("what is the capital of norway", ["Oslo"]),
    ("what is the capital of japan", ["Tokyo"]),
    ("who wrote hamlet", ["William Shakespeare"]),
    ("who patented the telephone", ["Alexander Graham Bell"]),
]
EVALUATION = [{"question": "what language is spoken in brazil", "answers": ["Portuguese", "Portuguese language"]}]


@pytest.fixture
def setup(tmp_path):
    from realm_hf.index.bm25 import Bm25Retriever

    with open(tmp_path / "webquestions-train.jsonl", "w", encoding="utf-8") as f:
        for question, answers in QA:
            f.write(json.dumps({"question": question, "answers": answers, "answer_format": "text"}) + "\n")
    bm25 = Bm25Retriever([{"block_id": i, "title": a["title"], "text": a["text"]} for i, a in enumerate(ARTICLES)])
    return bm25, str(tmp_path)


def test_no_evaluation_answer_is_a_target_or_a_question_word(setup):
    bm25, qa_dir = setup
    rows = shared_qa_training_questions(ARTICLES, bm25, qa_dir, EVALUATION, limit=100, per_question=2)
    questions = [row["question"] for row in rows]
    assert len(rows) == len(QA) - 2
    assert "what language do they speak in angola" not in questions and "where is portuguese spoken" not in questions
    for row in rows:  # each answered by the article recorded for it
        article = ARTICLES[int(row["article_id"])]
        assert article["title"] == row["title"] and row["answers"][0] in article["text"]


def test_curatedtrec_regex_answers_become_the_text_they_match(setup, tmp_path):
    bm25, qa_dir = setup
    trec = [
        ("Who founded Rome?", [r"Romul(us|o)"]),  # kept: the matched text is the answer
        ("What is the capital of Norway?", [r"Osl(o|a)|Christiania"]),  # kept: only the alternative found
        ("What language do they speak in Angola?", [r"Portug(u|e)ese"]),  # matches an evaluation answer whole
        ("Who wrote Hamlet?", [r"is a tragedy written by William Shakespeare"]),  # 7 words: no span to learn
        ("Who patented the telephone?", [r"(unclosed"]),  # does not compile: skipped, not an error
    ]
    with open(tmp_path / "curatedtrec-train.jsonl", "w", encoding="utf-8") as f:
        for question, answers in trec:
            f.write(json.dumps({"question": question, "answers": answers, "answer_format": "regex"}) + "\n")
    rows = shared_qa_training_questions(ARTICLES, bm25, qa_dir, EVALUATION, limit=100, per_question=2)
    from_trec = {row["question"]: row for row in rows if row["source"] == "curatedtrec-train.jsonl"}
    assert set(from_trec) == {"Who founded Rome?", "What is the capital of Norway?"}
    assert from_trec["Who founded Rome?"]["answers"] == ["Romulus"]
    assert from_trec["What is the capital of Norway?"]["answers"] == ["Oslo"]
    assert all(row["answer_format"] == "text" for row in from_trec.values())
    assert from_trec["Who founded Rome?"]["title"] == "Rome"
