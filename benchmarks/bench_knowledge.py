"""Does REALM pre-training teach the retriever? A controlled knowledge task, through the real RealmPretrainer.

    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge.py                 # both inits, recipe vs frozen control
    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge.py --inits tiny    # one init
    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge.py --task hard --inits tiny --output benchmarks/results/knowledge-hard

The task (`realm_hf.data.knowledge_task`): fictional people, one document each with their attributes and who taught
them; pre-training sentences mask an attribute value and name the person directly or as "the student of <teacher>";
held-out sentences use unseen templates, name the person through the teacher and ask an attribute no training
sentence states. A retriever that matches names finds the teacher's document, not the student's: it must *learn* the
relation, and the only teacher is the masked-LM signal.

For each initialization (random tiny BERT, packaged MiniLM) it runs the recipe of `RECIPES` twice, identical but for
the retriever: trained (`recipe`) or frozen for the whole run (`control`; the encoder still learns to read). Before
and during training it measures, on the held-out sentences, against an exact index of the current document tower:
gold-document top-1 and top-(K-1) retrieval, the gold document's prior and posterior mass among the K candidates,
and masked-token accuracy with retrieval vs with the null document only.

`--task hard` (`realm_hf.data.knowledge_task_hard`): 2,000 people among 10,000 blocks (mentions of each person with
other values, namesakes sharing a name part), paraphrased sentences, multi-token answers; the held-out figures are
measured on a seeded sample of `--eval-sentences` held-out sentences.

Writes benchmarks/results/knowledge.json, knowledge.md and knowledge.png (curves over steps).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time

import torch

from realm_hf.corpus import split_into_blocks
from realm_hf.data.knowledge_task import KnowledgeValueTagger, make_knowledge_task
from realm_hf.data.knowledge_task_hard import make_hard_knowledge_task
from realm_hf.demo.knowledge_runs import (
    HARD_TASK_RECIPE, KNOWLEDGE_RECIPES as RECIPES, KNOWLEDGE_TASK_SHAPES, held_out_examples, plot_knowledge_curves, run_ict,
    run_reading_warmup, run_setting, save_random_models, write_task_files,
)
from realm_hf.utils.precision import resolve_mixed_precision

from bench_common import RESULTS, machine

TASK = {"num_entities": 100, **KNOWLEDGE_TASK_SHAPES}


def held_out_split(examples, split: str, size: int):
    """`size` held-out sentences of one half of a fixed shuffle (seed 1234, whatever the training seed): `"choose"`,
    the half recipes are calibrated on, or `"report"`, the half the figures are reported on."""
    shuffled = examples.shuffle(seed=1234)
    half = len(shuffled) // 2
    rows = range(0, half) if split == "choose" else range(half, len(shuffled))
    return shuffled.select(rows[:size])


def describe_task(task: dict) -> str:
    if task.get("name") == "hard":
        return (f"hard task: {task['num_entities']} people among {task['num_blocks']} blocks ({task['mentions']} mentions "
                f"and {task['namesakes']} namesakes per person), unseen facts, unseen paraphrases, multi-token values; "
                f"{task['eval_sentences']} held-out sentences evaluated, from the '{task['eval_split']}' half")
    words = "unseen templates" if task.get("paraphrase", True) else "the documents' own words"
    who = "the person named through their teacher" if task.get("relational") else "the person named"
    return f"unseen facts, {words}, {who}"


def write_markdown(results: dict, path: str) -> None:
    k = TASK["num_candidates"] - 1
    lines = [
        "# REALM pre-training on a controlled knowledge task",
        "",
        f"`python benchmarks/bench_knowledge.py` — {results['machine']}; {results['total_minutes']:.1f} min in all. "
        f"{results['task'].get('num_blocks', results['task']['num_entities'])} blocks, {results['train_sentences']} pre-training sentences, "
        f"{results['held_out_sentences']} held-out sentences ({describe_task(results['task'])}); "
        f"K = {TASK['num_candidates']} candidates (∅ + {k} retrieved). Retrieval is measured over the whole corpus "
        "with an exact index of the current document tower.",
        "",
        f"| init | retriever | steps | top-1 before | top-1 after | top-{k} before | top-{k} after | gold posterior "
        "after | MLM acc. with retrieval | MLM acc. ∅ only | MLM acc. gold block only | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for setting, r in results["settings"].items():
        init, variant = setting.split("/")
        lines.append(
            f"| {init} | {'trained (recipe)' if variant == 'recipe' else 'frozen (control)'} | {r['steps']} | "
            f"{r['retrieval_top1_before']:.2f} | **{r['retrieval_top1_after']:.2f}** | "
            f"{r[f'retrieval_top{k}_before']:.2f} | {r[f'retrieval_top{k}_after']:.2f} | "
            f"{r['gold_posterior_after']:.2f} | {r['mlm_acc_retrieval_after']:.2f} | {r['mlm_acc_null_after']:.2f} | "
            f"{r.get('mlm_acc_gold_document_after', float('nan')):.2f} | {r['seconds'] / 60:.1f} min |"
        )
    for init, figures in results.get("reading_warmup", {}).items():
        lines += [
            "",
            f"{init}, after the reading warm-up ({figures['seconds'] / 60:.1f} min): masked-token accuracy with the gold "
            f"block only {figures.get('mlm_accuracy_gold_document', float('nan')) / 100:.2f}, with retrieval "
            f"{figures['mlm_accuracy_with_retrieval'] / 100:.2f}, ∅ only {figures['mlm_accuracy_null_document'] / 100:.2f}; "
            f"gold top-1 {figures['gold_top1']:.2f} (the REALM runs' start).",
        ]
    lines += ["", "Recipes:", "", "```json", json.dumps(results["recipes"], indent=1), "```", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def plot(results: dict, path: str) -> None:
    plot_knowledge_curves(results, path, "Held-out sentences: " + describe_task(results["task"]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inits", default="tiny,minilm-cls,minilm", help="Comma-separated: " + ", ".join(RECIPES) + ".")
    parser.add_argument("--no-paraphrase", dest="paraphrase", action="store_false", help="Sentences in the "
                        "documents' own words (reading is copying; the CI-sized task).")
    parser.add_argument("--relational", action="store_true", help="The relational variant of the task (held-out "
                        "sentences name people through their teacher).")
    parser.add_argument("--variants", default="recipe,control", help="Comma-separated: recipe, control.")
    parser.add_argument("--steps", type=int, default=None, help="Override the recipes' pre-training steps.")
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores).")
    parser.add_argument("--task", choices=("base", "hard"), default="base", help="The task (see the docstring).")
    parser.add_argument("--num-entities", type=int, default=None, help="People (default: 100 base, 2000 hard).")
    parser.add_argument("--mentions", type=int, default=2, help="hard: documents naming each person in passing.")
    parser.add_argument("--namesakes", type=int, default=2, help="hard: documents per person about a namesake.")
    parser.add_argument("--named-sentences", type=int, default=3, help="hard: document sentences naming the person.")
    parser.add_argument("--eval-sentences", type=int, default=None, help="Held-out sentences evaluated (a seeded "
                        "sample; default: all for base, 400 for hard).")
    parser.add_argument("--eval-split", choices=("choose", "report"), default="report", help="hard: which half of "
                        "the held-out sentences to sample: 'choose' for calibrating a recipe, 'report' for the "
                        "figures (no choice looked at them).")
    parser.add_argument("--set", action="append", default=[], help="Override a recipe value: INIT.KEY=VALUE (JSON).")
    parser.add_argument("--output", default=os.path.join(RESULTS, "knowledge"), help="Prefix of .json/.md/.png.")
    parser.add_argument("--work-dir", default=None, help="Keep the runs here (default: a temporary directory).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))

    recipes = {init: json.loads(json.dumps(RECIPES[init])) for init in args.inits.split(",")}
    if args.task == "hard":  # the tiny recipe's longer warm starts (HARD_TASK_RECIPE), before any --set
        recipes = {init: {**recipe, **HARD_TASK_RECIPE} for init, recipe in recipes.items()}
    for item in args.set:
        key, value = item.split("=", 1)
        init, field = key.split(".", 1)
        target = recipes[init]["model"] if field in ("pooling", "projection_size", "random_init") else recipes[init]
        target[field] = json.loads(value)
    if args.steps:
        for recipe in recipes.values():
            recipe["steps"] = args.steps
    for recipe in recipes.values():
        # "auto": bf16 where this CPU runs it faster (AMX), fp32 where bf16 is emulated (25x slower on AVX2 alone);
        # resolved once, so every run of the benchmark trains alike, and recorded with the recipe
        recipe["mixed_precision"] = resolve_mixed_precision(recipe.get("mixed_precision", "no"), "cpu")

    work = args.work_dir or tempfile.mkdtemp(prefix="bench-knowledge-")
    os.makedirs(work, exist_ok=True)
    if args.task == "hard":
        args.num_entities = args.num_entities or 2000
        task = make_hard_knowledge_task(
            args.num_entities, args.mentions, args.namesakes, seed=args.seed, named_sentences=args.named_sentences
        )
    else:
        args.num_entities = args.num_entities or TASK["num_entities"]
        task = make_knowledge_task(
            args.num_entities, seed=args.seed, relational=args.relational, paraphrase=args.paraphrase
        )
    paths = write_task_files(task, work)
    from transformers import AutoTokenizer

    from realm_hf.modeling.initial_weights import resolve_bert_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    blocks = split_into_blocks(task.documents, tokenizer, max_length=TASK["block_length"])
    if len(blocks) != len(task.documents) or list(blocks["title"]) != [d["title"] for d in task.documents]:
        raise RuntimeError("Each document must be exactly one block; raise block_length.")
    eval_examples = held_out_examples(task, tokenizer, TASK["query_max_length"])
    if args.task == "hard":
        eval_examples = held_out_split(eval_examples, args.eval_split, args.eval_sentences or 400)
    tagger = KnowledgeValueTagger(task.values)

    results = {
        "machine": machine(),  # with the GPU, when the trainers take one
        "task": {
            **TASK, "name": args.task, "num_entities": args.num_entities, "relational": args.relational,
            "paraphrase": args.paraphrase, "num_blocks": len(blocks), "eval_sentences": len(eval_examples),
            **({"mentions": args.mentions, "namesakes": args.namesakes, "eval_split": args.eval_split,
                "named_sentences": args.named_sentences}
               if args.task == "hard" else {}),
        },
        "recipes": recipes, "train_sentences": len(task.train_sentences),
        "held_out_sentences": len(task.held_out_sentences), "settings": {},
    }
    began = time.time()
    warmed_up: dict[str, tuple[str, dict]] = {}
    for init, recipe in recipes.items():
        init_work = os.path.join(work, init)
        if "random_bert" in recipe:  # sizes the trainers' random_init does not offer: save them, name them
            recipe = {**recipe, "model": save_random_models(recipe, init_work, tokenizer)}
        ict_dir = run_ict(recipe, paths["corpus"], init_work, args.seed) if recipe["ict_steps"] else None
        start_dir = None
        if recipe.get("reading_warmup_steps"):
            # one warm-up per encoder: only the source block is a candidate, so the retriever plays no part in it
            key = recipe["model"]["encoder"]
            if key not in warmed_up:
                warmed_up[key] = run_reading_warmup(recipe, paths, init_work, ict_dir, args.seed, tagger, eval_examples)
                print(f"{init}: after the reading warm-up {warmed_up[key][1]}", flush=True)
            start_dir, figures = warmed_up[key]
            results.setdefault("reading_warmup", {})[init] = figures
        for variant in args.variants.split(","):
            name = f"{init}/{variant}"
            result = run_setting(
                name.replace("/", "-"), recipe, paths, eval_examples, tagger, init_work, start_dir, ict_dir,
                frozen=variant == "control", eval_every=args.eval_every, seed=args.seed,
            )
            results["settings"][name] = result
            print(
                f"{name}: top-1 {result['retrieval_top1_before']:.2f} -> {result['retrieval_top1_after']:.2f}, "
                f"MLM acc. with retrieval {result['mlm_acc_retrieval_after']:.2f} vs ∅ {result['mlm_acc_null_after']:.2f} "
                f"({result['seconds']:.0f} s)",
                flush=True,
            )
            results["total_minutes"] = (time.time() - began) / 60
            os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
            with open(args.output + ".json", "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    write_markdown(results, args.output + ".md")
    plot(results, args.output + ".png")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
