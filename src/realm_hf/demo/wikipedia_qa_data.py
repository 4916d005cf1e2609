"""What the Wikipedia Open-QA demo (`realm-hf demo --recipe wikipedia-qa`) reads, asks and fine-tunes on: its corpus,
its evaluation questions, its Open-QA training questions and its reading questions ([`prepare_demo_data`] writes them).

- Corpus ([`select_demo_articles`]): articles of the embedded corpus (Wikipedia lead sections), BM25's best for the
  questions plus an even spread, in a seeded order.

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

import importlib.util
import json
import logging
import os
import random
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ..corpus import load_corpus_articles
from ..data.title_probes import title_probe_examples
from ..data.answers import compile_answer_pattern, normalize_answer
from .defaults import DEMO_FOCUS_ARTICLES

if TYPE_CHECKING:
    from .wikipedia_qa_stages import DemoSettings

logger = logging.getLogger(__name__)

DEMO_QUESTIONS = [
    "who developed the theory of general relativity",
    "what is the largest planet in the solar system",
    "which river flows through cairo",
    "what language is spoken in brazil",
]
"""The questions the demo answers when given none and no evaluation file."""

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
    from ..data.cloze_questions import wh_cloze_questions

    excluded = sorted({answer for row in exclude for answer in row["answers"]})
    return wh_cloze_questions(
        articles, skip_sentence=lambda sentence: any(_mentions(sentence, answer) for answer in excluded), limit=limit,
        seed=seed,
    )


# ------------------------------------------------------------------------------------- the demo corpus
def select_demo_articles(
    questions: list[str], max_articles: int, focus_per_question: int = DEMO_FOCUS_ARTICLES, seed: int = 0,
    required: list[int] | None = None, articles: list[dict] | None = None, bm25: Any = None,
) -> tuple[list[dict], list[str]]:
    r"""
    The demo's knowledge corpus: `max_articles` articles of the embedded corpus (10,033 Wikipedia lead sections,
    sorted by title, so a prefix would be all "A..."): for each question its `focus_per_question` best articles by
    BM25 (when `bm25s` is installed; at most half the corpus), then the `required` articles (positions in the
    embedded corpus: those holding the answers of the training questions), then an even spread over the rest of the
    alphabet; shuffled with `seed` from their corpus order, so any prefix is a sample too (pre-training takes one) and
    the same articles always come in the same order. Articles are chosen by the questions' words, never by their
    answers.

    Returns:
        `(articles, focus_ids)`: the `{"id", "title", "text"}` articles and the ids of those BM25 chose.
    """
    articles = articles if articles is not None else load_corpus_articles("embedded", None).to_list()
    size = min(max_articles, len(articles))
    focus = _bm25_focus(articles, questions, min(focus_per_question, len(articles)), size // 2, bm25)
    taken = list(dict.fromkeys(focus + [i for i in required or [] if i not in set(focus)]))[:size]
    chosen_set = set(taken)
    rest = [i for i in range(len(articles)) if i not in chosen_set]
    spread = np.unique(np.linspace(0, len(rest) - 1, num=size - len(taken)).round().astype(int)) if rest and size > len(taken) else []
    # the order depends on which articles were chosen, not on why: the whole corpus is always the same sample
    # order, whatever the training questions (their articles would otherwise reorder it, and with it the pre-training
    # articles and the reading questions drawn from it)
    chosen = sorted(taken + [rest[i] for i in spread])
    random.Random(seed).shuffle(chosen)
    if len(chosen) == len(articles):
        logger.info("Demo corpus: all %d embedded articles", len(chosen))
    else:
        logger.info(
            "Demo corpus: %d of %d embedded articles (%d chosen by BM25 for the %d questions, %d holding training "
            "answers, %d spread over the rest)", len(chosen), len(articles), len(focus), len(questions),
            len(taken) - len(focus), len(chosen) - len(taken),
        )
    return [articles[i] for i in chosen], [articles[i]["id"] for i in focus]


def article_bm25(articles: list[dict]) -> Any:
    """BM25 over whole `articles` (`block_id` = position in the list), or `None` without bm25s; the demo chooses its
    corpus and its training questions' evidence with it (and `benchmarks/bench_demo.py` its TriviaQA questions)."""
    if importlib.util.find_spec("bm25s") is None:
        logger.info("bm25s is not installed (pip install bm25s): the demo corpus is an even sample only")
        return None
    from ..index.bm25 import Bm25Retriever

    return Bm25Retriever([{"block_id": i, "title": a["title"], "text": a["text"]} for i, a in enumerate(articles)])


def _bm25_focus(articles: list[dict], questions: list[str], per_question: int, limit: int, bm25: Any = None) -> list[int]:
    """Positions of the BM25 top articles of each question, best first, at most `limit` (none without bm25s)."""
    bm25 = bm25 or article_bm25(articles)
    if bm25 is None:
        return []
    ranked = bm25.search_text(questions, k=per_question).T.reshape(-1).tolist()  # round robin over the questions
    return list(dict.fromkeys(ranked))[:limit]


def write_jsonl(path: str, rows: list[dict]) -> None:
    """Write `rows` as JSON lines to `path` (its folder made), atomically: a killed run leaves no half-written file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def prepare_demo_data(
    corpus_file: str, qa_file: str, questions: list[str], settings: DemoSettings, evaluation: list[dict] | None = None,
    reading_file: str | None = None,
) -> None:
    r"""
    Write the demo corpus to `corpus_file` (JSONL articles, see [`select_demo_articles`]), the Open-QA training
    questions to `qa_file` and, with `reading_file` (and spaCy), the wh-cloze reading questions made from the corpus
    ([`demo_reading_questions`]) to it.

    With `settings.train_qa` (the shared QA sets), the training questions are real questions whose answers occur in
    their BM25 top articles ([`shared_qa_training_questions`]; the evaluation questions and their answers left out),
    and those articles join the corpus. Without, one [`title_probe`] question per article, answered by its title,
    leaving out the articles BM25 chose for `questions`, so the demo's answers are not read off a near-copy seen in
    training.
    """
    embedded = load_corpus_articles("embedded", None).to_list()
    bm25 = article_bm25(embedded)
    evaluation = evaluation or []
    focus_questions = list(dict.fromkeys([*questions, *(row["question"] for row in evaluation)]))
    training: list[dict] = []
    if settings.train_qa and bm25 is not None:
        training = shared_qa_training_questions(
            embedded, bm25, settings.train_qa, evaluation or [{"question": q, "answers": []} for q in questions],
            limit=settings.train_questions,
        )
    position = {article["id"]: i for i, article in enumerate(embedded)}
    articles, focus_ids = select_demo_articles(
        focus_questions, settings.max_articles, required=[position[row["article_id"]] for row in training],
        articles=embedded, bm25=bm25, seed=settings.seed,
    )
    in_corpus = {article["id"] for article in articles}
    examples = [row for row in training if row["article_id"] in in_corpus]
    if not settings.train_qa or bm25 is None:
        examples = title_probe_examples(articles, exclude_ids=focus_ids)
    if not examples:
        raise ValueError(
            f"No training question could be made from the {len(articles)} demo articles; raise --max-articles."
        )
    write_jsonl(corpus_file, [{"id": a["id"], "title": a["title"], "text": a["text"]} for a in articles])
    write_jsonl(qa_file, examples)
    logger.info("Wrote %d training questions over %d articles to %s", len(examples), len(articles), qa_file)
    if reading_file:
        exclude = evaluation or [{"question": q, "answers": []} for q in questions]
        limit = settings.reading_questions
        write_jsonl(reading_file, demo_reading_questions(articles, exclude, limit=limit, seed=settings.seed))
