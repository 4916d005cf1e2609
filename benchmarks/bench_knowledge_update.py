"""Knowledge updates without retraining (REALM paper, Appendix C), measured on the hard knowledge task.

    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge_update.py

One person in ten is held out of pre-training: neither their document nor any sentence about them is seen. The tiny
recipe (ICT, reading warm-up, REALM) trains on the others. Then, with the trained model and no further training step:

- held-out sentences about **trained** people, with the index as trained (the reference);
- held-out sentences about the **new** people before their documents exist (the model can only guess), and after
  their documents are added to the index with the model's own document tower (`realm_hf.retrieval.add_articles_to_index`);
- the trained people's sentences again after their documents are **removed** from the index (`RealmIndex.remove`):
  the model should fall back to what the null document alone gives.

Figures are on the "report" half of the held-out sentences (`bench_knowledge.held_out_split`).
Writes benchmarks/results/knowledge-update.json and knowledge-update.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

import torch

from realm_hf.data.knowledge_task import KnowledgeTask, KnowledgeValueTagger
from realm_hf.data.knowledge_task_hard import make_hard_knowledge_task
from realm_hf.data.masking import build_masked_dataset
from realm_hf.demo.knowledge_runs import (
    KNOWLEDGE_TASK_SHAPES, corpus_arguments, hard_task_recipe, pretrainer, run_ict, run_reading_warmup, run_setting,
    save_random_models, write_task_files,
)
from realm_hf.index import RealmIndex
from realm_hf.retrieval import add_articles_to_index
from realm_hf.training.arguments import ModelArguments

from bench_knowledge import held_out_split
from bench_common import RESULTS, machine

FIGURES = ("gold_top1", "mlm_accuracy_with_retrieval", "mlm_accuracy_null_document", "mlm_accuracy_gold_document")


def without_people(task: KnowledgeTask, new: set[int]) -> tuple[KnowledgeTask, list[dict], dict[int, int]]:
    """The task without the `new` people's documents and sentences; their documents; each trained person's block id
    in the reduced corpus (documents keep their order)."""
    kept, new_documents, block_of = [], [], {}
    for position, document in enumerate(task.documents):
        entity = position if document["id"] == f"doc-{position}" else None  # people first, then the distractors
        if entity is not None and entity in new:
            new_documents.append(document)
            continue
        if entity is not None:
            block_of[entity] = len(kept)
        kept.append(document)
    reduced = KnowledgeTask(
        kept, [s for s in task.train_sentences if s["entity"] not in new],
        [s for s in task.held_out_sentences if s["entity"] not in new], task.values,
    )
    return reduced, new_documents, block_of


def masked_with_gold(sentences: list[dict], gold: dict[int, int], tokenizer, tagger) -> object:
    masked = build_masked_dataset(
        sentences, tokenizer, tagger=tagger, query_max_length=KNOWLEDGE_TASK_SHAPES["query_max_length"]
    )
    return masked.add_column("gold_block_id", [int(gold.get(s["entity"], -1)) for s in sentences])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-entities", type=int, default=2000)
    parser.add_argument("--new-every", type=int, default=10, help="Hold out every N-th person from pre-training.")
    parser.add_argument("--eval-sentences", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="Override a recipe value: KEY=VALUE (JSON).")
    parser.add_argument("--output", default=os.path.join(RESULTS, "knowledge-update"), help="Prefix of .json/.md.")
    parser.add_argument("--work-dir", default=None, help="Keep the runs here (default: a temporary directory).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    recipe = hard_task_recipe(args.set)
    work = args.work_dir or tempfile.mkdtemp(prefix="bench-knowledge-update-")
    began = time.time()

    task = make_hard_knowledge_task(args.num_entities, seed=0)
    new = set(range(0, args.num_entities, args.new_every))
    reduced, new_documents, block_of = without_people(task, new)
    paths = write_task_files(reduced, work)
    from transformers import AutoTokenizer

    from realm_hf.modeling.initial_weights import resolve_bert_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    tagger = KnowledgeValueTagger(task.values)
    # the report half of the held-out sentences, split by whether their person was trained on
    every = masked_with_gold(task.held_out_sentences, {}, tokenizer, tagger).add_column(
        "entity", [s["entity"] for s in task.held_out_sentences]
    )
    report = held_out_split(every, "report", len(every))
    trained_rows = [i for i, e in enumerate(report["entity"]) if e not in new][: args.eval_sentences]
    new_rows = [i for i, e in enumerate(report["entity"]) if e in new][: args.eval_sentences]
    trained_eval = report.select(trained_rows).remove_columns("gold_block_id").add_column(
        "gold_block_id", [block_of[int(e)] for e in report.select(trained_rows)["entity"]]
    )

    seeded = {**recipe, "model": save_random_models(recipe, work, tokenizer)}
    ict_dir = run_ict(seeded, paths["corpus"], work, args.seed)
    warmup_dir, _ = run_reading_warmup(seeded, paths, work, ict_dir, args.seed, tagger, trained_eval, evaluate=False)
    trained = run_setting(
        "realm", seeded, paths, trained_eval, tagger, work, warmup_dir, ict_dir, frozen=False, eval_every=0,
        seed=args.seed, rebuild_final_index=True,
    )
    final = os.path.join(work, "realm", "final")
    model = ModelArguments(
        retriever=os.path.join(final, "retriever"), encoder=os.path.join(final, "encoder"),
        pooling=recipe["model"]["pooling"], projection_size=recipe["model"]["projection_size"],
    )
    evaluator = pretrainer("evaluate", seeded, model, corpus_arguments(paths, paths["train"]), work, 1, 0, args.seed,
                           tagger, trained_eval)
    figures = {}

    def measure(name: str, examples, index: RealmIndex) -> None:
        evaluator.index = index
        result = evaluator.evaluate_sentences(examples, fresh_index=False)
        figures[name] = {k: result[k] for k in FIGURES if k in result}
        print(name, figures[name], flush=True)

    index = RealmIndex.from_pretrained(os.path.join(final, "index"), mmap=False)
    new_eval = report.select(new_rows).remove_columns("gold_block_id")  # their documents are nowhere yet
    measure("trained people, index as trained", trained_eval, index)
    measure("new people, before their documents are added", new_eval, index)
    added = add_articles_to_index(index, evaluator.retriever, tokenizer, new_documents)
    new_block = {int(document["id"].split("-")[1]): int(block) for document, block in zip(new_documents, added)}
    new_eval = new_eval.add_column(
        "gold_block_id", [new_block[int(e)] for e in new_eval["entity"]]
    )
    measure("new people, after their documents are added", new_eval, index)
    index.remove(sorted({int(b) for b in trained_eval["gold_block_id"]}))
    measure("trained people, after their documents are removed", trained_eval.remove_columns("gold_block_id"), index)

    results = {
        "machine": machine(),
        "task": f"hard task, {args.num_entities} people, every {args.new_every}th held out of pre-training "
                f"({len(new)} people); {len(reduced.documents)} blocks in pre-training, {len(new_documents)} added",
        "eval_sentences": {"trained": len(trained_eval), "new": len(new_eval)},
        "recipe": recipe, "pretraining_after": {k: trained[k] for k in trained if k.endswith("_after")},
        "figures": figures, "minutes": round((time.time() - began) / 60, 1),
    }
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output + ".json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    lines = [
        "# Knowledge updates without retraining (paper, Appendix C)",
        "",
        f"`python benchmarks/bench_knowledge_update.py` — {results['machine']}; {results['minutes']} min. "
        f"{results['task']}. Held-out sentences (unseen templates and facts, 'report' half): "
        f"{len(trained_eval)} about trained people, {len(new_eval)} about new ones.",
        "",
        "| sentences, index | gold top-1 | MLM acc. with retrieval | MLM acc. ∅ only | MLM acc. gold block only |",
        "|---|---|---|---|---|",
    ]
    def cell(value: float | None, digits: int) -> str:
        return "—" if value is None else f"{value:.{digits}f}"  # no gold block in the index: no top-1, no gold reading

    for name, f in figures.items():
        lines.append(
            f"| {name} | {cell(f.get('gold_top1'), 3)} | {cell(f.get('mlm_accuracy_with_retrieval'), 1)} | "
            f"{cell(f.get('mlm_accuracy_null_document'), 1)} | {cell(f.get('mlm_accuracy_gold_document'), 1)} |"
        )
    lines += ["", "MLM accuracies are percent of masked wordpieces; gold top-1 is over the whole index.", ""]
    with open(args.output + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
