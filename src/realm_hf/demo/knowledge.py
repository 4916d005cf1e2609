"""`realm-hf demo`: watch REALM's retriever learn from the masked-LM signal, in about five minutes on a CPU.

The corpus is the synthetic knowledge task of [`realm_hf.data.knowledge_task`]: fictional people, one document
each, whose attributes only their own document states. Held-out sentences ask, for each person, an attribute that
no pre-training sentence states, in wordings never seen in training, so the only way to fill the blank is to
retrieve that person's document and read it. The demo

1. warms the encoder up to read (each sentence's own block as its candidate, retriever untouched),
2. runs the same REALM pre-training twice, the retriever trained by the masked-LM signal (REALM) and frozen (the
   control), and measures on the held-out sentences, before and after, how often the retriever ranks the right
   document first and how often the blank is filled right,
3. answers a few held-out sentences with both models, each with the document it read and the evidence.

Everything is generated from a seed and the packaged all-MiniLM-L6-v2 weights: no download, no data folder.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..corpus import split_into_blocks
from ..data.knowledge_task import KnowledgeTask, KnowledgeValueTagger, make_knowledge_task
from ..modeling.initial_weights import resolve_bert_path
from ..utils.machine import describe_machine
from ..utils.precision import resolve_mixed_precision
from .defaults import DEMO_ENTITIES, DEMO_EVAL_EVERY, DEMO_INIT, DEMO_SHOWN_ANSWERS, DEMO_STEPS
from .knowledge_runs import (
    KNOWLEDGE_RECIPES, KNOWLEDGE_TASK_SHAPES, held_out_examples, plot_knowledge_curves, run_ict, run_reading_warmup,
    run_setting, save_random_models, write_task_files,
)

logger = logging.getLogger(__name__)

SETTINGS_FILE = "demo_settings.json"
SUMMARY_FILE = "summary.json"
FIGURES_FILE = "figures.json"
PLOT_FILE = "retrieval.png"
VARIANTS = {"realm": "retriever trained", "control": "retriever frozen"}
_STAGE_NOTES = {
    "reading warm-up": ": the encoder learns to read, the retriever is frozen by design",
    "control": ": the same REALM run with the retriever frozen by design (the trainer's warning that it never "
    "learned is the point of the control)",
}


@dataclass
class KnowledgeDemoSettings:
    r"""
    What `realm-hf demo` runs.

    Args:
        init (`str`, defaults to `"minilm-cls"`): The initialization and its recipe ([`KNOWLEDGE_RECIPES`]): `"minilm-cls"` (all-MiniLM-L6-v2
            with REALM's [CLS] pooling and a fresh 128-d projection), `"minilm"` (mean pooling, MiniLM's own space) or
            `"tiny"` (random 2-layer BERTs with an ICT warm start).
        num_entities (`int`, defaults to 100): People, hence documents; two held-out sentences each.
        seed (`int`, defaults to 0): Seed of the task (names, facts, teachers) and of training.
        steps (`int`, *optional*, defaults to 45): REALM pre-training steps of each run (None: the recipe's).
        reading_steps (`int`, *optional*): Reading warm-up steps (default: the recipe's).
        eval_every (`int`, *optional*): Held-out evaluation every this many REALM steps too (default: before the
            first step and after the last only).
        shown_answers (`int`, defaults to 4): Held-out sentences answered in full, with document and evidence.
        overrides (`dict`, *optional*): Recipe values to override, e.g. `{"ict_steps": 10, "batch_size": 4}`.
    """

    init: str = DEMO_INIT
    num_entities: int = DEMO_ENTITIES
    seed: int = 0
    steps: int | None = DEMO_STEPS
    reading_steps: int | None = None
    eval_every: int | None = DEMO_EVAL_EVERY
    shown_answers: int = DEMO_SHOWN_ANSWERS
    overrides: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.init not in KNOWLEDGE_RECIPES:
            raise ValueError(f"init={self.init!r}: use one of {', '.join(KNOWLEDGE_RECIPES)}.")
        if self.eval_every is not None and self.eval_every < 1:
            raise ValueError(f"eval_every must be at least 1, got {self.eval_every}.")
        if self.num_entities < 2:
            raise ValueError(f"num_entities must be at least 2 (everyone is taught by someone else), got {self.num_entities}.")
        for name in ("steps", "reading_steps"):
            value = getattr(self, name)
            if value is not None and value < (1 if name == "steps" else 0):
                raise ValueError(f"{name} must be {'positive' if name == 'steps' else 'at least 0'}, got {value}.")
        if self.shown_answers < 0:
            raise ValueError(f"shown_answers must be at least 0, got {self.shown_answers}.")

    def resolved_recipe(self) -> dict[str, Any]:
        """The recipe with this run's step counts and its mixed precision resolved for this machine."""
        recipe = json.loads(json.dumps(KNOWLEDGE_RECIPES[self.init]))
        unknown = sorted(set(self.overrides or {}) - set(recipe))
        if unknown:
            raise ValueError(f"overrides {unknown} are not values of the {self.init!r} recipe: {', '.join(recipe)}.")
        recipe.update(self.overrides or {})
        if self.steps is not None:
            recipe["steps"] = self.steps
        if self.reading_steps is not None:
            recipe["reading_warmup_steps"] = self.reading_steps
        device = "cuda" if torch.cuda.is_available() else "cpu"
        recipe["mixed_precision"] = resolve_mixed_precision(recipe.get("mixed_precision", "no"), device)
        return recipe


def _setting_key(init: str, variant: str) -> str:
    """The key of a run in the summary's `settings`, as in benchmarks/bench_knowledge.py: `"<init>/recipe"` or
    `"<init>/control"`."""
    return f"{init}/{'recipe' if variant == 'realm' else 'control'}"


def _check_settings(output: str, settings: KnowledgeDemoSettings) -> None:
    """Record the settings in a new output directory; refuse one that holds a run with other settings."""
    path = os.path.join(output, SETTINGS_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        changed = [f"{name}: {saved.get(name)!r} there, {value!r} now" for name, value in asdict(settings).items()
                   if saved.get(name) != value]
        if changed:
            raise ValueError(
                f"{output} holds a demo run with other settings ({'; '.join(changed)}). Pass another --output, or "
                f"delete {output}, to run with these."
            )
        return
    os.makedirs(output, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(asdict(settings), f, indent=2)


def _stage(name: str, directory: str, run: Any) -> dict:
    """Run a stage whose figures land in `directory/figures.json`, or reuse them when a finished run left them."""
    path = os.path.join(directory, FIGURES_FILE)
    if os.path.isfile(path):
        logger.info("Stage %s: reusing %s (delete it to redo the stage)", name, directory)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    logger.info("Stage %s: starting (into %s)%s", name, directory, _STAGE_NOTES.get(name, ""))
    shutil.rmtree(directory, ignore_errors=True)  # what an interrupted run left: the stage starts afresh
    figures = run()
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=1)
    return figures


def masked_sentence(sentence: dict[str, Any], mask_token: str) -> str:
    """A held-out sentence with its fact (the attribute value) replaced by `mask_token`."""
    return re.sub(rf"\b{re.escape(sentence['value'])}\b", mask_token, sentence["text"], count=1)


def evidence(document: str, answer: str) -> str:
    """The sentence of `document` that holds `answer`, the answer in bold (the first sentence when none does)."""
    sentences = re.split(r"(?<=[.!?])\s+", document)
    pattern = re.compile(rf"\b{re.escape(answer)}\b", flags=re.IGNORECASE)
    for sentence in sentences:
        if pattern.search(sentence):
            return pattern.sub(lambda m: f"**{m.group(0)}**", sentence, count=1)
    return sentences[0]


def answer_held_out(models: dict[str, str], task: KnowledgeTask, count: int) -> list[dict[str, Any]]:
    r"""
    Fill the blank of the first `count` held-out sentences (one per person) with each model's
    `realm-fill-mask` pipeline.

    Args:
        models (`dict[str, str]`): Name -> a pre-training output directory (`<output_dir>/final` with its index).
        task ([`KnowledgeTask`]): The task (its documents are the index's blocks, in order).
        count (`int`): Sentences to answer.

    Returns:
        `list[dict]`: per sentence, `{"sentence", "answer", "person", per model: {"answer", "score", "right",
        "title", "evidence", "read_right_document"}}`.
    """
    from transformers import pipeline

    from ..registration import register_auto_classes
    from ..pipelines import FILL_MASK_TASK

    register_auto_classes()  # the task, whatever was imported before
    pipelines = {name: pipeline(FILL_MASK_TASK, model=path) for name, path in models.items()}
    rows = []
    for sentence in task.held_out_sentences[::2][:count]:  # the first of each person's two held-out sentences
        row: dict[str, Any] = {"person": sentence["title"], "answer": sentence["value"]}
        for name, fill in pipelines.items():
            row["sentence"] = masked_sentence(sentence, fill.tokenizer.mask_token)
            best = fill(row["sentence"], top_k=1)[0]
            answer = best["token_str"].strip()
            block = best["supporting_blocks"][0] if best["supporting_blocks"] else None
            document = task.documents[block["block_id"]] if block else None
            row[name] = {
                "answer": answer, "score": round(best["score"], 3), "right": answer == sentence["value"],
                "title": document["title"] if document else None,
                "evidence": evidence(document["text"], answer) if document else None,
                "read_right_document": bool(document) and document["title"] == sentence["title"],
            }
        rows.append(row)
    return rows


def _print_report(summary: dict[str, Any]) -> None:
    results, task = summary["settings"], summary["task"]
    held_out = task["held_out_sentences"]
    print(
        f"\nHeld-out sentences: {held_out} ({task['num_entities']} fictional people, 2 each: facts no pre-training "
        f"sentence states, in unseen wordings); the right document among {task['num_entities']}.\n"
    )
    header = f"{'':<20}{'right document first':>24}{'blank filled right':>24}"
    print(header + "\n" + f"{'':<20}{'before -> after':>24}{'before -> after':>24}")
    for name, label in VARIANTS.items():
        r = results[_setting_key(summary["init"], name)]
        print(
            f"{label:<20}{r['retrieval_top1_before']:>15.2f} -> {r['retrieval_top1_after']:.2f}"
            f"{r['mlm_acc_retrieval_before']:>17.2f} -> {r['mlm_acc_retrieval_after']:.2f}"
        )
    print(f"\nREALM run: {summary['retriever_learning']}")
    for row in summary["answers"]:
        print(f"\n{row['sentence']}   (right answer: {row['answer']})")
        for name, label in VARIANTS.items():
            a = row[name]
            verdict = "right" if a["right"] else "wrong"
            print(f"  {label}: {a['answer']} (p {a['score']:.2f}, {verdict}), read from \"{a['title']}\": {a['evidence']}")
    print(
        f"\nDemo: {summary['minutes']:.1f} min on {summary['machine']}, "
        f"{'bf16' if summary['recipe_values'].get('mixed_precision') == 'bf16' else 'fp32'}; "
        f"figures in {summary['output']}/{SUMMARY_FILE}"
        + (f", curves in {summary['output']}/{PLOT_FILE}" if summary.get("plot") else "")
    )


def run_knowledge_demo(output: str, settings: KnowledgeDemoSettings | None = None) -> dict[str, Any]:
    r"""
    Run the demo into `output`: `task/` (corpus, pre-training and held-out sentences as JSONL), `reading-warmup/`,
    `realm/` and `control/` (pre-training output directories; `final/` holds the models and their index, for
    `pipeline("realm-fill-mask", model=...)`), `summary.json` and `retrieval.png` (with matplotlib). Stages that
    finished in an earlier run with the same settings are reused.

    Args:
        output (`str`): The output directory.
        settings ([`KnowledgeDemoSettings`], *optional*): What to run (default: the five-minute demo).

    Returns:
        `dict`: the summary written to `summary.json`.
    """
    from transformers import AutoTokenizer

    settings = settings or KnowledgeDemoSettings()
    _check_settings(output, settings)
    began = time.time()
    recipe = settings.resolved_recipe()
    task = make_knowledge_task(settings.num_entities, seed=settings.seed)
    paths = write_task_files(task, os.path.join(output, "task"))
    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    blocks = split_into_blocks(task.documents, tokenizer, max_length=KNOWLEDGE_TASK_SHAPES["block_length"])
    if len(blocks) != len(task.documents):
        raise RuntimeError("Each document must be exactly one block; raise block_length.")
    eval_examples = held_out_examples(task, tokenizer, KNOWLEDGE_TASK_SHAPES["query_max_length"])
    tagger = KnowledgeValueTagger(task.values)
    if "random_bert" in recipe:
        recipe = {**recipe, "model": save_random_models(recipe, os.path.join(output, "models"), tokenizer)}
    ict_dir = run_ict(recipe, paths["corpus"], output, settings.seed) if recipe["ict_steps"] else None

    start_dir = None
    if recipe["reading_warmup_steps"]:
        start_dir = os.path.join(output, "reading-warmup", "final")
        _stage("reading warm-up", os.path.join(output, "reading-warmup"), lambda: run_reading_warmup(
            recipe, paths, output, ict_dir, settings.seed, tagger, eval_examples, evaluate=False)[1])
    results: dict[str, dict] = {}
    for name in VARIANTS:
        # both runs start from the same models: the control takes the REALM run's figures of that start
        start = results[_setting_key(settings.init, "realm")]["curve"][0] if name == "control" else None
        results[_setting_key(settings.init, name)] = _stage(
            name, os.path.join(output, name), lambda name=name, start=start: run_setting(
                name, recipe, paths, eval_examples, tagger, output, start_dir, ict_dir, frozen=name == "control",
                eval_every=settings.eval_every or 0, seed=settings.seed, rebuild_final_index=True, before=start,
            ),
        )
    answers = answer_held_out(
        {name: os.path.join(output, name, "final") for name in VARIANTS}, task, settings.shown_answers
    )
    summary = {
        "output": output, "init": settings.init, "settings": results, "answers": answers,
        "retriever_learning": results[_setting_key(settings.init, "realm")]["retriever_learning_summary"],
        "task": {
            "num_entities": settings.num_entities, "seed": settings.seed, "held_out_sentences": len(task.held_out_sentences),
            "train_sentences": len(task.train_sentences), **KNOWLEDGE_TASK_SHAPES,
        },
        "recipe_values": recipe, "machine": describe_machine(), "minutes": round((time.time() - began) / 60, 2),
        "plot": None,
    }
    try:
        plot_knowledge_curves(summary, os.path.join(output, PLOT_FILE), "Held-out sentences: right document first, "
                              "and blanks filled right")
        summary["plot"] = PLOT_FILE
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (pip install 'realm_hf[demo]')", PLOT_FILE)
    with open(os.path.join(output, SUMMARY_FILE), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    _print_report(summary)
    return summary
