"""REALM pre-training on the synthetic knowledge task, recipe against a frozen-retriever control.

The stages that `realm-hf demo` and `benchmarks/bench_knowledge.py` share: a reading warm-up (the encoder learns to
read each sentence's own block), then the same REALM pre-training twice, identical but for the retriever, trained by
the masked-LM signal (`recipe`) or frozen for the whole run (`control`). Before and during each run the held-out
sentences are measured against an exact index of the current document tower: gold-document top-1 / top-(K-1), the
gold document's prior and posterior mass, and masked-token accuracy with retrieval, with the null document only and
with the gold document only (see [`RealmPretrainer.evaluate_sentences`]).

A recipe is a dict: `model` (the [`ModelArguments`] fields), optionally `random_bert` (a BERT config for random
towers), `ict_steps` / `ict_batch_size` / `ict_learning_rate`, `reading_warmup_steps` / `reading_warmup_batch_size`
/ `reading_warmup_learning_rate`, `mlm_head_learning_rate_factor`, `steps`, `batch_size`, `learning_rate`,
`retriever_gate_utility` / `retriever_gate_window`, `mixed_precision`. The control's retriever never learns
(`retriever_learning_rate` 0: no backward pass through it, no index refresh).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import datasets
from accelerate.state import AcceleratorState

from ..data.knowledge_task import KnowledgeTask, KnowledgeValueTagger
from ..data.masking import build_masked_dataset
from ..training import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments, RealmPretrainer
from ..training.argument_parsing import REMOVED_OPTIONS
from ..training.arguments import IctArguments
from ..training.ict import IctTrainer
from ..utils.options import UsageError
from ..utils.precision import resolve_mixed_precision

logger = logging.getLogger(__name__)

# the shapes of the task: each person's document is one block; K = ∅ + 3 retrieved
KNOWLEDGE_TASK_SHAPES = {"block_length": 96, "query_max_length": 32, "joined_max_length": 112, "num_candidates": 4}

# The recipe per initialization; what differs between them is the model size and the steps it affords on 2 CPU cores
# (chosen on the held-out sentences of the task of seed 0: benchmarks/results/knowledge*.md).
KNOWLEDGE_RECIPES: dict[str, dict[str, Any]] = {
    # random 2-layer BERTs (hidden 128) for both towers and the encoder; ICT gives the retriever its start
    "tiny": {
        "model": {"random_init": True, "pooling": "mean", "projection_size": None},
        "random_bert": {
            "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        },
        "ict_steps": 200, "ict_batch_size": 32, "ict_learning_rate": 1e-3,
        "reading_warmup_steps": 300, "reading_warmup_batch_size": 64, "reading_warmup_learning_rate": 2e-3,
        "mlm_head_learning_rate_factor": 1,
        "steps": 300, "batch_size": 16, "learning_rate": 1e-3, "mixed_precision": "no",
        # no utility gate: the tiny encoder's reading utility stays low while encoder and retriever improve together
        "retriever_gate_utility": None,
    },
    # REALM's architecture on all-MiniLM-L6-v2: [CLS] pooling and a fresh 128-d projection + LayerNorm
    "minilm-cls": {
        "model": {"retriever": "minilm", "encoder": "minilm", "pooling": "cls", "projection_size": 128},
        "ict_steps": 0, "ict_batch_size": 32, "ict_learning_rate": 3e-5,
        "reading_warmup_steps": 100, "reading_warmup_batch_size": 16, "reading_warmup_learning_rate": 2e-4,
        "mlm_head_learning_rate_factor": 10,
        "steps": 60, "batch_size": 8, "learning_rate": 1e-4, "mixed_precision": "auto",
        "retriever_gate_utility": 0.2, "retriever_gate_window": 10,
    },
    # all-MiniLM-L6-v2's own embedding space: mean pooling, no projection
    "minilm": {
        "model": {"retriever": "minilm", "encoder": "minilm", "pooling": "mean", "projection_size": None},
        "ict_steps": 0, "ict_batch_size": 32, "ict_learning_rate": 3e-5,
        "reading_warmup_steps": 100, "reading_warmup_batch_size": 16, "reading_warmup_learning_rate": 2e-4,
        "mlm_head_learning_rate_factor": 10,
        "steps": 60, "batch_size": 8, "learning_rate": 1e-4, "mixed_precision": "auto",
        "retriever_gate_utility": 0.2, "retriever_gate_window": 10,
    },
}


# The tiny recipe on the hard task (realm_hf.data.knowledge_task_hard): longer warm starts, so that REALM starts from a
# retriever that finds something (chosen on the "choose" half of its held-out sentences, seed 0:
# benchmarks/results/knowledge-hard-calibration.md); REALM's encoder at 3e-4 and its retriever at 1e-4, each refresh
# swapped in at the step that asks for it (at 1e-3 for both the retriever collapsed on one seed in three, at 3e-4 it
# drifted there: chosen on the "choose" half, benchmarks/results/collapse.md); a reading loss beside each REALM step
# whose weight rises from 30 to 100 times REALM's over the run (without it reading the gold block fell 34 -> 26 % on
# seed 0; a reading step every third step kept it but cost retrieval, 0.62 top-1 on seed 1; constant weights 0.3-100
# tried: 30 kept reading at or above its start on seeds 0-4 by +0.5 at worst, 50 and 100 cost seed 1 its retrieval;
# 30 -> 100 kept it by +1.6 at worst, 10 -> 100 read less on seed 0)
HARD_TASK_RECIPE = {"ict_steps": 1000, "ict_batch_size": 64, "reading_warmup_steps": 600, "steps": 400,
                    "learning_rate": 3e-4, "retriever_learning_rate": 1e-4, "refresh_max_staleness": 0,
                    "reading_loss_weight": 30.0, "reading_loss_weight_final": 100.0}


def hard_task_recipe(settings: list[str]) -> dict:
    """The tiny recipe on the hard task, with `KEY=VALUE` (JSON) overrides and its mixed precision resolved for the
    CPU (what the hard-task benchmarks run)."""
    recipe = {**json.loads(json.dumps(KNOWLEDGE_RECIPES["tiny"])), **HARD_TASK_RECIPE}
    for item in settings:
        key, value = item.split("=", 1)
        if key in REMOVED_OPTIONS:
            raise UsageError(f"--set {key}=... : {key} was removed: {REMOVED_OPTIONS[key]}.")
        recipe[key] = json.loads(value)
    recipe["mixed_precision"] = resolve_mixed_precision(recipe.get("mixed_precision", "no"), "cpu")
    return recipe


def write_jsonl(rows: list[dict], path: str) -> str:
    """Write `rows` as JSON lines to `path`; returns `path`."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def write_task_files(task: KnowledgeTask, directory: str) -> dict[str, str]:
    """The task's knowledge corpus and pre-training sentences as JSONL files in `directory`: `{"corpus", "train"}`."""
    os.makedirs(directory, exist_ok=True)
    return {
        "corpus": write_jsonl(task.documents, os.path.join(directory, "corpus.jsonl")),
        "train": write_jsonl(task.train_sentences, os.path.join(directory, "train.jsonl")),
        "held_out": write_jsonl(task.held_out_sentences, os.path.join(directory, "held_out.jsonl")),
    }


def held_out_examples(
    task: KnowledgeTask, tokenizer: Any, query_max_length: int, tagger: Any = None
) -> datasets.Dataset:
    """Masked held-out sentences with the block id of their person's document (blocks are in document order) and,
    when the sentences name several `documents` of their person, the others as `gold_block_ids`. `tagger` defaults
    to [`KnowledgeValueTagger`] of the task's values."""
    tagger = KnowledgeValueTagger(task.values) if tagger is None else tagger
    sentences = task.held_out_sentences
    masked = build_masked_dataset(sentences, tokenizer, tagger=tagger, query_max_length=query_max_length)
    if len(masked) != len(sentences):
        raise RuntimeError(f"{len(masked)} masked sentences for {len(sentences)} held-out sentences")
    masked = masked.add_column("gold_block_id", [int(s["entity"]) for s in sentences])
    if sentences and "documents" in sentences[0]:
        masked = masked.add_column(
            "gold_block_ids", [[int(b) for b in s["documents"] if b != s["entity"]] for s in sentences]
        )
    return masked


def save_random_models(recipe: dict, work: str, tokenizer: Any) -> dict:
    """Random `RealmRetriever` / `RealmKnowledgeEncoder` of the recipe's `random_bert` size, saved where
    [`ModelArguments`] can name them; returns the recipe's `model` entry pointing at them."""
    import torch

    from ..configuration import RealmKnowledgeEncoderConfig, RealmRetrieverConfig
    from ..modeling import RealmKnowledgeEncoder, RealmRetriever

    torch.manual_seed(0)
    bert = {**recipe["random_bert"], "vocab_size": len(tokenizer), "max_position_embeddings": 512}
    model = recipe["model"]
    retriever = RealmRetriever(RealmRetrieverConfig(
        bert_config=bert, pooling=model["pooling"], projection_size=model["projection_size"],
        query_max_length=KNOWLEDGE_TASK_SHAPES["query_max_length"],
        block_max_length=KNOWLEDGE_TASK_SHAPES["block_length"],
    ))
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(
        bert_config=bert, max_length=KNOWLEDGE_TASK_SHAPES["joined_max_length"], mask_token_id=tokenizer.mask_token_id
    ))
    paths = {"retriever": os.path.join(work, "random-retriever"), "encoder": os.path.join(work, "random-encoder")}
    for network, path in ((retriever, paths["retriever"]), (encoder, paths["encoder"])):
        network.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return {**paths, "pooling": model["pooling"], "projection_size": model["projection_size"]}


def _fresh_accelerator_state() -> None:
    # runs in one process may differ in mixed precision: Accelerate's process-wide state must start anew
    AcceleratorState._reset_state(reset_partial_state=True)


def run_ict(recipe: dict, corpus_path: str, work: str, seed: int) -> str:
    """ICT warm start of the retriever on the knowledge corpus; returns its final directory."""
    output = os.path.join(work, "ict")
    _fresh_accelerator_state()
    trainer = IctTrainer(
        LoopArguments(
            output_dir=output, max_steps=recipe["ict_steps"], per_device_batch_size=recipe["ict_batch_size"],
            learning_rate=recipe["ict_learning_rate"], warmup_steps=recipe["ict_steps"] // 10, logging_steps=25,
            save_steps=0, report_to="none", seed=seed, overwrite_output_dir=True,  # each call starts the run afresh
        ),
        ModelArguments(**recipe["model"]),
        CorpusArguments(
            corpus=corpus_path, block_length=KNOWLEDGE_TASK_SHAPES["block_length"],
            query_max_length=KNOWLEDGE_TASK_SHAPES["query_max_length"], embed_dtype="float32",
        ),
        IctArguments(),
    )
    trainer.train()
    return os.path.join(output, "final")


def corpus_arguments(paths: dict, pretraining_corpus: str | None, index_type: str = "Flat") -> CorpusArguments:
    """The task's corpus (and, for REALM proper, its pre-training sentences) at the task's shapes."""
    return CorpusArguments(
        corpus=paths["corpus"], pretraining_corpus=pretraining_corpus, block_length=KNOWLEDGE_TASK_SHAPES["block_length"],
        query_max_length=KNOWLEDGE_TASK_SHAPES["query_max_length"],
        joined_max_length=KNOWLEDGE_TASK_SHAPES["joined_max_length"], embed_dtype="float32", index_type=index_type,
    )


def pretrainer(name: str, recipe: dict, model: ModelArguments, corpus: CorpusArguments, work: str, steps: int,
               eval_every: int, seed: int, tagger: Any, eval_examples: datasets.Dataset,
               rebuild_final_index: bool = False, **pretraining: Any) -> RealmPretrainer:
    """A [`RealmPretrainer`] of the recipe writing to `work/name`, salient-span masking of the task's values, an
    index refresh every 10 steps (`pretraining` overrides any [`PretrainingArguments`], e.g. `masking`)."""
    _fresh_accelerator_state()
    return RealmPretrainer(
        LoopArguments(
            output_dir=os.path.join(work, name), max_steps=steps, per_device_batch_size=recipe["batch_size"],
            learning_rate=recipe["learning_rate"], warmup_steps=steps // 10, logging_steps=10, save_steps=0,
            eval_steps=eval_every, report_to="none", seed=seed, mixed_precision=recipe.get("mixed_precision", "no"),
            overwrite_output_dir=True,  # each call starts the run afresh (a stage's work directory is its caller's)
        ),
        model,
        corpus,
        PretrainingArguments(**{
            "masking": "salient_span", "num_candidates": KNOWLEDGE_TASK_SHAPES["num_candidates"],
            "refresh_schedule": "10", "refresh_mode": "thread", "rebuild_final_index": rebuild_final_index,
            "refresh_max_staleness": recipe.get("refresh_max_staleness"),
            "mlm_head_learning_rate": recipe.get("mlm_head_learning_rate_factor", 1.0) * recipe["learning_rate"],
            **pretraining,
        }),
        tagger=tagger,
        eval_examples=eval_examples,
    )


def _eval_figures(history: list[dict]) -> dict:
    return {k[len("eval/"):]: v for r in history for k, v in r.items() if k.startswith("eval/")}


def run_reading_warmup(recipe: dict, paths: dict, work: str, ict_dir: str | None, seed: int, tagger: Any,
                       eval_examples: datasets.Dataset, evaluate: bool = True) -> tuple[str, dict]:
    """The reading warm-up: the corpus's own sentences (X = Z), each with its source block among the candidates,
    retriever frozen: the encoder learns to read. Returns its final directory and the held-out figures at its end
    (with `evaluate`; else only its time)."""
    recipe = {
        **recipe,
        "learning_rate": recipe.get("reading_warmup_learning_rate", recipe["learning_rate"]),
        "batch_size": recipe.get("reading_warmup_batch_size", recipe["batch_size"]),
    }
    trainer = pretrainer(
        "reading-warmup", recipe, ModelArguments(**recipe["model"]), corpus_arguments(paths, None), work,
        recipe["reading_warmup_steps"], 0, seed, tagger, eval_examples if evaluate else eval_examples.select([]),
        ict_warm_start=ict_dir,
        reading_warmup_steps=recipe["reading_warmup_steps"],
    )
    started = time.time()
    figures = _eval_figures(trainer.train())
    figures["seconds"] = round(time.time() - started, 1)
    return os.path.join(work, "reading-warmup", "final"), figures


def run_setting(name: str, recipe: dict, paths: dict, eval_examples: datasets.Dataset, tagger: Any, work: str,
                start_dir: str | None, ict_dir: str | None, frozen: bool, eval_every: int, seed: int,
                rebuild_final_index: bool = False, before: dict | None = None, index_type: str = "Flat",
                also_evaluate: datasets.Dataset | None = None, **overrides: Any) -> dict:
    """One REALM pre-training run of the recipe, from the reading warm-up's encoder (`start_dir`) when given, with
    the retriever trained or `frozen`; returns the held-out figures before and after, the curve and the time.
    `eval_every` 0 evaluates after the last step only; `before`, the figures of a run with the same start (its
    `curve[0]`), saves evaluating that start again. `index_type` is the training index's; `overrides` replace
    [`PretrainingArguments`] of the recipe (an ablation: `masking`, `use_null_document`, `num_candidates`,
    `refresh_schedule`, ...). `also_evaluate`, other held-out sentences, are measured before and after the run only
    (`"also_evaluated"`: `{"before", "after"}`)."""
    steps = recipe["steps"]
    overrides.setdefault("null_document_score", recipe.get("null_document_score"))
    if start_dir is not None:  # after the reading warm-up: its encoder, and the initial retriever
        model = ModelArguments(
            retriever=recipe["model"].get("retriever", "minilm"), encoder=os.path.join(start_dir, "encoder"),
            pooling=recipe["model"]["pooling"], projection_size=recipe["model"]["projection_size"],
        )
    else:
        model = ModelArguments(**recipe["model"])
    trainer = pretrainer(
        name, recipe, model, corpus_arguments(paths, paths["train"], index_type), work, steps, eval_every, seed,
        tagger, eval_examples, rebuild_final_index=rebuild_final_index, ict_warm_start=ict_dir,
        retriever_gate_utility=None if frozen else recipe.get("retriever_gate_utility"),
        retriever_gate_window=recipe.get("retriever_gate_window", 10),
        retriever_learning_rate=0.0 if frozen else recipe.get("retriever_learning_rate"),
        reading_loss_weight=recipe.get("reading_loss_weight", 0.0),
        reading_loss_batch_size=recipe.get("reading_loss_batch_size"),
        reading_loss_weight_final=recipe.get("reading_loss_weight_final"),
        **overrides,
    )
    started = time.time()
    before = {k: v for k, v in before.items() if k != "step"} if before is not None else trainer.evaluate(0)
    also_before = trainer.evaluate_sentences(also_evaluate) if also_evaluate is not None else None
    history = trainer.train()
    seconds = time.time() - started
    also_evaluated = (
        {"before": also_before, "after": trainer.evaluate_sentences(also_evaluate)} if also_evaluate is not None else None
    )
    curve = [{"step": 0, **before}] + [
        {"step": r["step"], **{k[len("eval/"):]: v for k, v in r.items() if k.startswith("eval/")}}
        for r in history if any(k.startswith("eval/") for k in r)
    ]
    after = curve[-1]
    k = trainer.num_retrieved
    return {
        "retrieval_top1_before": before["gold_top1"],
        "retrieval_top1_after": after["gold_top1"],
        f"retrieval_top{k}_before": before[f"gold_top{k}"],
        f"retrieval_top{k}_after": after[f"gold_top{k}"],
        "gold_posterior_before": before["gold_posterior_mass"],
        "gold_posterior_after": after["gold_posterior_mass"],
        "gold_prior_after": after["gold_prior_mass"],
        "mlm_acc_retrieval_before": before["mlm_accuracy_with_retrieval"] / 100.0,
        "mlm_acc_retrieval_after": after["mlm_accuracy_with_retrieval"] / 100.0,
        # (no null document, no figure: NaN)
        "mlm_acc_null_after": after.get("mlm_accuracy_null_document", float("nan")) / 100.0,
        # reading alone: the gold block as the only candidate
        "mlm_acc_gold_document_after": after["mlm_accuracy_gold_document"] / 100.0,
        "steps": steps,
        "seconds": round(seconds, 1),
        # the step from which the retriever learned (None: never, the control or a gate that stayed shut)
        "retriever_start_step": trainer.retriever_start_step if not frozen else None,
        # how many steps the retriever learned in, and what held it otherwise (as in trainer_state.json)
        "retriever_learning": trainer.retriever_learning.state_dict(),
        "retriever_learning_summary": trainer.retriever_learning.summary()[1],
        "curve": curve,
        "reading_utility_top": [
            {"step": r["step"], "ru_top": round(r["ru_top"], 4)} for r in history if "ru_top" in r
        ],
        "index_staleness": index_staleness(history),
        **({"also_evaluated": also_evaluated} if also_evaluated is not None else {}),
    }


def index_staleness(history: list[dict]) -> dict[str, float] | None:
    """How many steps the training index lagged the retriever (step minus the step of the index searched) over the
    logged steps: `{"mean", "max"}`, or None when no step logged it."""
    lags = [r["step"] - r["index_step"] for r in history if "index_step" in r and "step" in r]
    return {"mean": round(sum(lags) / len(lags), 1), "max": max(lags)} if lags else None


def plot_knowledge_curves(results: dict, path: str, title: str) -> None:
    """The held-out figures over REALM pre-training in the words of the demo's table: "right document first" (the
    gold document ranked first) and "blank filled right" (masked-token accuracy, with retrieval and without a
    document), retriever trained (solid) vs frozen (dashed), one column per initialization of `results["settings"]`
    (keys `"<init>/recipe"`, `"<init>/control"`); a dotted line marks the step the retriever started learning."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    inits = list(dict.fromkeys(s.split("/")[0] for s in results["settings"]))
    fig, axes = plt.subplots(2, len(inits), figsize=(4.2 * len(inits), 6.4), squeeze=False)
    for i, init in enumerate(inits):
        top, accuracy = axes[0, i], axes[1, i]
        for variant, style in (("recipe", "-"), ("control", "--")):
            r = results["settings"].get(f"{init}/{variant}")
            if r is None:
                continue
            steps = [p["step"] for p in r["curve"]]
            label = "retriever trained" if variant == "recipe" else "retriever frozen"
            top.plot(steps, [p["gold_top1"] for p in r["curve"]], style, marker="o", label=label)
            accuracy.plot(steps, [p["mlm_accuracy_with_retrieval"] / 100 for p in r["curve"]], style, marker="o",
                          label=label)
            accuracy.plot(steps, [p["mlm_accuracy_null_document"] / 100 for p in r["curve"]], style, color="gray",
                          label=f"{label}, no document read")
            if r.get("retriever_start_step") is not None:
                for axis in (top, accuracy):
                    axis.axvline(r["retriever_start_step"], color="black", linestyle=":", linewidth=0.8)
                top.text(r["retriever_start_step"], 0.03, " retriever starts learning", fontsize=7)
        top.set(title=f"{init}: right document first", ylabel="fraction of held-out sentences", ylim=(0, 1.02))
        accuracy.set(title=f"{init}: blank filled right", xlabel="REALM pre-training step",
                     ylabel="fraction of blanks", ylim=(0, 1.02))
        top.legend(fontsize=7)
        accuracy.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
