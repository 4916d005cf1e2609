"""The Wikipedia Open-QA demo (`realm-hf demo --recipe wikipedia-qa`): pre-train, read, fine-tune and answer on the
embedded corpus ([`run_demo`]), or only index it and retrieve ([`run_retrieval_demo`]).

The stages and their settings are in `realm_hf.demo.wikipedia_qa_stages`, the data in `realm_hf.demo.wikipedia_qa_data`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..cli.output import print_answers, print_hits
from ..index import RealmIndex
from ..registration import register_auto_classes
from ..retrieval import build_index, load_retriever, search
from ..utils.quiet import without_datasets_bars
from .defaults import DEMO_BLOCK_LENGTH, DEMO_INDEX_ARTICLES
from .wikipedia_qa_data import DEMO_QUESTIONS, load_demo_questions, prepare_demo_data, select_demo_articles, write_jsonl
from .wikipedia_qa_stages import (
    DemoSettings, finetune_demo_model, pretrain_demo_model, reading_available, reading_demo_model, stage_finished,
)

logger = logging.getLogger(__name__)

DEMO_SETTINGS_NAME = "demo_settings.json"
"""Where a demo output directory records the settings it was made with."""


def run_retrieval_demo(
    max_articles: int | None, output: str, questions: list[str] | None, top_k: int, batch_size: int
) -> None:
    r"""
    The fast path of the demo, no training: index `max_articles` articles of the embedded corpus (default: the demo's
    [`DEMO_INDEX_ARTICLES`], all of them; fewer are chosen as the full demo chooses them without its training
    articles: BM25's best for the questions plus an even spread, see [`select_demo_articles`]) with the packaged
    MiniLM and retrieve evidence for `questions`. It embeds the corpus once and trains nothing.
    """
    began = time.time()
    questions = questions or DEMO_QUESTIONS
    if os.path.isfile(os.path.join(output, "manifest.json")):
        logger.info("Reusing the index at %s (delete it to rebuild)", output)
        index = RealmIndex.from_pretrained(output)
    else:
        articles, _ = select_demo_articles(questions, max_articles or DEMO_INDEX_ARTICLES)
        corpus_file = os.path.join(output + "-data", "corpus.jsonl")
        write_jsonl(corpus_file, articles)
        index = build_index(corpus_file, "minilm", output, block_length=DEMO_BLOCK_LENGTH, batch_size=batch_size)
    retriever, tokenizer = load_retriever("minilm")
    logger.info("Index of %d blocks ready in %.0fs", index.num_blocks, time.time() - began)
    for question in questions:
        print_hits(question, search(index, retriever, tokenizer, [question], top_k)[0])


# -------------------------------------------------------------------- demo: pre-train -> fine-tune -> answer
def answer_questions(model: str, questions: list[str], evaluation: list[dict] | None = None) -> int:
    r"""
    Stage 4: answer `questions` with the Open-QA pipeline of `model` (and its index); prints answer and evidence.

    With `evaluation` ([`load_demo_questions`] rows), its questions are asked too and scored by exact match against
    their reference answers: the `"default"` ones printed in full, the `"held-out"` ones one line each, then a line
    `Right: default k/n, held-out k/n`. Returns the number of questions that could not be answered (errors).
    """
    from transformers import pipeline

    from ..evaluation.answer_match import exact_match
    from ..pipelines import OPEN_QA_TASK

    register_auto_classes()  # the task, whatever was imported before
    qa = pipeline(OPEN_QA_TASK, model=model)
    references = {row["question"]: row for row in evaluation or []}
    asked = list(dict.fromkeys([*questions, *(row["question"] for row in evaluation or [])]))
    failures = 0
    right: dict[str, list[bool]] = {}
    for question in asked:
        row = references.get(question)
        full = row is None or row.get("split") == "default" or question in questions
        try:
            result = qa(question)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            failures += 1
            continue
        result = result if isinstance(result, dict) else result[0]
        verdict = ""
        if row is not None:
            correct = result["answer"] is not None and exact_match(result["answer"], row["answers"])
            right.setdefault(row.get("split", "held-out"), []).append(correct)
            verdict = f"  [{'right' if correct else 'wrong'}; reference: {row['answers'][0]}]"
        if full:
            print()
            print_answers(question, [result])
            if verdict:
                print(f"  {verdict.strip()}")
        else:
            print(f"  {question} -> {result['answer']} ({result['title']}){verdict}")
    if right:
        print("\nRight: " + ", ".join(f"{split} {sum(v)}/{len(v)}" for split, v in right.items()))
    return failures


DEMO_SETTINGS_BEFORE_THEY_EXISTED = {
    "seed": 0, "reading_negatives": 0, "reading_passes": 1, "rehearsal_questions": 0, "finetune_runs": 1,
    "reading_weight": 0.0,
}
"""What a demo ran with before each of these settings existed (a `demo_settings.json` written then lacks them)."""


def _check_demo_settings(output: str, settings: DemoSettings) -> str | None:
    """Record the settings of a new output directory; the difference from those of an existing one, if any."""
    path = os.path.join(output, DEMO_SETTINGS_NAME)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        # a setting newer than the directory had the value the demo ran with before it existed
        defaults = {**asdict(DemoSettings()), **DEMO_SETTINGS_BEFORE_THEY_EXISTED}
        changed = [
            f"--{name.replace('_', '-')} {saved.get(name, defaults[name])} (asked: {value})"
            for name, value in asdict(settings).items() if saved.get(name, defaults[name]) != value
        ]
        return ", ".join(changed) or None
    os.makedirs(output, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(asdict(settings), f, indent=2)
    return None


def run_demo(output: str, questions: list[str] | None = None, settings: DemoSettings | None = None) -> int:
    r"""
    `realm-hf demo`: the REALM story on the embedded corpus, on CPU in minutes. (1) pre-train MiniLM briefly
    ([`pretrain_demo_model`], `<output>/pretrain`), (2) teach its reader to read on wh-cloze questions made from the
    corpus ([`reading_demo_model`], `<output>/reading`; skipped without spaCy or with `reading_steps=0`), (3)
    fine-tune it for Open-QA on the shared QA sets' questions (or title probes made from the corpus)
    ([`finetune_demo_model`], `<output>/openqa`), (4) answer `questions` with evidence ([`answer_questions`]).
    Stages whose `final/` is complete are reused. Returns the exit status.
    """
    settings = settings or DemoSettings()
    evaluation = load_demo_questions(settings.questions_file) if settings.questions_file else []
    if not questions:  # the default questions, from the evaluation file when there is one
        questions = [row["question"] for row in evaluation if row["split"] == "default"] or DEMO_QUESTIONS
    changed = _check_demo_settings(output, settings)
    if changed:
        print(
            f"error: {output} holds a demo run with other settings: {changed}. Pass the same values, or another "
            f"--output (or delete {output}) to run the demo with the new ones.", file=sys.stderr,
        )
        return 2
    timings: dict[str, float | None] = {}

    def stage(name: str, finished: bool, run: Callable[[], Any], where: str) -> None:
        if finished:
            logger.info("Stage %s: reusing %s (delete it to redo the stage)", name, where)
            timings[name] = None
            return
        began = time.perf_counter()
        logger.info("Stage %s: starting (into %s)", name, where)
        with without_datasets_bars():  # each sub-step logs its own line; the bars left are embedding and training
            run()
        timings[name] = time.perf_counter() - began
        logger.info("Stage %s: done in %.1fs", name, timings[name])

    data = os.path.join(output, "data")
    corpus_file, qa_file = os.path.join(data, "corpus.jsonl"), os.path.join(data, "train-qa.jsonl")
    reading = settings.reading_steps > 0 and reading_available()
    reading_file = os.path.join(data, "reading-qa.jsonl") if reading else None
    pretrain_dir, reading_dir = os.path.join(output, "pretrain"), os.path.join(output, "reading")
    openqa_dir = os.path.join(output, "openqa")
    stage("data", all(os.path.isfile(path) for path in (qa_file, corpus_file, reading_file) if path),
          lambda: prepare_demo_data(corpus_file, qa_file, questions, settings, evaluation, reading_file), data)
    stage("pretrain", stage_finished(pretrain_dir), lambda: pretrain_demo_model(pretrain_dir, corpus_file, settings),
          pretrain_dir)
    reader_start = os.path.join(pretrain_dir, "final")
    if reading_file:
        stage("read", stage_finished(reading_dir), lambda: reading_demo_model(
            reading_dir, reader_start, corpus_file, reading_file, settings), reading_dir)
        reader_start = os.path.join(reading_dir, "final")
    stage("finetune", stage_finished(openqa_dir), lambda: finetune_demo_model(
        openqa_dir, reader_start, corpus_file, qa_file, settings, reading_file), openqa_dir)
    model = os.path.join(openqa_dir, "final")
    failures = 0

    def answer() -> None:
        nonlocal failures
        print(f"\nAnswers of {model}:")
        failures = answer_questions(model, questions, evaluation)

    stage("answer", False, answer, model)
    print("\nDemo summary: " + ", ".join(
        f"{name} {'reused' if seconds is None else f'{seconds:.0f}s'}" for name, seconds in timings.items()
    ) + f"; total {sum(s for s in timings.values() if s is not None):.0f}s; outputs in {output}")
    return 2 if failures else 0
