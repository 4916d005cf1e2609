"""REALM-News: pre-training on news sentences X != the knowledge corpus Z, against X = Z, retriever trained against
frozen (issue 45, item 2).

    HF_HUB_OFFLINE=1 python benchmarks/bench_x_not_z.py --seeds 0,1,2 --num-entities 1000 --work-dir /tmp/xz
    # seeds side by side, one process per core (warm starts kept in --work-dir), then one table:
    for s in 0 1 2; do OMP_NUM_THREADS=1 python benchmarks/bench_x_not_z.py --seeds $s --work-dir /tmp/xz \\
        --output /tmp/xz-$s & done
    wait; python benchmarks/bench_x_not_z.py --merge /tmp/xz-0.json /tmp/xz-1.json /tmp/xz-2.json

The task is `realm_hf.data.knowledge_task_news` (task seed 0 whatever the training seed): Z is the hard task's corpus
plus a profile per person (each fact stated in two documents), X is news-style sentences about the people that
combine two or three facts and mask one; the held-out sentences are news sentences of unseen wording asking the one
attribute of a person that X never states. Per training seed the tiny hard-task recipe's warm starts (ICT on Z, the
reading warm-up on Z's own sentences) run once (`bench_ablations.warm_start`, kept in `--work-dir`); from them REALM
runs the same steps four times (`SETTINGS`): X = the news sentences or X = Z's own sentences (each sentence's own
block excluded from its candidates), the retriever trained or frozen. Held-out figures: right document first (the
person's record or profile ranked first) and the blank filled with retrieval, at the start and the end. Results are
written after each run; a rerun skips the (setting, seed) pairs already there.

Writes benchmarks/results/x-not-z.json and x-not-z.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from realm_hf.data.knowledge_task_news import NewsValueTagger, make_news_knowledge_task
from realm_hf.demo.knowledge_runs import (
    KNOWLEDGE_TASK_SHAPES, hard_task_recipe, held_out_examples, run_setting, write_task_files,
)

from bench_ablations import check_same_recipe, merge, seeded_warm_start
from bench_common import RESULTS, add_knowledge_run_arguments, machine, single_thread_logging, write_json
from bench_knowledge import held_out_split

# setting -> where the pre-training sentences come from and whether the retriever learns
SETTINGS: dict[str, dict] = {
    "x-not-z": {"x": "news", "frozen": False},
    "x-not-z-control": {"x": "news", "frozen": True},
    "x-is-z": {"x": "z", "frozen": False},
    "x-is-z-control": {"x": "z", "frozen": True},
}
# held-out figures kept per run, at the start and the end
METRICS = ("gold_top1", "gold_top3", "gold_posterior_mass", "mlm_accuracy_with_retrieval",
           "mlm_accuracy_null_document", "mlm_accuracy_gold_document")


def run(setting: str, recipe: dict, paths: dict, eval_examples, tagger, seed_work: str, start: dict, seed: int,
        eval_every: int, half: str) -> dict:
    """One REALM run of a setting from the seed's warm starts: the held-out figures before and after, the curve."""
    news = SETTINGS[setting]["x"] == "news"
    result = run_setting(
        f"{half}-{setting}", recipe, paths if news else {**paths, "train": None},  # no pre-training corpus: X = Z
        eval_examples, tagger, seed_work, start["warmup_dir"], start["ict_dir"], frozen=SETTINGS[setting]["frozen"],
        eval_every=eval_every, seed=seed,
    )
    before, after = result["curve"][0], result["curve"][-1]
    return {
        "before": {k: before[k] for k in METRICS if k in before},
        "after": {k: after[k] for k in METRICS if k in after},
        "seconds": result["seconds"], "curve": result["curve"], "warm_start_seconds": start["seconds"],
        "retriever_learning_summary": result["retriever_learning_summary"],
    }


def paired(results: dict, metric: str, minuend: str, subtrahend: str) -> dict | None:
    """`minuend - subtrahend` of a metric after the run, per seed both ran: mean, standard deviation, values."""
    a, b = results["rows"].get(minuend, {}), results["rows"].get(subtrahend, {})
    seeds = sorted(set(a) & set(b), key=int)
    if not seeds:
        return None
    values = [a[s]["after"][metric] - b[s]["after"][metric] for s in seeds]
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "values": values, "seeds": seeds}


def _mean_sd(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    sd = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{statistics.fmean(values) * scale:.{digits}f} ± {sd:.{digits}f}"


def write_markdown(results: dict, path: str) -> None:
    half = results["half"]
    recipe = results["recipe"]
    if recipe.get("reading_loss_weight"):
        weight = f"{recipe['reading_loss_weight']:g}"
        if recipe.get("reading_loss_weight_final") is not None:
            weight = f"from {weight} rising to {recipe['reading_loss_weight_final']:g}"
        reading = f"a reading loss beside each step at {weight} times REALM's"
    else:
        reading = "no reading after the warm-up"
    lines = [
        "# X ≠ Z against X = Z: REALM on the news variant of the hard knowledge task",
        "",
        f"{results['machine']}. {results['task']}. The tiny hard-task recipe (`HARD_TASK_RECIPE`: ICT "
        f"{recipe['ict_steps']} steps and reading warm-up {recipe['reading_warmup_steps']} steps on Z, once per seed; "
        f"then REALM {recipe['steps']} steps, batch {recipe['batch_size']}, {reading}), the same for every setting. "
        "X ≠ Z: the news sentences are the pre-training corpus; X = Z: Z's own sentences, each with its own block excluded. Figures are on "
        + ("the 'report' half of the held-out sentences, which no choice looked at."
           if half == "report" else "the 'choose' half of the held-out sentences (for choosing, not for reporting)."),
        "",
        "Right document first: the fraction of held-out sentences whose top retrieved block is the person's record "
        "or profile. Blank filled: percent of masked wordpieces predicted right, with retrieval (the marginal over "
        "∅ + 3 retrieved), with ∅ only (what the encoder memorized), and reading the person's record alone. "
        "Start → end of REALM pre-training; mean ± standard deviation over seeds.",
        "",
        "| setting | X | retriever | seeds | right document first: start → end | per seed | "
        "blank filled with retrieval: start → end | ∅ only, end | reading the record, end | minutes per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for setting, how in SETTINGS.items():
        per_seed = results["rows"].get(setting)
        if not per_seed:
            continue
        runs = [per_seed[s] for s in sorted(per_seed, key=int)]

        def column(when: str, metric: str) -> list[float]:
            return [r[when][metric] for r in runs]

        per_seed_top1 = ", ".join(
            f"{a:.2f} → {b:.2f}" for a, b in zip(column("before", "gold_top1"), column("after", "gold_top1"))
        )
        lines.append(
            f"| {setting} | {'news sentences' if how['x'] == 'news' else 'Z'} | "
            f"{'frozen' if how['frozen'] else 'trained'} | {len(runs)} | "
            f"{_mean_sd(column('before', 'gold_top1'))} → {_mean_sd(column('after', 'gold_top1'))} | "
            f"{per_seed_top1} | "
            f"{_mean_sd(column('before', 'mlm_accuracy_with_retrieval'), digits=1)} → "
            f"{_mean_sd(column('after', 'mlm_accuracy_with_retrieval'), digits=1)} | "
            f"{_mean_sd(column('after', 'mlm_accuracy_null_document'), digits=1)} | "
            f"{_mean_sd(column('after', 'mlm_accuracy_gold_document'), digits=1)} | "
            f"{_mean_sd([r['seconds'] for r in runs], 1 / 60, 1)} |"
        )
    lines += ["", "Paired per seed (end of REALM pre-training):", "",
              "| difference | right document first | blank filled with retrieval |", "|---|---|---|"]
    for words, minuend, subtrahend in (("X ≠ Z: trained − frozen", "x-not-z", "x-not-z-control"),
                                       ("X = Z: trained − frozen", "x-is-z", "x-is-z-control"),
                                       ("trained: X ≠ Z − X = Z", "x-not-z", "x-is-z")):
        top1 = paired(results, "gold_top1", minuend, subtrahend)
        filled = paired(results, "mlm_accuracy_with_retrieval", minuend, subtrahend)
        if top1 is not None:
            lines.append(f"| {words} (seeds {', '.join(top1['seeds'])}) | {_mean_sd(top1['values'])} | "
                         f"{_mean_sd(filled['values'], digits=1)} |")
    warm = {seed: run_["warm_start_seconds"] for runs in results["rows"].values() for seed, run_ in runs.items()}
    lines += ["", f"Warm starts (ICT + reading warm-up, once per seed): "
              f"{', '.join(f'seed {s}: {v / 60:.1f} min' for s, v in sorted(warm.items()))}. Commands: "
              + "; ".join(f"`{c}`" for c in results.get("commands", [])) + ".", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def write_all(results: dict, output: str) -> None:
    write_json(output + ".json", results)
    write_markdown(results, output + ".md")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", default=",".join(SETTINGS), help="Comma-separated: " + ", ".join(SETTINGS) + ".")
    add_knowledge_run_arguments(parser, os.path.join(RESULTS, "x-not-z"), num_entities=1000)
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_x_not_z.py " + " ".join(argv if argv is not None else sys.argv[1:])
    single_thread_logging()

    if args.merge:
        results = merge(args.merge)
        files = []
        for path in args.merge:
            with open(path, encoding="utf-8") as f:
                files.append(json.load(f))
        halves = {r["half"] for r in files}
        if len(halves) > 1:
            raise SystemExit(f"error: the files measure different held-out halves {sorted(halves)}; merge one half.")
        results.update(half=halves.pop(), commands=[c for r in files for c in r.get("commands", [])] + [command])
        write_all(results, args.output)
        return results
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise ValueError(f"Unknown settings {unknown}; choose from {list(SETTINGS)}.")
    recipe = hard_task_recipe(args.set)
    results = {"rows": {}}
    if os.path.isfile(args.output + ".json"):
        with open(args.output + ".json", encoding="utf-8") as f:
            results = json.load(f)
        check_same_recipe(results, recipe, args.output + ".json")
        if results.get("half", args.half) != args.half:
            raise SystemExit(f"error: {args.output}.json measures the {results['half']!r} half; pass another --output.")
    work = args.work_dir or tempfile.mkdtemp(prefix="bench-x-not-z-")
    task = make_news_knowledge_task(args.num_entities, seed=0)
    # each process its own copy of the task files: a process rewriting them must not cut short another's read
    paths = write_task_files(task, os.path.join(work, f"task-{os.getpid()}"))
    tagger = NewsValueTagger(task.values, task.train_sentences + task.held_out_sentences)
    from transformers import AutoTokenizer

    from realm_hf.modeling.initial_weights import resolve_bert_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    held_out = held_out_examples(task, tokenizer, KNOWLEDGE_TASK_SHAPES["query_max_length"], tagger=tagger)
    eval_examples = held_out_split(held_out, args.half, args.eval_sentences)
    results.update({
        "machine": machine(),
        "task": f"news variant of the hard task, {args.num_entities} people (a record and a profile each, 2 mentions "
                f"and 2 namesakes per person) among {len(task.documents)} blocks, {len(task.train_sentences)} news "
                f"sentences in X, {len(eval_examples)} held-out sentences evaluated",
        "recipe": recipe,
        "half": args.half,
        "commands": [*results.get("commands", []), command],
    })
    for seed in map(int, args.seeds.split(",")):
        todo = [s for s in settings if str(seed) not in results["rows"].get(s, {})]
        if not todo and not args.warm_start_only:
            continue
        seed_work, seeded, start = seeded_warm_start(recipe, paths, work, seed, tokenizer, tagger, eval_examples)
        if args.warm_start_only:
            continue
        for setting in todo:
            began = time.time()
            figures = run(setting, seeded, paths, eval_examples, tagger, seed_work, start, seed, args.eval_every,
                          args.half)
            results["rows"].setdefault(setting, {})[str(seed)] = figures
            print(f"seed {seed} {setting}: {figures['before']['gold_top1']:.2f} -> {figures['after']['gold_top1']:.2f} "
                  f"top-1 ({time.time() - began:.0f} s)", flush=True)
            write_all(results, args.output)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
