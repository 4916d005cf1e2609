"""The paper's Table 2 ablations on the hard knowledge task, each row against the full recipe, same seeds.

    HF_HUB_OFFLINE=1 python benchmarks/bench_ablations.py --seeds 0,1,2                 # every row, three seeds
    HF_HUB_OFFLINE=1 python benchmarks/bench_ablations.py --rows full,control --seeds 0 # some rows
    # seeds side by side, one process per core, then one table:
    for s in 0 1 2; do OMP_NUM_THREADS=1 python benchmarks/bench_ablations.py --seeds $s --output /tmp/abl-$s & done
    wait; python benchmarks/bench_ablations.py --merge /tmp/abl-0.json /tmp/abl-1.json /tmp/abl-2.json

The task is `realm_hf.data.knowledge_task_hard` (task seed 0 for every row and seed: the rows differ only in the
recipe and the training seed). Per training seed: the tiny recipe's ICT warm start and reading warm-up run once, then
every row runs REALM pre-training from them with one change (`ROWS`), and two rows only evaluate a pairing of models
the others trained (the paper's component swap). Figures are on the "report" half of the held-out sentences
(`bench_knowledge.held_out_split`), which no choice of recipe looked at. Results are appended to the JSON after each
run; a rerun skips the (row, seed) pairs already there, so the benchmark resumes where it stopped.

`--remeasure` trains nothing: it measures the models each row started from (the warm start, or the row's own) and
the final models that the rows left in `--work-dir`, with the row's candidates, on `--eval-sentences` of `--half`
(e.g. the whole half, 2,000 sentences, where the runs measured 400):

    HF_HUB_OFFLINE=1 python benchmarks/bench_ablations.py --rows full,control --seeds 0 --work-dir /tmp/abl-work \
        --remeasure --eval-sentences 2000 --output /tmp/abl-2000

Writes benchmarks/results/ablations.json, ablations.md and ablations.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from realm_hf.corpus import split_into_blocks
from realm_hf.data.knowledge_task import KnowledgeValueTagger
from realm_hf.data.knowledge_task_hard import make_hard_knowledge_task
from realm_hf.demo.knowledge_runs import (
    KNOWLEDGE_TASK_SHAPES, corpus_arguments, hard_task_recipe, held_out_examples, pretrainer, run_ict,
    run_reading_warmup, run_setting, save_random_models, write_task_files,
)
from realm_hf.modeling.knowledge_encoder import IGNORE_INDEX
from realm_hf.training.arguments import ModelArguments

from bench_knowledge import held_out_split
from bench_common import RESULTS, add_knowledge_run_arguments, machine, single_thread_logging


# row -> what changes, and the paper's Table 2 row it mirrors: its NQ dev EM / zero-shot Recall@5 and their direction
# against full REALM, which our MLM accuracy with retrieval (~ EM) and gold top-1 (~ Recall@5) are compared with
ROWS: dict[str, dict] = {
    "full": {"change": {}, "paper": {"row": "REALM", "figures": "38.2 / 38.5"}},
    "control": {"change": {"frozen": True}, "paper": {
        "row": "baseline retriever, no REALM (ORQA)", "figures": "31.3 / 13.9", "em": "lower", "recall": "lower"}},
    "random-token-masks": {"change": {"masking": "random_token"}, "paper": {
        "row": "random uniform masks", "figures": "32.3 / 24.2", "em": "lower", "recall": "lower"}},
    "random-span-masks": {"change": {"masking": "random_span"}, "paper": {
        "row": "random span masks", "figures": "35.3 / 26.1", "em": "lower", "recall": "lower"}},
    "stale-10x": {"change": {"refresh_schedule": "100"}, "paper": {
        "row": "30x stale MIPS", "figures": "28.7 / 15.1", "em": "lower", "recall": "lower"}},
    "never-refreshed": {"change": {"refresh_schedule": "0"}, "paper": None},
    "no-null-document": {"change": {"use_null_document": False}, "paper": None},
    # the paper's ∅: the empty block embedded by the document tower (query-dependent), not a learned prior logit
    "paper-null-document": {"change": {"null_document_score": "embedding"}, "paper": None},
    "no-ict": {"change": {"ict": False}, "paper": None},
    "no-reading-warmup": {"change": {"warmup": False}, "paper": None},
    "k2": {"change": {"num_candidates": 2}, "paper": None},
    "k8": {"change": {"num_candidates": 8}, "paper": None},
    "compressed-index": {"change": {"index_type": "compressed"}, "paper": None},
    # evaluation only: models the rows above trained, paired anew
    "realm-retriever+start-encoder": {"change": {"pair": ("full", "warmup")}, "paper": {
        "row": "REALM retriever + baseline encoder", "figures": "37.4 / 38.5", "em": "lower", "recall": "about equal"}},
    "start-retriever+realm-encoder": {"change": {"pair": ("start", "full")}, "paper": {
        "row": "baseline retriever + REALM encoder", "figures": "35.3 / 13.9", "em": "lower", "recall": "lower"}},
}
METRICS = ("gold_top1", "gold_posterior_mass", "mlm_accuracy_with_retrieval", "mlm_accuracy_null_document",
           "mlm_accuracy_gold_document")
# what a row changes in its evaluation too (the candidates read), which --remeasure measures with
EVALUATION_CHANGES = ("num_candidates", "use_null_document")


def table_figures(figures: dict) -> dict:
    """The figures a row's table keeps: `METRICS` and every gold top-k."""
    return {k: v for k, v in figures.items() if k in METRICS or k.startswith("gold_top")}


def evaluate_pair(name: str, recipe: dict, paths: dict, eval_examples, tagger, work: str, retriever: str,
                  encoder: str, ict_dir: str | None, seed: int, **pretraining) -> dict:
    """Held-out figures of a retriever (`ict_dir`: the ICT one over the `retriever` architecture) and an encoder
    trained apart, without a training step; `pretraining` overrides the candidates read (`EVALUATION_CHANGES`)."""
    model = ModelArguments(
        retriever=retriever, encoder=encoder, pooling=recipe["model"]["pooling"],
        projection_size=recipe["model"]["projection_size"],
    )
    trainer = pretrainer(
        name, recipe, model, corpus_arguments(paths, paths["train"]), work, 1, 0, seed, tagger, eval_examples,
        ict_warm_start=ict_dir, **pretraining,
    )
    return trainer.evaluate(0)


def row_start(change: dict, start: dict) -> tuple[str | None, str | None]:
    """The ICT retriever and the reading warm-up a training row starts from (a row's `change`): the warm start's, or
    None where the row goes without (`no-ict`: the random retriever; `no-reading-warmup`: the random encoder)."""
    return (start["ict_dir"] if change.get("ict", True) else None,
            start["warmup_dir"] if change.get("warmup", True) else None)


def run_row(row: str, recipe: dict, paths: dict, eval_examples, tagger, work: str, start: dict, seed: int,
            eval_every: int, other_half=None) -> dict:
    change = dict(ROWS[row]["change"])
    if "pair" in change:
        retriever_of, encoder_of = change["pair"]
        full = os.path.join(work, "full", "final")
        # the REALM-trained retriever, or the one REALM started from (ICT over the random tower)
        retriever = os.path.join(full, "retriever") if retriever_of == "full" else start["retriever"]
        encoder = os.path.join(full if encoder_of == "full" else start["warmup_dir"], "encoder")
        began = time.time()
        figures = evaluate_pair(row, recipe, paths, eval_examples, tagger, work, retriever, encoder,
                                start["ict_dir"] if retriever_of == "start" else None, seed)
        return {"after": table_figures(figures),
                "seconds": round(time.time() - began, 1)}
    frozen = change.pop("frozen", False)
    ict_dir, start_dir = row_start(change, start)
    for key in ("ict", "warmup"):  # row_start's: not PretrainingArguments
        change.pop(key, None)
    result = run_setting(
        row, recipe, paths, eval_examples, tagger, work, start_dir, ict_dir, frozen=frozen, eval_every=eval_every,
        seed=seed, rebuild_final_index=row == "full", also_evaluate=other_half, **change,
    )
    after = result["curve"][-1]
    other = {"other_half": result["also_evaluated"]} if "also_evaluated" in result else {}
    return {
        **other,
        "after": table_figures(after),
        "before": table_figures(result["curve"][0]),
        "seconds": result["seconds"], "curve": result["curve"],
        "retriever_learning_summary": result["retriever_learning_summary"],
        "index_staleness": result["index_staleness"],
    }


def remeasure_row(row: str, recipe: dict, paths: dict, eval_examples, tagger, work: str, start: dict,
                  seed: int, starts_measured: dict, label: str) -> dict:
    """A row's figures before and after its run, measured anew from the models the run started from and the final
    models it left in `work` (the seed's folder), without a training step, with the candidates the row reads
    (`EVALUATION_CHANGES`). The start is the warm start's, or the row's own: the random retriever without ICT
    (`no-ict`), the random encoder without the reading warm-up (`no-reading-warmup`), as `run_row` starts them.
    `starts_measured` keeps each start's figures for the next row of the same seed with the same start and
    candidates; `label` names the measurement's folders (measurements of other sentences may run side by side)."""
    change = ROWS[row]["change"]
    if "pair" in change:  # the swaps only evaluate: as in a run
        return run_row(row, recipe, paths, eval_examples, tagger, work, start, seed, eval_every=0)
    final = os.path.join(work, row, "final")
    if not os.path.isdir(final):
        raise SystemExit(f"error: --remeasure found no final models of row {row!r} in {final}; run the row with this "
                         "--work-dir first.")
    began = time.time()
    candidates = {k: v for k, v in change.items() if k in EVALUATION_CHANGES}
    start_ict, start_warmup = row_start(change, start)
    start_encoder = os.path.join(start_warmup, "encoder") if start_warmup else recipe["model"]["encoder"]

    def measure(name: str, retriever: str, encoder: str, ict_dir: str | None) -> dict:
        figures = evaluate_pair(name, recipe, paths, eval_examples, tagger, work, retriever, encoder, ict_dir, seed,
                                **candidates)
        return table_figures(figures)

    start_key = (work, start_ict, start_encoder, tuple(sorted(candidates.items())))
    if start_key not in starts_measured:
        starts_measured[start_key] = measure(f"remeasured-{label}-start-{row}", start["retriever"], start_encoder,
                                             start_ict)
    after = measure(f"remeasured-{label}-{row}", os.path.join(final, "retriever"), os.path.join(final, "encoder"), None)
    return {"before": starts_measured[start_key], "after": after, "seconds": round(time.time() - began, 1)}


def reading(run: dict) -> tuple[float, float] | None:
    """Masked-token accuracy with the gold block as the only candidate at a run's start and end (from `before` /
    `after`, or the curve of results written before they held it); None for the evaluation-only swaps."""
    metric = "mlm_accuracy_gold_document"
    if metric in run.get("before", {}) and metric in run.get("after", {}):
        return run["before"][metric], run["after"][metric]
    curve = run.get("curve") or []
    if curve and metric in curve[0] and metric in curve[-1]:
        return curve[0][metric], curve[-1][metric]
    return None


def summarize(results: dict) -> dict:
    """Per row: mean and standard deviation over seeds of each metric, and the difference to `full`."""
    table = {}
    for row, per_seed in results["rows"].items():
        figures = {}
        for metric in METRICS:
            by_seed = {seed: per_seed[seed]["after"][metric] for seed in sorted(per_seed, key=int)
                       if metric in per_seed[seed]["after"]}
            values = list(by_seed.values())
            if values:
                figures[metric] = {
                    "mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "seeds": len(values), "values": values, "by_seed": by_seed,
                }
        table[row] = figures
    for row, figures in table.items():
        full = table.get("full", {})
        for metric, summary in figures.items():
            if metric in full and row != "full":
                summary["minus_full"] = summary["mean"] - full[metric]["mean"]
    return table


def compare(metric: str, summary: dict, full: dict, seeds: set[str] | None = None) -> str | None:
    """'lower', 'higher' or 'about equal': the row against full REALM, beyond the spread (at least 1 % of full's
    value). Over two or more shared seeds the comparison is paired: the mean of the per-seed differences against
    their standard deviation (a seed whose start is bad for every row moves both sides alike), over `seeds` only when
    given; else the means against the larger standard deviation of the two."""
    if metric not in summary or metric not in full:
        return None
    row, base = summary[metric], full[metric]
    floor = 0.01 * abs(base["mean"])
    shared = set(row.get("by_seed", {})) & set(base.get("by_seed", {}))
    shared = sorted(shared if seeds is None else shared & seeds, key=int)
    if len(shared) >= 2:
        differences = [base["by_seed"][seed] - row["by_seed"][seed] for seed in shared]
        gap, spread = statistics.fmean(differences), max(statistics.stdev(differences), floor)
    else:
        gap, spread = base["mean"] - row["mean"], max(row["std"], base["std"], floor)
    return "lower" if gap > spread else ("higher" if gap < -spread else "about equal")


def direction(row: str, summary: dict, full: dict, seeds: set[str] | None = None) -> str:
    """How the row compares with full REALM on gold top-1 (~ the paper's Recall@5) and MLM accuracy with retrieval
    (~ its EM), over `seeds` when given, and whether that is the paper's direction."""
    if row == "full":
        return ""
    found = {metric: compare(name, summary, full, seeds)
             for metric, name in (("recall", "gold_top1"), ("em", "mlm_accuracy_with_retrieval"))}
    words = f"top-1 {found['recall']}, MLM {found['em']}"
    paper = ROWS[row]["paper"]
    if paper is None:
        return words
    agree = [found[key] == paper[key] for key in ("recall", "em")]
    verdict = "as the paper" if all(agree) else (
        "paper: " + ", ".join(f"{name} {paper[key]}" for key, name in (("recall", "R@5"), ("em", "EM"))))
    return f"{words} ({verdict})"


def check_same_recipe(results: dict, recipe: dict, source: str) -> None:
    """Refuse to mix rows of different recipes (e.g. another --steps) in one table."""
    if results.get("recipe") not in (None, recipe):
        changed = sorted(k for k in {**results["recipe"], **recipe} if results["recipe"].get(k) != recipe.get(k))
        raise SystemExit(
            f"error: {source} holds rows of another recipe (differs in {changed}); pass another --output, or the "
            "same recipe settings, so that every row of a table ran the same recipe."
        )


def merge(paths: list[str]) -> dict:
    """The rows of several result files (e.g. seeds run side by side) in one; the recipes must be the same and a
    (row, seed) pair may appear in one file only."""
    merged: dict = {"rows": {}}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
        if "recipe" in merged:
            check_same_recipe(results, merged["recipe"], path)
            # files written before they recorded the half measured the report half
            for key, default in (("task", None), ("half", "report"), ("remeasured", False)):
                if results.get(key, default) != merged.get(key, default):
                    raise SystemExit(f"error: {path} has {key} {results.get(key, default)!r}, an earlier file "
                                     f"{merged.get(key, default)!r}: merge measurements of the same sentences only.")
        for key in ("machine", "task", "recipe", "half", "masked_tokens", "remeasured"):
            if key in results:
                merged.setdefault(key, results[key])
        for row, per_seed in results["rows"].items():
            twice = set(per_seed) & set(merged["rows"].get(row, {}))
            if twice:
                raise SystemExit(f"error: row {row!r}, seeds {sorted(twice)} appear in {path} and an earlier file.")
            merged["rows"].setdefault(row, {}).update(per_seed)
    return merged


def working_seeds(per_seed: dict) -> set[str]:
    """The seeds whose run did not end with its retriever below its start (for full REALM: the seeds with a working
    REALM to ablate; a collapsed one leaves nothing for a row to remove)."""
    return {seed for seed, run in per_seed.items()
            if not run.get("curve") or run["curve"][-1]["gold_top1"] >= run["curve"][0]["gold_top1"]}


def trained_runs(per_seed: dict) -> list[dict]:
    """The runs of a row in which the retriever learned (not the frozen control, not the evaluation-only swaps)."""
    return [run for run in per_seed.values() if run.get("curve") and run.get("index_staleness")
            and "never learned" not in run.get("retriever_learning_summary", "")]


def fell(per_seed: dict) -> str:
    """Seeds whose retriever ended below where it started (gold top-1), of those that trained it: '1 of 3'."""
    curves = [run["curve"] for run in trained_runs(per_seed)]
    if not curves:
        return ""
    return f"{sum(curve[-1]['gold_top1'] < curve[0]['gold_top1'] for curve in curves)} of {len(curves)}"


def staleness(per_seed: dict) -> str:
    """Mean (max) steps the training index lagged the retriever, over the seeds that trained it."""
    lags = [run["index_staleness"] for run in trained_runs(per_seed)]
    if not lags:
        return ""
    return f"{statistics.fmean(lag['mean'] for lag in lags):.0f} ({max(lag['max'] for lag in lags):.0f})"


def write_markdown(results: dict, path: str) -> None:
    table = summarize(results)
    full = table.get("full", {})
    working = working_seeds(results["rows"].get("full", {}))
    collapsed = sorted(set(results["rows"].get("full", {})) - working, key=int)
    lines = [
        "# The paper's Table 2 ablations on the hard knowledge task",
        "",
        f"`python benchmarks/bench_ablations.py` — {results['machine']}. {results['task']}. Each row changes one "
        "thing in the tiny recipe (ICT warm start, reading warm-up, REALM pre-training; "
        f"{results['recipe']['steps']} steps), same training seeds; mean ± standard deviation over seeds. Figures "
        + ("are on held-out sentences that no choice looked at (the 'report' half)."
           if results.get("half", "report") == "report" else
           "are on the 'choose' half of the held-out sentences, the one recipes are chosen on (not for reporting)."),
        "",
        "| row | seeds | gold top-1 (per seed) | gold posterior | MLM acc. with retrieval | MLM acc. ∅ only | "
        "retriever fell | index lag, steps mean (max) | vs full | paper: row, NQ EM / zero-shot R@5 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        summary = table.get(row)
        if not summary:
            continue

        def cell(metric: str) -> str:
            s = summary.get(metric)
            return "" if s is None else f"{s['mean']:.3f} ± {s['std']:.3f}"

        seeds = max((s["seeds"] for s in summary.values()), default=0)
        paper = ROWS[row]["paper"]
        top1 = summary.get("gold_top1")
        per_seed = f" ({', '.join(f'{v:.2f}' for v in top1['values'])})" if top1 and top1["seeds"] > 1 else ""
        lines.append(
            f"| {row} | {seeds} | {cell('gold_top1')}{per_seed} | {cell('gold_posterior_mass')} | "
            f"{cell('mlm_accuracy_with_retrieval')} | {cell('mlm_accuracy_null_document')} | "
            f"{fell(results['rows'][row])} | {staleness(results['rows'][row])} | {direction(row, summary, full, working)} | "
            f"{paper['row'] + ', ' + paper['figures'] if paper else ''} |"
        )
    lines += [
        "",
        "MLM accuracies are percent of masked wordpieces. 'Retriever fell': seeds whose retriever ended with a lower "
        "gold top-1 than it started with (a collapse). 'vs full': the mean of the per-seed differences to full REALM "
        "below, above or within their standard deviation (at least 1 % of full's value), gold top-1 standing for the "
        "paper's Recall@5 and MLM accuracy with retrieval for its EM"
        + (f"; over the seeds where full REALM did not collapse (not seed {', '.join(collapsed)}: a collapsed "
           "retriever leaves nothing for a row to take away, every row of such a seed is shown all the same)"
           if collapsed else "") + ". The index lag is how many steps the searched index was behind the retriever (refresh every 10 steps, "
        + ("each swapped in at the step that asks for it: refresh_max_staleness 0)."
           if results["recipe"].get("refresh_max_staleness") == 0 else
           "built in a background thread: the build time adds to the schedule)."),
        "",
    ]
    reading_rows = {row: {seed: reading(run) for seed, run in per_seed.items()}
                    for row, per_seed in results["rows"].items()}
    reading_rows = {row: per_seed for row, per_seed in reading_rows.items() if all(per_seed.values())}
    if reading_rows:
        seeds = sorted({seed for per_seed in reading_rows.values() for seed in per_seed}, key=int)
        tokens = results.get("masked_tokens")
        lines += [
            "Reading the gold block (masked-token accuracy, %, with the gold block as the only candidate: the encoder "
            "alone), start → end (end − start), per seed"
            + (f"; {tokens} masked tokens, a binomial standard error of ±{100 * (0.3 * 0.7 / tokens) ** 0.5:.1f} "
               "points on one figure near 30 %" if tokens else "") + ":",
            "",
            "| row | " + " | ".join(f"seed {seed}" for seed in seeds) + " |",
            "|---|" + "---|" * len(seeds),
        ]
        for row, per_seed in reading_rows.items():
            cells = [per_seed.get(seed) for seed in seeds]
            lines.append(f"| {row} | " + " | ".join(
                f"{c[0]:.1f} → {c[1]:.1f} ({c[1] - c[0]:+.1f})" if c else "" for c in cells) + " |")
        lines.append("")
    if results.get("remeasured"):
        lines += ["Remeasured (`--remeasure`): the models each run started from (the warm start, or the row's own) "
                  "and the final models it kept, measured again on these sentences without a training step "
                  "('retriever fell' and the index lag are in the runs' own table).", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summarize(results)
    rows = [row for row in ROWS if "gold_top1" in table.get(row, {})]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.2))
    means = [table[row]["gold_top1"]["mean"] for row in rows]
    ax.barh(range(len(rows)), means, color=["tab:blue" if r == "full" else "tab:gray" for r in rows])
    for y, row in enumerate(rows):  # each seed's value: a collapsed seed sits at 0
        values = table[row]["gold_top1"]["values"]
        ax.plot(values, [y] * len(values), "k.", markersize=5)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("held-out gold-document top-1 (bars: mean over seeds; dots: each seed)")
    ax.set_xlim(-0.02, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="Comma-separated: " + ", ".join(ROWS) + ".")
    parser.add_argument("--steps", type=int, default=None, help="Override the recipe's REALM steps.")
    parser.add_argument("--both-halves", action="store_true",
                        help="Also measure the other held-out half before and after each run ('other_half').")
    parser.add_argument("--remeasure", action="store_true",
                        help="Train nothing: measure the models each row started from and the final models the rows "
                             "left in --work-dir on --eval-sentences of --half.")
    add_knowledge_run_arguments(parser, os.path.join(RESULTS, "ablations"), num_entities=2000)
    args = parser.parse_args(argv)
    single_thread_logging()

    recipe = hard_task_recipe(args.set)
    if args.steps:
        recipe["steps"] = args.steps
    rows = args.rows.split(",")
    unknown = [row for row in rows if row not in ROWS]
    if unknown:
        raise ValueError(f"Unknown rows {unknown}; choose from {list(ROWS)}.")
    if any("pair" in ROWS[row]["change"] for row in rows) and "full" not in rows:
        rows.insert(0, "full")  # the swaps pair models the full recipe trained

    if args.merge:
        results = merge(args.merge)
        write_all(results, args.output)
        return results
    results = {"rows": {}}
    if os.path.isfile(args.output + ".json"):
        with open(args.output + ".json", encoding="utf-8") as f:
            results = json.load(f)
        check_same_recipe(results, recipe, args.output + ".json")
    if args.remeasure:
        if not args.work_dir:
            raise SystemExit("error: --remeasure measures the runs kept in --work-dir; name it (--work-dir DIR).")
    work = args.work_dir or tempfile.mkdtemp(prefix="bench-ablations-")
    task = make_hard_knowledge_task(args.num_entities, seed=0)
    paths = write_task_files(task, work)
    from transformers import AutoTokenizer

    from realm_hf.modeling.initial_weights import resolve_bert_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    blocks = split_into_blocks(task.documents, tokenizer, max_length=KNOWLEDGE_TASK_SHAPES["block_length"])
    held_out = held_out_examples(task, tokenizer, KNOWLEDGE_TASK_SHAPES["query_max_length"])
    eval_examples = held_out_split(held_out, args.half, args.eval_sentences)
    # the other half before and after each run, with --both-halves (the choice confirmed beside the report)
    other_half = held_out_split(held_out, "choose" if args.half == "report" else "report", args.eval_sentences)
    tagger = KnowledgeValueTagger(task.values)
    results.update({
        "machine": machine(),
        "task": f"hard task, {args.num_entities} people among {len(blocks)} blocks, {len(eval_examples)} held-out "
                "sentences evaluated",
        "recipe": recipe,
        "half": args.half,
        "masked_tokens": sum(sum(label != IGNORE_INDEX for label in labels) for labels in eval_examples["labels"]),
        **({"remeasured": True} if args.remeasure else {}),
    })
    starts_measured: dict = {}
    for seed in map(int, args.seeds.split(",")):
        todo = [row for row in rows if str(seed) not in results["rows"].get(row, {})]
        if not todo:
            continue
        seed_work, seeded, start = seeded_warm_start(recipe, paths, work, seed, tokenizer, tagger, eval_examples,
                                                     may_train=not args.remeasure)
        if args.warm_start_only:
            continue
        if "full" in todo:  # first: the swaps read its models
            todo.remove("full")
            todo.insert(0, "full")
        for row in todo:
            if args.remeasure:
                figures = remeasure_row(row, seeded, paths, eval_examples, tagger, seed_work, start, seed,
                                        starts_measured, f"{args.half}-{len(eval_examples)}")
            else:
                figures = run_row(row, seeded, paths, eval_examples, tagger, seed_work, start, seed, args.eval_every,
                                  other_half if args.both_halves else None)
            results["rows"].setdefault(row, {})[str(seed)] = {**figures, "warm_start_seconds": start["seconds"]}
            print(f"seed {seed} {row}: {figures['after']} ({figures['seconds']:.0f} s)", flush=True)
            write_all(results, args.output, with_plot=False)
    plot(results, args.output + ".png")
    return results


def seeded_warm_start(recipe: dict, paths: dict, work: str, seed: int, tokenizer, tagger,
                      eval_examples, may_train: bool = True) -> tuple[str, dict, dict]:
    """A training seed's folder under `work`, the recipe with the seed's random models, and its warm start
    ([`warm_start`]). Without `may_train`, a seed with no warm start kept is refused before anything is written."""
    seed_work = os.path.join(work, f"seed-{seed}")
    if not may_train and not os.path.isfile(os.path.join(seed_work, "warm-start.json")):
        raise SystemExit(f"error: --remeasure found no warm start of seed {seed} in {work}; run the rows with this "
                         "--work-dir first.")
    seeded = {**recipe, "model": save_random_models(recipe, seed_work, tokenizer)}
    return seed_work, seeded, warm_start(seeded, paths, seed_work, seed, tagger, eval_examples, may_train)


def warm_start(recipe: dict, paths: dict, seed_work: str, seed: int, tagger, eval_examples,
               may_train: bool = True) -> dict:
    """The seed's ICT warm start and reading warm-up, or those a `--work-dir` kept from an earlier run of the same
    recipe (their time is then the one recorded with them). Without `may_train`, one of another recipe is an error."""
    record = os.path.join(seed_work, "warm-start.json")
    warm = {key: recipe[key] for key in ("random_bert", "ict_steps", "ict_batch_size", "ict_learning_rate",
                                         "reading_warmup_steps", "reading_warmup_batch_size",
                                         "reading_warmup_learning_rate")}
    # the random models' paths are the seed's folder, wherever it is
    warm["model"] = {k: os.path.relpath(v, seed_work) if isinstance(v, str) and v.startswith(seed_work) else v
                     for k, v in recipe["model"].items()}
    if os.path.isfile(record):
        with open(record, encoding="utf-8") as f:
            kept = json.load(f)
        if kept["warm_recipe"] == warm:
            return kept["start"]
    if not may_train:
        raise SystemExit(f"error: --remeasure found no warm start of seed {seed} with this recipe in {record}; run "
                         "the rows with this --work-dir (and the same --set) first.")
    began = time.time()
    ict_dir = run_ict(recipe, paths["corpus"], seed_work, seed)
    warmup_dir, _ = run_reading_warmup(recipe, paths, seed_work, ict_dir, seed, tagger, eval_examples, evaluate=False)
    start = {"ict_dir": ict_dir, "warmup_dir": warmup_dir, "retriever": recipe["model"]["retriever"],
             "seconds": round(time.time() - began, 1)}
    with open(record, "w", encoding="utf-8") as f:
        json.dump({"warm_recipe": warm, "start": start}, f, indent=1)
    return start


def write_all(results: dict, output: str, with_plot: bool = True) -> None:
    """`output`.json, .md and (`with_plot`) .png."""
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output + ".json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    write_markdown(results, output + ".md")
    if with_plot:
        plot(results, output + ".png")


if __name__ == "__main__":
    main(sys.argv[1:])
