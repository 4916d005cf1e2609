"""The figures of an `examples/wiki/run.sh` run in one JSON file (the `report` stage), and the answer-in-corpus ceiling.

    python examples/wiki/report.py outputs/wiki                # -> outputs/wiki/wiki-gpu.json, and a table on stdout
    python examples/wiki/report.py outputs/wiki --ceiling      # -> outputs/wiki/eval/ceiling.json (CPU, minutes)

Per row (eval/<row>.json and .jsonl of `realm-hf evaluate`): exact match and Recall@5/20/100 on the evaluated
questions with percentile-bootstrap 95% intervals over questions; from pre-training (realm/history.json, and
realm-news/history.json, X = news, as `pretraining_news`): the
retrieval-utility curve (RU of the paper's Eq. 4 for the top retrieved block, `ru_top`, and its mean over the
retrieved blocks, `ru_mean`), the held-out MLM accuracy with retrieval and with the null document, the zero-shot
Recall@5, and the step the retriever started learning; the masked-LM stage's held-out accuracy (mlm/history.json);
the stage times (stage_seconds.txt) and, when present, the
throughput figures of benchmarks/bench_gpu_step.py (throughput.json) and the ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from realm_hf.evaluation import bootstrap_interval

ROWS = ("bm25", "minilm", "mlm", "ict", "realm", "realm-news", "realm-retriever")
RECALL_KS = (5, 20, 100)


def _read_json(path: str):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def row_figures(out: str, row: str) -> dict | None:
    """EM and retrieval Recall@k of one row with bootstrap intervals, from its evaluation files; None if not run."""
    metrics = _read_json(os.path.join(out, "eval", f"{row}.json"))
    if metrics is None:
        return None
    with open(os.path.join(out, "eval", f"{row}.jsonl"), encoding="utf-8") as f:
        predictions = [json.loads(line) for line in f]
    figures = {
        "questions": len(predictions),
        "exact_match": metrics["exact_match"],
        "exact_match_ci95": bootstrap_interval([p["correct"] for p in predictions]),
        "reader_top_k_answerable": metrics.get("answerable"),
        # a right answer is a span of a block read, so EM given the answer in the top k = EM / answerable share
        "exact_match_given_answer_in_top_k": (
            100.0 * metrics["exact_match"] / metrics["answerable"] if metrics.get("answerable") else None
        ),
        "seconds": metrics.get("seconds"),
    }
    state = _read_json(os.path.join(out, f"qa-{row}", "trainer_state.json"))
    if state is not None:  # the row's fine-tuning: its steps, and where early stopping ended it
        figures["finetune_steps"] = state.get("step")
        figures["early_stopping"] = state.get("early_stopping")
    for k in RECALL_KS:
        if f"retrieval_recall@{k}" in metrics:
            figures[f"recall@{k}"] = metrics[f"retrieval_recall@{k}"]
            figures[f"recall@{k}_ci95"] = bootstrap_interval([p["retrieval_hits"][str(k)] for p in predictions])
    return figures


def pretraining_figures(out: str, stage: str = "realm") -> dict | None:
    """The RU curve, held-out evaluations and the retriever's start of a REALM pre-training stage (`realm`, X = Z, or
    `realm-news`, X = news: its held-out sentences are news sentences), and what it read."""
    history = _read_json(os.path.join(out, stage, "history.json"))
    if history is None:
        return None
    curve = [
        {name: record[name] for name in ("step", "ru_top", "ru_mean", "null_prior_mass", "loss") if name in record}
        for record in history
        if "ru_top" in record
    ]
    evaluations = [record for record in history if any(name.startswith("eval/") for name in record)]
    speeds = [record["steps_per_second"] for record in history if "steps_per_second" in record]
    state = _read_json(os.path.join(out, stage, "trainer_state.json")) or {}
    return {
        "ru_curve": curve,
        "evaluations": evaluations,
        "steps": state.get("step"),
        "retriever_learning": state.get("retriever_learning"),
        "data": state.get("data"),
        "median_steps_per_second": sorted(speeds)[len(speeds) // 2] if speeds else None,
    }


def mlm_figures(out: str) -> dict | None:
    """The masked-LM stage: held-out accuracy along the run (step 0 is the start model), steps and speed."""
    history = _read_json(os.path.join(out, "mlm", "history.json"))
    if history is None:
        return None
    evaluations = [
        {"step": record["step"], "mlm_accuracy": record["eval/mlm_accuracy"], "mlm_loss": record.get("eval/mlm_loss")}
        for record in history if "eval/mlm_accuracy" in record
    ]
    speeds = [record for record in history if "steps_per_second" in record]
    last = speeds[-1] if speeds else {}
    return {
        "held_out_accuracy": evaluations,
        "steps": (_read_json(os.path.join(out, "mlm", "trainer_state.json")) or {}).get("step"),
        "steps_per_second": last.get("steps_per_second"),
        "tokens_per_second": (last["steps_per_second"] * last["tokens_per_step"]) if "tokens_per_step" in last else None,
    }


def stage_seconds(out: str) -> dict[str, float]:
    """Wall-clock seconds of each stage run.sh ran (the last run of each)."""
    seconds: dict[str, float] = {}
    path = os.path.join(out, "stage_seconds.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                name, value = line.split()
                seconds[name] = float(value)
    return seconds


def build_report(out: str) -> dict:
    """Everything the run left in `out`, as the one JSON object of wiki-gpu.json."""
    masked = _read_json(os.path.join(out, "masked", "masked_sentences.json")) or {}
    report = {
        "corpus": {"blocks": masked.get("num_blocks"), **{k: v for k, v in masked.get("settings", {}).items()}},
        "pretraining_sentences": masked.get("num_sentences"),
        "rows": {row: figures for row in ROWS if (figures := row_figures(out, row)) is not None},
        "mlm": mlm_figures(out),
        "pretraining": pretraining_figures(out),
        "pretraining_news": pretraining_figures(out, "realm-news"),
        "stage_seconds": stage_seconds(out),
        "ceiling": _read_json(os.path.join(out, "eval", "ceiling.json")),
        "throughput": _read_json(os.path.join(out, "throughput.json")),
        "throughput_bert_base": _read_json(os.path.join(out, "throughput-bert-base.json")),
        "machine": _read_json(os.path.join(out, "machine.json")),
    }
    return report


def table(report: dict) -> str:
    """The rows as a Markdown table: EM [95% interval], Recall@5/20/100 and EM given the answer in the blocks read."""
    lines = [
        "| row | EM [95% CI] | R@5 | R@20 | R@100 | EM given the answer in the top k |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row, figures in report["rows"].items():
        low, high = figures["exact_match_ci95"]
        recalls = " | ".join(f"{figures.get(f'recall@{k}', float('nan')):.1f}" for k in RECALL_KS)
        given = figures.get("exact_match_given_answer_in_top_k")
        given = "-" if given is None else f"{given:.1f}"
        lines.append(f"| {row} | {figures['exact_match']:.1f} [{low:.1f}, {high:.1f}] | {recalls} | {given} |")
    return "\n".join(lines)


def answer_in_corpus(out: str, qa_file: str, cache_dir: str | None, num_proc: int) -> dict:
    """The share of the evaluated questions whose answer occurs in some block of the run's corpus slice (the ceiling
    of any retriever), with the blocks made as the run made them (settings of masked/masked_sentences.json)."""
    from transformers import AutoTokenizer

    from realm_hf.modeling.initial_weights import resolve_bert_path
    from realm_hf.data.qa_examples import load_qa_examples
    from realm_hf.evaluation import CorpusAnswerFinder
    from realm_hf.training.arguments import CorpusArguments
    from realm_hf.training.pretraining_data import load_blocks

    settings = _read_json(os.path.join(out, "masked", "masked_sentences.json"))["settings"]
    corpus_args = CorpusArguments(
        corpus=settings["corpus"], max_articles=settings["max_articles"], block_length=settings["block_length"],
        cache_dir=cache_dir, num_proc=num_proc,
    )
    blocks = load_blocks(AutoTokenizer.from_pretrained(resolve_bert_path("minilm")), corpus_args)
    finder = CorpusAnswerFinder(f"{title} {text}" for title, text in zip(blocks["title"], blocks["text"]))
    questions = load_qa_examples(qa_file)
    found = [finder.has_answer(q["answers"], q.get("answer_format", "text")) for q in questions]
    return {
        "qa_file": qa_file,
        "questions": len(questions),
        "blocks": len(blocks),
        "answer_in_corpus": 100.0 * sum(found) / len(found),
        "answer_in_corpus_ci95": bootstrap_interval(found),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="The OUT directory of examples/wiki/run.sh.")
    parser.add_argument("--ceiling", action="store_true", help="Compute eval/ceiling.json (answer-in-corpus).")
    parser.add_argument("--qa_file", default="../shared/data/qa/nq-dev.jsonl[:1000]")
    parser.add_argument("--cache_dir", default=None, help="Cache of the blocks (e.g. outputs/wiki/cache).")
    parser.add_argument("--num_proc", type=int, default=1)
    args = parser.parse_args(argv)
    if args.ceiling:
        ceiling = answer_in_corpus(args.out, args.qa_file, args.cache_dir, args.num_proc)
        os.makedirs(os.path.join(args.out, "eval"), exist_ok=True)
        with open(os.path.join(args.out, "eval", "ceiling.json"), "w", encoding="utf-8") as f:
            json.dump(ceiling, f, indent=2)
        print(json.dumps(ceiling))
        return 0
    report = build_report(args.out)
    with open(os.path.join(args.out, "wiki-gpu.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
