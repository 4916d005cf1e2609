"""What `realm-hf demo` asks and what it fine-tunes on: its evaluation questions and its Open-QA training questions.

- Evaluation questions (`examples/demo_questions.jsonl`): the 4 default questions and 20 held-out ones, each with its
  reference answers (used only to count right answers, never to build the corpus or the training set beyond the
  leakage filter below).
- Training questions ([`shared_qa_training_questions`]): real questions of the shared QA training sets (WebQuestions
  train, NQ-open dev, CuratedTrec train) whose answer string (or, for CuratedTrec, a match of its answer regex)
  occurs in one of their BM25 top articles of the embedded corpus (distant supervision, as REALM's Open-QA
  fine-tuning: only the question and its answers are given). They teach the reader
  the kinds of questions asked. Questions equal to an evaluation question, sharing a reference answer with one, or
  naming one in their text are left out, so no evaluation answer is ever a training target or a training question's
  word.
- Reading questions ([`demo_reading_questions`]): wh-cloze questions made from the demo corpus's own sentences
  (`realm_hf.data.cloze_questions`), every sentence naming an evaluation answer left out; the reader reads them with
  their source block before fine-tuning.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from pathlib import Path
from typing import Any

from .metrics import compile_answer_pattern, normalize_answer

logger = logging.getLogger(__name__)

DEMO_QUESTIONS_FILE = Path(__file__).resolve().parents[2] / "examples" / "demo_questions.jsonl"
"""The demo's evaluation questions in a source checkout (`pip install -e`); `--questions-file` names another."""
SHARED_QA_DIR = os.path.join("..", "shared", "data", "qa")
"""Where the shared QA sets live, relative to the working directory (see `../shared/data/DATA.md`)."""
SHARED_QA_FILES = ("webquestions-train.jsonl", "nq-dev.jsonl", "curatedtrec-train.jsonl")
"""The QA sets the demo fine-tunes on (short factoid questions like the demo's own; CuratedTrec's answers are regular
expressions). TriviaQA dev is left for evaluation."""
MAX_ANSWER_WORDS = 5
"""Words of a regex answer's match at most: CuratedTrec's patterns also match whole definitions ("measures
temperature. A thermometer has ..."), which are no span for the reader to learn."""


def load_demo_questions(path: str | os.PathLike) -> list[dict[str, Any]]:
    r"""
    The demo's evaluation questions: JSONL rows `{"question", "answers", "answer_format": "text", "split"}` where
    `split` is `"default"` (asked and shown in full) or `"held-out"` (asked, scored, one line each).

    Raises:
        `ValueError`: naming the file and line of a row without a question or answers.
    """
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("question"), str) or not row.get("answers"):
                raise ValueError(f"{path}:{number}: a demo question needs 'question' and 'answers', got {row}.")
            row.setdefault("split", "held-out")
            rows.append(row)
    return rows


def _mentions(text: str, answer: str) -> bool:
    """Whether `answer` occurs in `text` as whole words (case-insensitive); one-character answers never do."""
    return len(answer) > 1 and re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", text, re.IGNORECASE) is not None


def _regex_answers(row: dict[str, Any]) -> list[re.Pattern] | None:
    """The compiled answer patterns of a regex row (CuratedTrec), `None` for a text row; a pattern that does not
    compile is dropped (the row with it if none is left)."""
    if row.get("answer_format", "text") != "regex":
        return None
    patterns = []
    for answer in row["answers"]:
        try:
            patterns.append(compile_answer_pattern(answer))
        except ValueError:
            logger.debug("Skipping the answer regex %r of %r: it does not compile", answer, row["question"])
    return patterns


def _answers_an_evaluation_question(
    row: dict[str, Any], excluded_answers: set[str], excluded_mentions: list[str]
) -> bool:
    """Whether a row's reference answers include an evaluation answer: a text answer equal to one (normalized), or
    an answer regex that matches one whole ("(the )?Nile( River)?" for "Nile")."""
    patterns = _regex_answers(row)
    if patterns is None:
        return bool({normalize_answer(answer) for answer in row["answers"]} & excluded_answers)
    return any(pattern.fullmatch(answer) for pattern in patterns for answer in excluded_mentions)


def _answers_in(text: str, row: dict[str, Any]) -> list[str]:
    """The reference answers of `row` that `text` holds: text answers occurring as whole words, or, for regex answers,
    the distinct texts of their first whole-word matches of at most [`MAX_ANSWER_WORDS`] words (the reader learns
    spans of these texts, so the row is written as a text row)."""
    patterns = _regex_answers(row)
    if patterns is None:
        return [answer for answer in row["answers"] if _mentions(text, answer)]
    found: list[str] = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            answer = match.group(0).strip()
            if _mentions(text, answer) and len(answer.split()) <= MAX_ANSWER_WORDS and answer not in found:
                found.append(answer)
                break
    return found


def find_answer_articles(
    articles: list[dict], bm25: Any, rows: list[dict[str, Any]], per_question: int = 3
) -> list[tuple[dict[str, Any], dict, list[str]]]:
    r"""
    The questions of `rows` (the QA JSONL format) that the corpus `articles` can answer, each with the first of its
    `per_question` BM25 best articles that holds one of its answers ([`_answers_in`]: whole-word text answers, or the
    short texts its answer regexes match there) and those answers: `(row, article, answers)` in the order of `rows`.

    Args:
        articles (`list[dict]`): The corpus, `{"id", "title", "text"}`.
        bm25 ([`Bm25Retriever`]): BM25 over `articles`, `block_id` = position in `articles`.
        rows (`list[dict]`): Questions with `"answers"` (and `"answer_format"`, default `"text"`).
        per_question (`int`): BM25 articles searched for an answer.
    """
    if not rows:
        return []
    found = []
    ranked = bm25.search_text([row["question"] for row in rows], k=per_question).tolist()  # [Q, per_question]
    for row, positions in zip(rows, ranked):
        for position in positions:
            answers = _answers_in(articles[position]["text"], row)
            if answers:
                found.append((row, articles[position], answers))
                break
    return found


def shared_qa_training_questions(
    articles: list[dict], bm25: Any, qa_dir: str, exclude: list[dict], limit: int, per_question: int = 3,
    seed: int = 0,
) -> list[dict[str, Any]]:
    r"""
    Open-QA training questions from the shared QA sets that the embedded corpus can answer.

    A question is kept when one of its reference answers occurs (whole words) in one of its `per_question` BM25
    best articles; the first such article is recorded (`article_id`, `title`) so the demo corpus can include it.
    Regex answers (CuratedTrec) become the text they match there (short matches only, [`MAX_ANSWER_WORDS`]), so every
    row returned is a text row.
    Questions whose normalized text equals an evaluation question's, whose answers share a normalized answer with
    one (or a regex that matches one), or whose text names an evaluation answer ("where is the planet jupiter
    located" for "what is the largest planet": answer Jupiter) are dropped: no evaluation answer is a training target
    or a training question's word.

    Args:
        articles (`list[dict]`): The whole embedded corpus, `{"id", "title", "text"}`.
        bm25 ([`Bm25Retriever`]): BM25 over `articles`, `block_id` = position in `articles`.
        qa_dir (`str`): Folder of [`SHARED_QA_FILES`].
        exclude (`list[dict]`): The evaluation questions ([`load_demo_questions`]).
        limit (`int`): Questions returned at most (a seeded sample, in file order).
        per_question (`int`): BM25 articles searched for the answer.

    Returns:
        `list[dict]`: rows of the QA JSONL format with `title`, `article_id` and `source` (the QA file).
    """
    excluded_questions = {normalize_answer(row["question"]) for row in exclude}
    excluded_answers = {normalize_answer(answer) for row in exclude for answer in row["answers"]}
    excluded_mentions = sorted({answer for row in exclude for answer in row["answers"]})
    candidates: list[dict[str, Any]] = []
    for name in SHARED_QA_FILES:
        path = os.path.join(qa_dir, name)
        if not os.path.isfile(path):
            logger.info("%s not found: the demo fine-tunes without it", path)
            continue
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rows = [
            row for row in rows
            if normalize_answer(row["question"]) not in excluded_questions
            and not any(_mentions(row["question"], answer) for answer in excluded_mentions)
            and not _answers_an_evaluation_question(row, excluded_answers, excluded_mentions)
        ]
        for row, article, answers in find_answer_articles(articles, bm25, rows, per_question):
            if not {normalize_answer(answer) for answer in answers} & excluded_answers:
                candidates.append(
                    {"question": row["question"], "answers": answers, "answer_format": "text",
                     "title": article["title"], "article_id": article["id"], "source": name}
                )
    chosen = sorted(random.Random(seed).sample(range(len(candidates)), min(limit, len(candidates))))
    examples = [{"id": i, **candidates[c]} for i, c in enumerate(chosen)]
    logger.info(
        "Training questions: %d of %d answerable shared QA questions (%s), evaluation questions and answers left out",
        len(examples), len(candidates), ", ".join(SHARED_QA_FILES),
    )
    return examples


def demo_reading_questions(
    articles: list[dict], exclude: list[dict], limit: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    r"""
    Wh-cloze reading questions ([`wh_cloze_questions`]) from the sentences of the demo corpus `articles`; a sentence
    that names (whole words) a reference answer of an evaluation question of `exclude` gives none, so no evaluation
    answer is a reading target or a reading question's word; `limit` questions at most (a seeded sample of the
    sentences). Needs spaCy and its English pipeline.
    """
    from .data.cloze_questions import wh_cloze_questions

    excluded = sorted({answer for row in exclude for answer in row["answers"]})
    return wh_cloze_questions(
        articles, skip_sentence=lambda sentence: any(_mentions(sentence, answer) for answer in excluded), limit=limit,
        seed=seed,
    )
