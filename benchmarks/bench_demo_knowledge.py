"""How well, and how fast, does `realm-hf demo` do on held-out sentences that no setting was chosen on?

    HF_HUB_OFFLINE=1 python benchmarks/bench_demo_knowledge.py                 # seeds 1 2 3: 600 held-out sentences
    HF_HUB_OFFLINE=1 python benchmarks/bench_demo_knowledge.py --seeds 0       # the split the recipes were chosen on

The recipes of `realm_hf.demo.knowledge_runs.KNOWLEDGE_RECIPES` were chosen on the held-out sentences of the task of
seed 0 (benchmarks/bench_knowledge.py), which is also the demo's default. Every other seed is another task (other
people, facts, teachers and held-out sentences) that no choice has seen, so the figures of seeds >= 1 are the demo's
report; seed 0 is run on request, for comparison.

Each seed runs the demo as a user does (`realm-hf demo --seed S --output DIR`, a fresh process, wall time measured)
and reads its `summary.json`. Per seed and in total, for the REALM run (retriever trained) and the control (retriever
frozen): held-out sentences whose right document the retriever ranks first, and whose blank the model fills right
(each blank is one wordpiece, so masked-token accuracy is the fraction of sentences answered right).

Writes `<output>.json` and `<output>.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_common import RESULTS
from realm_hf.utils.machine import describe_machine

VARIANTS = {"recipe": "retriever trained (REALM)", "control": "retriever frozen (control)"}


def run_demo(seed: int, output: str, extra: list[str]) -> tuple[dict, float]:
    """`realm-hf demo --seed SEED --output OUTPUT EXTRA` in a fresh process; its summary and wall seconds."""
    began = time.time()
    subprocess.run(
        [sys.executable, "-m", "realm_hf.cli", "demo", "--seed", str(seed), "--output", output, *extra],
        check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    seconds = time.time() - began
    with open(os.path.join(output, "summary.json"), encoding="utf-8") as f:
        return json.load(f), seconds


def counts(summary: dict) -> dict[str, dict[str, int]]:
    """Per variant: held-out sentences, right document first, blank filled right (before and after)."""
    held_out = summary["task"]["held_out_sentences"]
    result = {}
    for variant in VARIANTS:
        run = summary["settings"][f"{summary['init']}/{variant}"]
        result[variant] = {
            "sentences": held_out,
            "right_document_before": round(run["retrieval_top1_before"] * held_out),
            "right_document_after": round(run["retrieval_top1_after"] * held_out),
            "answered_right_before": round(run["mlm_acc_retrieval_before"] * held_out),
            "answered_right_after": round(run["mlm_acc_retrieval_after"] * held_out),
            "retriever_learning": run.get("retriever_learning_summary"),
        }
    return result


def write_markdown(results: dict, path: str) -> None:
    lines = [
        "# `realm-hf demo` on held-out sentences no choice was made on",
        "",
        f"`python benchmarks/bench_demo_knowledge.py --seeds {' '.join(map(str, results['seeds']))}` — "
        f"{results['machine']}. Each seed is a fresh task of {results['entities']} fictional people (2 held-out "
        "sentences each: facts no pre-training sentence states, in unseen wordings); the recipes were chosen on "
        "seed 0. Right document = ranked first among all documents by the retriever; answered right = the blank "
        "filled with the right word (the marginal over ∅ + 3 retrieved documents).",
        "",
        "| seed | demo wall time | variant | right document before | after | answered right before | after |",
        "|---|---|---|---|---|---|---|",
    ]
    def table_row(seed: str, time: str, label: str, c: dict) -> str:
        n = c["sentences"]
        return (
            f"| {seed} | {time} | {label} | {c['right_document_before']}/{n} | **{c['right_document_after']}/{n}** | "
            f"{c['answered_right_before']}/{n} | **{c['answered_right_after']}/{n}** |"
        )

    for seed in results["seeds"]:
        row = results["per_seed"][str(seed)]
        for variant, label in VARIANTS.items():
            lines.append(table_row(str(seed), f"{row['seconds'] / 60:.1f} min", label, row["counts"][variant]))
    for variant, label in VARIANTS.items():
        lines.append(table_row("all", "", label, results["total"][variant]))
    lines += ["", "The REALM runs' retriever: " + "; ".join(
        f"seed {seed}: {results['per_seed'][str(seed)]['counts']['recipe']['retriever_learning'].rstrip('.')}" for seed in results["seeds"]
    ), ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="Task seeds (default: %(default)s).")
    parser.add_argument("--output", default=os.path.join(RESULTS, "demo-knowledge"), help="Prefix of .json/.md.")
    parser.add_argument("--work-dir", default=None, help="Keep the demo runs here (default: a temporary directory).")
    parser.add_argument("demo_args", nargs=argparse.REMAINDER, help="After --: more `realm-hf demo` options.")
    args = parser.parse_args(argv)
    extra = [a for a in args.demo_args if a != "--"]
    work = args.work_dir or tempfile.mkdtemp(prefix="bench-demo-knowledge-")
    results: dict = {"machine": describe_machine(gpu=False), "seeds": args.seeds, "demo_args": extra,
                     "per_seed": {}}
    for seed in args.seeds:
        summary, seconds = run_demo(seed, os.path.join(work, f"seed-{seed}"), extra)
        results["entities"] = summary["task"]["num_entities"]
        results["per_seed"][str(seed)] = {"seconds": round(seconds, 1), "counts": counts(summary),
                                          "answers": summary["answers"]}
        results["total"] = {
            variant: {
                key: sum(results["per_seed"][str(s)]["counts"][variant][key] for s in results["per_seed"])
                for key in ("sentences", "right_document_before", "right_document_after", "answered_right_before",
                            "answered_right_after")
            }
            for variant in VARIANTS
        }
        results["seeds"] = [int(s) for s in results["per_seed"]]
        with open(args.output + ".json", "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        write_markdown(results, args.output + ".md")
        print(f"seed {seed}: {seconds / 60:.1f} min, {results['per_seed'][str(seed)]['counts']}", flush=True)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
