"""A reader that converges, measured on CPU: Open-QA fine-tuning until the held-out loss stops falling (early
stopping), for readers that start from all-MiniLM-L6-v2 as it comes and from its masked-LM training
(`benchmarks/bench_mlm.py`), with the same retriever (MiniLM, mean pooling, as it comes).

    HF_HUB_OFFLINE=1 python benchmarks/bench_reader_convergence.py --mlm outputs/bench-mlm/mlm-continued/final

Needs `../shared/data` (or `--data DIR`). The slice: Z = the first `--articles` articles of wiki-2015 shard 0, cut into
`--block-length`-wordpiece blocks. Only questions whose answer string occurs somewhere in Z are used (the others no
retriever over Z can find), in three disjoint sets:

- **report**: NQ-open dev questions 0-999 answerable in Z, evaluated once at the end (no choice looks at them);
- **watch**: NQ-open dev questions 1000-1499 answerable in Z: the held-out loss that early stopping watches
  (`--early_stopping_metric answerable_loss`, every `--eval-steps` steps, patience `--patience`);
- **train**: NQ-open dev 1500+, WebQuestions train, CuratedTrec train and TriviaQA dev, answerable in Z.

Per row: steps run (and where early stopping stopped), the watch loss curve, and on the report set EM, the share
of questions whose answer is in the blocks read (`answerable`) and EM given the answer in the top k. Writes
`<output>.json` and `<output>.md` (default benchmarks/results/reader-convergence-cpu) after every row; a finished
row is not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench_common import describe_machine, run_realm_hf as run

TRAIN_FILES = ("nq-dev.jsonl[1500:]", "webquestions-train.jsonl", "curatedtrec-train.jsonl", "triviaqa-dev.jsonl")


def answerable_sets(args: argparse.Namespace) -> dict[str, str]:
    """Write the report / watch / train question files (answerable in Z) into the work folder; returns their paths."""
    from transformers import AutoTokenizer

    from realm_hf.data.qa_examples import load_qa_examples
    from realm_hf.modeling.initial_weights import resolve_bert_path
    from realm_hf.evaluation import CorpusAnswerFinder
    from realm_hf.training.arguments import CorpusArguments
    from realm_hf.training.pretraining_data import load_blocks

    paths = {name: os.path.join(args.work, f"{name}.jsonl") for name in ("report", "watch", "train")}
    if all(os.path.isfile(path) for path in paths.values()):
        return paths
    corpus_args = CorpusArguments(corpus=args.corpus, max_articles=args.articles, block_length=args.block_length,
                                  cache_dir=os.path.join(args.work, "cache"))
    blocks = load_blocks(AutoTokenizer.from_pretrained(resolve_bert_path("minilm")), corpus_args)
    finder = CorpusAnswerFinder(f"{title} {text}" for title, text in zip(blocks["title"], blocks["text"]))
    qa = os.path.join(args.data, "qa")
    sources = {
        "report": [f"{qa}/nq-dev.jsonl[:1000]"],
        "watch": [f"{qa}/nq-dev.jsonl[1000:1500]"],
        "train": [f"{qa}/{name}" for name in TRAIN_FILES],
    }
    for name, files in sources.items():
        with open(paths[name], "w", encoding="utf-8") as f:
            for source in files:
                for row in load_qa_examples(source):
                    if finder.has_answer(row["answers"], row.get("answer_format", "text")):
                        f.write(json.dumps(row) + "\n")
    return paths


def count_lines(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def run_row(args: argparse.Namespace, name: str, encoder: str, questions: dict[str, str], log: str) -> dict:
    output = os.path.join(args.work, f"qa-{name}")
    metrics_file = os.path.join(args.work, f"eval-{name}.json")
    seconds = {}
    if not os.path.isfile(os.path.join(output, "final", "DONE")):
        resume = ["--resume_from_checkpoint", "latest"] if os.path.isdir(output) else []
        seconds["finetune"] = run([
            "finetune", "--output_dir", output, "--retriever", "minilm", "--encoder", encoder, "--pooling", "mean",
            "--projection_size", "0", "--normalize_embeddings", "--similarity_scale", "20", "--corpus", args.corpus,
            "--max_articles", str(args.articles), "--block_length", str(args.block_length), "--query_max_length", "48",
            "--joined_max_length", str(args.block_length + 48), "--truncate_questions", "--index_type", "torch-exact",
            "--embed_batch_size", "128", "--train_file", questions["train"], "--eval_file", questions["watch"],
            "--max_eval_questions", "1000", "--eval_batch_size", "16", "--top_k", "5", "--max_steps", str(args.steps),
            "--per_device_batch_size", str(args.batch_size), "--learning_rate", "1e-4", "--warmup_steps", "20",
            "--eval_steps", str(args.eval_steps), "--early_stopping_metric", "answerable_loss",
            "--early_stopping_patience", str(args.patience), "--logging_steps", "10", "--save_steps",
            str(args.eval_steps), "--save_total_limit", "1", "--cache_dir", os.path.join(args.work, "cache"),
            "--report_to", "none", *resume,
        ], log)
        open(os.path.join(output, "final", "DONE"), "w").close()
    if not os.path.isfile(metrics_file):
        seconds["evaluate"] = run([
            "evaluate", "--model", os.path.join(output, "final"), "--qa_file", questions["report"], "--batch_size",
            "16", "--truncate_questions", "--metrics_file", metrics_file, "--recall_at", "5,20",
        ], log)
    with open(os.path.join(output, "history.json"), encoding="utf-8") as f:
        history = json.load(f)
    with open(os.path.join(output, "trainer_state.json"), encoding="utf-8") as f:
        state = json.load(f)
    with open(metrics_file, encoding="utf-8") as f:
        metrics = json.load(f)
    metrics = metrics.get("metrics", metrics)
    speeds = [r["steps_per_second"] for r in history if "steps_per_second" in r]
    return {
        "steps": state["step"],
        "early_stopping": state.get("early_stopping"),
        "watch_loss": {r["step"]: round(r["eval/answerable_loss"], 3) for r in history if "eval/answerable_loss" in r},
        "watch_exact_match": {r["step"]: round(r["eval/exact_match"], 1) for r in history if "eval/exact_match" in r},
        "report": {
            "exact_match": metrics["exact_match"], "answerable": metrics["answerable"],
            "exact_match_given_answer_in_top_k": 100.0 * metrics["exact_match"] / metrics["answerable"]
            if metrics["answerable"] else None,
            "recall@5": metrics.get("retrieval_recall@5"), "recall@20": metrics.get("retrieval_recall@20"),
        },
        "seconds_per_step": 1 / (sum(speeds) / len(speeds)) if speeds else None,
        "seconds": seconds,
    }


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = [
        "# A reader that converges: Open-QA fine-tuning with early stopping on CPU",
        "",
        f"Machine: {result['machine']}. Command: `{result['command']}`.",
        "",
        f"Z: first {s['articles']} articles of wiki-2015 shard 0, {s['block_length']}-wordpiece blocks. Questions "
        f"whose answer occurs in Z: train {s['questions']['train']}, watch {s['questions']['watch']} (NQ dev "
        f"1000-1499: early stopping on their loss, every {s['eval_steps']} steps, patience {s['patience']}), report "
        f"{s['questions']['report']} (NQ dev 0-999). Retriever: MiniLM as it comes (mean pooling); top 5 read; "
        f"batch {s['batch_size']}, at most {s['steps']} steps.",
        "",
        "| reader start | steps (stopped) | best watch loss (step) | report EM | answer in top 5 | EM given the answer "
        "in the top 5 | R@5 | s/step |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in result["rows"].items():
        stopping = row["early_stopping"] or {}
        stopped = "early" if stopping.get("stopped_at") else "max_steps"
        report = row["report"]
        given = report["exact_match_given_answer_in_top_k"]
        lines.append(
            f"| {name} | {row['steps']} ({stopped}) | {stopping.get('best', float('nan')):.3f} "
            f"({stopping.get('best_step')}) | {report['exact_match']:.1f} | {report['answerable']:.1f} | "
            f"{'-' if given is None else f'{given:.1f}'} | {report['recall@5'] or float('nan'):.1f} | "
            f"{row['seconds_per_step']:.2f} |"
        )
    lines += ["", "Watch loss along the run (step: loss):", ""]
    for name, row in result["rows"].items():
        lines.append(f"- {name}: " + ", ".join(f"{step}: {loss}" for step, loss in row["watch_loss"].items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--mlm", required=True, help="the masked LM to start the second reader from (bench_mlm.py)")
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--block-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--eval-steps", type=int, default=50)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--rows", default="minilm,mlm", help="which readers to run (two processes may split them)")
    parser.add_argument("--work", default="outputs/bench-reader")
    parser.add_argument("--output", default="benchmarks/results/reader-convergence-cpu")
    args = parser.parse_args(argv)
    args.corpus = os.path.join(args.data, "wiki-2015", "wiki-2015-00000-of-00008.jsonl.gz")
    if not os.path.isfile(args.corpus):
        parser.error(f"{args.corpus} does not exist: pass --data, the folder holding wiki-2015/ and qa/")
    os.makedirs(args.work, exist_ok=True)
    log = os.path.join(args.work, "bench.log")
    questions = answerable_sets(args)
    result = {
        "command": " ".join(["python benchmarks/bench_reader_convergence.py", *(sys.argv[1:] if argv is None else argv)]),
        "machine": describe_machine(gpu=False),
        "settings": {"articles": args.articles, "block_length": args.block_length, "steps": args.steps,
                     "batch_size": args.batch_size, "eval_steps": args.eval_steps, "patience": args.patience,
                     "mlm": args.mlm, "questions": {name: count_lines(path) for name, path in questions.items()}},
        "rows": {},
    }
    rows = {"minilm": ("MiniLM as it comes", "minilm"), "mlm": ("MLM-trained MiniLM", args.mlm)}
    for slug in ("minilm", "mlm"):
        name, encoder = rows[slug]
        if slug in args.rows.split(",") or os.path.isfile(os.path.join(args.work, f"eval-{slug}.json")):
            result["rows"][name] = run_row(args, slug, encoder, questions, log)
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output + ".json", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        with open(args.output + ".md", "w", encoding="utf-8") as f:
            f.write(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
