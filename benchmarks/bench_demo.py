"""How well does a demo model answer? The demo's 24 questions and TriviaQA dev questions it never trained on.

    HF_HUB_OFFLINE=1 python benchmarks/bench_demo.py --model defaults=outputs/demo/openqa/final
    HF_HUB_OFFLINE=1 python benchmarks/bench_demo.py --model r1200=outputs/demo-r1200/openqa/final \
        --model r2400=outputs/demo/openqa/final --trivia 500 --output benchmarks/results/demo-answers

The models come from `realm-hf demo` runs (e.g. `realm-hf demo --reading-steps 1200 --output outputs/demo-r1200`).
The 24 demo questions (`examples/demo_questions.jsonl`: 4 default, 20 held-out) are too few to tell two readers apart
(one run's count moves by about ±3 with the sample of reading questions), so each model also answers `--trivia`
TriviaQA dev questions (`../shared/data/qa/triviaqa-dev.jsonl`, which the demo never fine-tunes on) that the embedded
corpus can answer: a reference answer of under 40 characters occurs, as whole words, in one of the question's BM25
top-3 articles (1,194 of the 8,837), of which a seeded sample is taken. Answers are ranked as the demo ranks them: the
Open-QA pipeline's marginal over spans, answers that repeat the question left out; right = exact match with any
reference answer.

Writes `<output>.json` (per model: counts, and the top 3 answers of each demo question) and `<output>.md`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import time

from realm_hf.corpus import load_corpus_articles
from realm_hf.demo.defaults import DEMO_QUESTIONS_FILE, SHARED_QA_DIR
from realm_hf.demo.wikipedia_qa_data import article_bm25, find_answer_articles, load_demo_questions
from realm_hf.evaluation import exact_match

logger = logging.getLogger("bench_demo")
MAX_ANSWER_CHARS = 40
"""TriviaQA lists dozens of aliases per answer; only the short ones decide whether the corpus can answer."""


def triviaqa_questions(qa_dir: str, count: int, seed: int = 0) -> list[dict]:
    """A seeded sample of `count` TriviaQA dev questions answerable from the embedded corpus (see the docstring)."""
    with open(os.path.join(qa_dir, "triviaqa-dev.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    articles = load_corpus_articles("embedded", None).to_list()
    short = [{**row, "answers": [a for a in row["answers"] if len(a) < MAX_ANSWER_CHARS]} for row in rows]
    found = {id(row) for row, _, _ in find_answer_articles(articles, article_bm25(articles), short)}
    answerable = [
        {"question": row["question"], "answers": row["answers"], "split": "trivia"}
        for row, checked in zip(rows, short) if id(checked) in found
    ]
    logger.info("TriviaQA dev: %d of %d questions answerable from the embedded corpus", len(answerable), len(rows))
    return random.Random(seed).sample(answerable, min(count, len(answerable)))


def score(model_dir: str, questions: list[dict]) -> dict:
    """Right answers per split of `questions` and the top 3 answers of the demo's own questions."""
    from transformers import pipeline

    from realm_hf.pipelines import OPEN_QA_TASK

    qa = pipeline(OPEN_QA_TASK, model=model_dir)
    right: dict[str, list[bool]] = {}
    shown = []
    began = time.time()
    for row in questions:
        answers = qa(row["question"], top_k=3)
        correct = answers[0]["answer"] is not None and exact_match(answers[0]["answer"], row["answers"])
        right.setdefault(row["split"], []).append(correct)
        if row["split"] != "trivia":
            shown.append({"question": row["question"], "right": correct,
                          "answers": [(a["answer"], round(a["score"], 3), a["title"]) for a in answers]})
    counts = {split: [sum(values), len(values)] for split, values in right.items()}
    return {"model": model_dir, "right": counts, "seconds": round(time.time() - began, 1), "demo_questions": shown}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", required=True, help="NAME=DIR of a RealmForOpenQA (repeatable).")
    parser.add_argument("--trivia", type=int, default=500, help="TriviaQA dev questions (0: the demo's alone).")
    parser.add_argument("--qa-dir", default=SHARED_QA_DIR, help="Folder of triviaqa-dev.jsonl.")
    parser.add_argument("--output", default=os.path.join("benchmarks", "results", "demo-answers"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    models = dict(spec.split("=", 1) for spec in args.model)
    questions = load_demo_questions(DEMO_QUESTIONS_FILE)
    if args.trivia:
        questions += triviaqa_questions(args.qa_dir, args.trivia)
    results = {name: score(directory, questions) for name, directory in models.items()}
    splits = list(dict.fromkeys(row["split"] for row in questions))
    lines = ["| model | " + " | ".join(splits) + " |", "|---|" + "---:|" * len(splits)]
    for name, result in results.items():
        lines.append(f"| {name} | " + " | ".join("{}/{}".format(*result["right"][s]) for s in splits) + " |")
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output + ".json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(args.output + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
