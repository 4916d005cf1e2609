"""The start that can read, measured on CPU: masked-LM training of all-MiniLM-L6-v2 (continued) against the same
architecture from scratch, and what each start does as REALM's knowledge-augmented encoder before any REALM step.

    HF_HUB_OFFLINE=1 python benchmarks/bench_mlm.py --steps 300          # ~1 h on 2 CPU cores; resumable

Needs `../shared/data/wiki-2015` (or `--wiki DIR`). Two slices of it, so that no measured sentence was trained on:

- **MLM training**: the first `--mlm-articles` articles of shard 1, cut into `--block-length`-wordpiece blocks; the
  blocks of `--eval-articles` of them (a seeded sample) are held out and give the random-mask accuracy
  (`realm-hf mlm`: BERT's 15 % masking, 80/10/10, the masks of the held-out blocks fixed).
- **Reading**: the first `--read-articles` articles of shard 0 (another shard: never seen by the MLM stage) are REALM's
  knowledge corpus Z; salient-span masked sentences of `--read-blocks` of their blocks (X = Z) are read by each start as
  REALM's encoder (`realm-hf pretrain --eval_on_start`) before its first step and after `--reading-steps` steps of
  its reading warm-up: masked-token accuracy reading the sentence's own block alone, with the null document alone,
  and with the retriever's top blocks (MiniLM, mean pooling).

Writes `<output>.json` and `<output>.md` (default benchmarks/results/mlm-cpu) after every stage; a stage whose output
is complete in `--work` is not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench_common import cpu_model, run_realm_hf as run

STARTS = {
    # name: (realm-hf mlm arguments, learning rates); the scratch run gets a higher body rate (nothing to keep)
    "continued": ["--learning_rate", "1e-4", "--mlm_head_learning_rate", "1e-3"],
    "scratch": ["--from_scratch", "--learning_rate", "5e-4", "--mlm_head_learning_rate", "1e-3"],
}


def read_history(directory: str) -> list[dict]:
    with open(os.path.join(directory, "history.json"), encoding="utf-8") as f:
        return json.load(f)


def train_mlm(args: argparse.Namespace, name: str, log: str) -> dict:
    output = os.path.join(args.work, f"mlm-{name}")
    steps = args.scratch_steps if name == "scratch" and args.scratch_steps else args.steps
    seconds = None
    if not os.path.isfile(os.path.join(output, "final", "DONE")):
        resume = ["--resume_from_checkpoint", "latest"] if os.path.isdir(output) else []
        seconds = run([
            "mlm", "--output_dir", output, "--encoder", "minilm", "--corpus", args.mlm_corpus,
            "--max_articles", str(args.mlm_articles), "--block_length", str(args.block_length),
            "--eval_articles", str(args.eval_articles), "--eval_max_blocks", "256", "--max_steps", str(steps),
            "--per_device_batch_size", str(args.batch_size), "--warmup_steps", "20", "--eval_steps", "50",
            "--eval_on_start", "--logging_steps", "10", "--save_steps", "50", "--save_total_limit", "1",
            "--cache_dir", os.path.join(args.work, "cache"), "--report_to", "none", *STARTS[name], *resume,
        ], log)
        open(os.path.join(output, "final", "DONE"), "w").close()
    history = read_history(output)
    speeds = [r["steps_per_second"] for r in history if "steps_per_second" in r]
    return {
        "held_out_accuracy": {r["step"]: round(r["eval/mlm_accuracy"], 2) for r in history if "eval/mlm_accuracy" in r},
        "held_out_loss": {r["step"]: round(r["eval/mlm_loss"], 3) for r in history if "eval/mlm_loss" in r},
        "seconds_per_step": 1 / (sum(speeds) / len(speeds)) if speeds else None,
        "steps": steps,
        "seconds": seconds,
        "model": os.path.join(output, "final"),
    }


def read_with(args: argparse.Namespace, name: str, encoder: str, log: str) -> dict:
    """REALM's evaluation with `encoder` as the knowledge-augmented encoder, at step 0 and after `--reading-steps`
    steps of the reading warm-up (each sentence's own block as its only candidate, the retriever frozen)."""
    output = os.path.join(args.work, f"read-{name}-{args.reading_steps}")
    if not os.path.isfile(os.path.join(output, "history.json")):
        run([
            "pretrain", "--output_dir", output, "--retriever", "minilm", "--encoder", encoder, "--pooling", "mean",
            "--projection_size", "0", "--corpus", args.read_corpus, "--max_articles", str(args.read_articles),
            "--block_length", str(args.block_length), "--query_max_length", "64",
            "--joined_max_length", str(args.block_length + 64), "--index_type", "torch-exact",
            "--embed_batch_size", "128", "--masking", "salient_span", "--mask_source_blocks", str(args.read_blocks),
            "--num_candidates", "8", "--eval_mlm_examples", str(args.read_sentences),
            "--max_steps", str(args.reading_steps), "--reading_warmup_steps", str(args.reading_steps),
            "--eval_on_start", "--learning_rate", "1e-4", "--mlm_head_learning_rate", "1e-3", "--logging_steps", "10",
            "--per_device_batch_size", "16", "--no_rebuild_final_index", "--save_steps", "0",
            "--cache_dir", os.path.join(args.work, "cache"), "--report_to", "none",
        ], log)
    evaluations = [r for r in read_history(output) if "eval/mlm_accuracy_with_retrieval" in r]
    return {
        record["step"]: {key.removeprefix("eval/"): round(value, 2) for key, value in record.items()
                         if key.startswith("eval/")}
        for record in evaluations
    }


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = [
        "# The start that can read: masked-LM training on CPU",
        "",
        f"Machine: {result['machine']}. Command: `{result['command']}`.",
        "",
        f"MLM training: first {s['mlm_articles']} articles of {s['mlm_corpus']}, {s['block_length']}-wordpiece "
        f"blocks, {s['eval_articles']} articles held out (256 of their blocks, masks fixed); batch {s['batch_size']}, "
        f"random 15 % wordpieces (80/10/10); continued: body lr 1e-4, head 1e-3; scratch: body 5e-4, head 1e-3. "
        "Held-out accuracy (% of masked wordpieces):",
        "",
    ]
    runs = result["mlm"]
    steps = sorted({int(step) for run in runs.values() for step in run["held_out_accuracy"]})
    lines += ["| start | " + " | ".join(f"step {step}" for step in steps) + " | s/step |",
              "| --- |" + " ---: |" * (len(steps) + 1)]
    for name, run in runs.items():
        accuracy = {int(k): v for k, v in run["held_out_accuracy"].items()}
        cells = " | ".join(f"{accuracy[step]:.1f}" if step in accuracy else "" for step in steps)
        lines.append(f"| {name} | {cells} | {run['seconds_per_step']:.2f} |")
    lines += [
        "",
        f"Reading (REALM's encoder at step 0): Z = first {s['read_articles']} articles of {s['read_corpus']} (never "
        f"seen by MLM training), salient-span masked sentences of {s['read_blocks']} of its blocks, "
        f"{s['read_sentences']} held-out sentences; % of masked wordpieces filled right, before REALM's first step "
        f"and after {s['reading_steps']} steps of its reading warm-up (batch 16, the sentence's own block as the only "
        "candidate, retriever frozen; body lr 1e-4, head 1e-3):",
        "",
        "| encoder start | step | own block alone | null document alone | ratio | with retrieval (MiniLM, top 7 + null) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, by_step in result["reading"].items():
        for step, figures in by_step.items():
            source, null = figures.get("mlm_accuracy_source_block"), figures.get("mlm_accuracy_null_document")
            ratio = f"{source / null:.2f}" if source is not None and null else "-"
            lines.append(f"| {name} | {step} | {source:.1f} | {null:.1f} | {ratio} | "
                         f"{figures['mlm_accuracy_with_retrieval']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default="../shared/data/wiki-2015")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--scratch-steps", type=int, default=None, help="steps of the scratch run (default: --steps)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-length", type=int, default=128)
    parser.add_argument("--mlm-articles", type=int, default=2000)
    parser.add_argument("--eval-articles", type=int, default=50)
    parser.add_argument("--read-articles", type=int, default=300)
    parser.add_argument("--read-blocks", type=int, default=200)
    parser.add_argument("--read-sentences", type=int, default=300)
    parser.add_argument("--reading-steps", type=int, default=100, help="steps of REALM's reading warm-up read after")
    parser.add_argument("--starts", default="continued,scratch")
    parser.add_argument("--work", default="outputs/bench-mlm")
    parser.add_argument("--output", default="benchmarks/results/mlm-cpu")
    args = parser.parse_args(argv)
    args.mlm_corpus = os.path.join(args.wiki, "wiki-2015-00001-of-00008.jsonl.gz")
    args.read_corpus = os.path.join(args.wiki, "wiki-2015-00000-of-00008.jsonl.gz")
    for path in (args.mlm_corpus, args.read_corpus):
        if not os.path.isfile(path):
            parser.error(f"{path} does not exist: pass --wiki, the folder of the wiki-2015 shards")
    os.makedirs(args.work, exist_ok=True)
    log = os.path.join(args.work, "bench.log")
    result = {
        "command": " ".join(["python benchmarks/bench_mlm.py", *(sys.argv[1:] if argv is None else argv)]),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, torch threads {os.environ.get('OMP_NUM_THREADS', 'default')}",
        "settings": {"mlm_corpus": args.mlm_corpus, "read_corpus": args.read_corpus, "steps": args.steps,
                     "batch_size": args.batch_size, "block_length": args.block_length,
                     "mlm_articles": args.mlm_articles, "eval_articles": args.eval_articles,
                     "read_articles": args.read_articles, "read_blocks": args.read_blocks,
                     "read_sentences": args.read_sentences, "reading_steps": args.reading_steps},
        "mlm": {},
        "reading": {},
    }

    def write() -> None:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output + ".json", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        with open(args.output + ".md", "w", encoding="utf-8") as f:
            f.write(markdown(result))

    result["reading"]["all-MiniLM-L6-v2 as it comes"] = read_with(args, "minilm", "minilm", log)
    write()
    for name in args.starts.split(","):
        result["mlm"][name] = train_mlm(args, name, log)
        write()
        result["reading"][f"MLM, {name}, {result['mlm'][name]['steps']} steps"] = read_with(
            args, name, result["mlm"][name]["model"], log
        )
        write()
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
