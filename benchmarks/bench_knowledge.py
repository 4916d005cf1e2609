"""Does REALM pre-training teach the retriever? A controlled knowledge task, through the real RealmPretrainer.

    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge.py                 # both inits, recipe vs frozen control
    HF_HUB_OFFLINE=1 python benchmarks/bench_knowledge.py --inits tiny    # one init

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
from accelerate.state import AcceleratorState

from realm_hf.corpus import split_into_blocks
from realm_hf.data.knowledge_task import KnowledgeValueTagger, make_knowledge_task
from realm_hf.data.masking import build_masked_dataset
from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments, RealmPretrainer
from realm_hf.training.arguments import IctArguments
from realm_hf.training.ict import IctTrainer
from realm_hf.training.precision import resolve_mixed_precision

from bench_models import cpu_model

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# The recipe per initialization. What is shared is the recipe of examples/configs (see the README table); what
# differs is only the model size and the step count it affords on 2 CPU cores.
RECIPES = {
    # random 2-layer BERTs (hidden 128, 4 heads, no dropout) for both towers and the encoder; ICT gives the retriever
    # its start. Reading (the gold block as the only candidate, held-out sentences) after the warm-up, by measurement:
    # hidden 64 with dropout 0.1: 29-32 % after 400 steps (seeds 0, 1; 64 % after 800), and REALM then collapsed on
    # one machine and not on another; hidden 64 without dropout 43 %; hidden 128 with dropout 32 % after 200 steps,
    # 99 % after 400; hidden 128 without dropout 88 / 47 / 74 % after 150 steps, 99 / 86 % after 300 (seeds 0 / 1 / 2)
    "tiny": {
        "model": {"random_init": True, "pooling": "mean", "projection_size": None},
        "random_bert": {
            "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        },
        "ict_steps": 200, "ict_batch_size": 32, "ict_learning_rate": 1e-3,
        "reading_warmup_steps": 300, "reading_warmup_batch_size": 64, "reading_warmup_learning_rate": 2e-3,
        "mlm_head_learning_rate_factor": 1,
        "steps": 300, "batch_size": 16, "learning_rate": 1e-3, "retriever_freeze_steps": 0,
        # no utility gate: the tiny encoder's reading utility stays near 0.05 nats while encoder and retriever improve
        # together (documents' own words: 0.30 -> 1.00 without the gate; with a 0.2 gate it never opened, 0.26 -> 0.26)
        "retriever_gate_utility": None,
    },
    # REALM's architecture on MiniLM: [CLS] pooling and a fresh 128-d projection + LayerNorm (the setting)
    "minilm-cls": {
        "model": {"retriever": "minilm", "encoder": "minilm", "pooling": "cls", "projection_size": 128},
        "ict_steps": 0, "ict_batch_size": 32, "ict_learning_rate": 3e-5,
        "reading_warmup_steps": 100, "reading_warmup_batch_size": 16, "reading_warmup_learning_rate": 2e-4,
        "mlm_head_learning_rate_factor": 10,
        "steps": 60, "batch_size": 8, "learning_rate": 1e-4, "retriever_freeze_steps": 0, "mixed_precision": "auto",
        "retriever_gate_utility": 0.2, "retriever_gate_window": 10,
    },
    # MiniLM's own embedding space: mean pooling, no projection
    "minilm": {
        "model": {"retriever": "minilm", "encoder": "minilm", "pooling": "mean", "projection_size": None},
        "ict_steps": 0, "ict_batch_size": 32, "ict_learning_rate": 3e-5,
        "reading_warmup_steps": 100, "reading_warmup_batch_size": 16, "reading_warmup_learning_rate": 2e-4,
        "mlm_head_learning_rate_factor": 10,
        "steps": 60, "batch_size": 8, "learning_rate": 1e-4, "retriever_freeze_steps": 0, "mixed_precision": "auto",
        "retriever_gate_utility": 0.2, "retriever_gate_window": 10,
    },
}
TASK = {"num_entities": 100, "block_length": 96, "query_max_length": 32, "joined_max_length": 112, "num_candidates": 4}


def write_jsonl(rows: list[dict], path: str) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path


def held_out_examples(task, tokenizer, query_max_length: int):
    """Masked held-out sentences with the block id of their person's document (blocks are in document order)."""
    masked = build_masked_dataset(
        task.held_out_sentences, tokenizer, tagger=KnowledgeValueTagger(task.values), query_max_length=query_max_length
    )
    if len(masked) != len(task.held_out_sentences):
        raise RuntimeError(f"{len(masked)} masked sentences for {len(task.held_out_sentences)} held-out sentences")
    return masked.add_column("gold_block_id", [int(s["entity"]) for s in task.held_out_sentences])


def save_random_models(recipe: dict, work: str, tokenizer) -> dict:
    """Random `RealmRetriever` / `RealmKnowledgeEncoder` of the recipe's BERT size, saved where `ModelArguments`
    can name them."""
    from realm_hf import RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, RealmRetriever, RealmRetrieverConfig

    torch.manual_seed(0)
    bert = {**recipe["random_bert"], "vocab_size": len(tokenizer), "max_position_embeddings": 512}
    model = recipe["model"]
    retriever = RealmRetriever(RealmRetrieverConfig(
        bert_config=bert, pooling=model["pooling"], projection_size=model["projection_size"],
        query_max_length=TASK["query_max_length"], block_max_length=TASK["block_length"],
    ))
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(
        bert_config=bert, max_length=TASK["joined_max_length"], mask_token_id=tokenizer.mask_token_id
    ))
    paths = {"retriever": os.path.join(work, "random-retriever"), "encoder": os.path.join(work, "random-encoder")}
    for network, path in ((retriever, paths["retriever"]), (encoder, paths["encoder"])):
        network.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return {**paths, "pooling": model["pooling"], "projection_size": model["projection_size"]}


def run_ict(recipe: dict, corpus_path: str, work: str, seed: int) -> str:
    output = os.path.join(work, "ict")
    AcceleratorState._reset_state(reset_partial_state=True)
    trainer = IctTrainer(
        LoopArguments(
            output_dir=output, max_steps=recipe["ict_steps"], per_device_batch_size=recipe["ict_batch_size"],
            learning_rate=recipe["ict_learning_rate"], warmup_steps=recipe["ict_steps"] // 10, logging_steps=25,
            save_steps=0, report_to="none", seed=seed,
        ),
        ModelArguments(**recipe["model"]),
        CorpusArguments(corpus=corpus_path, block_length=TASK["block_length"], query_max_length=TASK["query_max_length"], embed_dtype="float32"),
        IctArguments(),
    )
    trainer.train()
    return os.path.join(output, "final")


def pretrainer(name: str, recipe: dict, model: ModelArguments, corpus: CorpusArguments, work: str, steps: int,
               eval_every: int, seed: int, tagger, eval_examples, **pretraining) -> RealmPretrainer:
    # the runs of one benchmark differ in mixed precision: Accelerate's process-wide state must start anew
    AcceleratorState._reset_state(reset_partial_state=True)
    return RealmPretrainer(
        LoopArguments(
            output_dir=os.path.join(work, name), max_steps=steps, per_device_batch_size=recipe["batch_size"],
            learning_rate=recipe["learning_rate"], warmup_steps=steps // 10, logging_steps=10, save_steps=0,
            eval_steps=eval_every, report_to="none", seed=seed, mixed_precision=recipe.get("mixed_precision", "no"),
        ),
        model,
        corpus,
        PretrainingArguments(
            masking="salient_span", num_candidates=TASK["num_candidates"], refresh_schedule="10",
            refresh_mode="thread", rebuild_final_index=False,
            mlm_head_learning_rate=recipe.get("mlm_head_learning_rate_factor", 1.0) * recipe["learning_rate"], **pretraining,
        ),
        tagger=tagger,
        eval_examples=eval_examples,
    )


def corpus_arguments(paths: dict, pretraining_corpus: str | None) -> CorpusArguments:
    return CorpusArguments(
        corpus=paths["corpus"], pretraining_corpus=pretraining_corpus, block_length=TASK["block_length"],
        query_max_length=TASK["query_max_length"], joined_max_length=TASK["joined_max_length"], embed_dtype="float32",
    )


def run_reading_warmup(recipe: dict, paths: dict, work: str, ict_dir: str | None, seed: int, tagger, eval_examples) -> tuple[str, dict]:
    """Stage 1: the corpus's own sentences (X = Z), each with its source block among the candidates, retriever
    frozen: the encoder learns to read. Returns the output directory and the held-out figures at its end."""
    recipe = {
        **recipe,
        "learning_rate": recipe.get("reading_warmup_learning_rate", recipe["learning_rate"]),
        "batch_size": recipe.get("reading_warmup_batch_size", recipe["batch_size"]),
    }
    trainer = pretrainer(
        "reading-warmup", recipe, ModelArguments(**recipe["model"]), corpus_arguments(paths, None), work,
        recipe["reading_warmup_steps"], 0, seed, tagger, eval_examples, ict_warm_start=ict_dir,
        reading_warmup_steps=recipe["reading_warmup_steps"],
    )
    started = time.time()
    history = trainer.train()
    figures = {k[len("eval/"):]: v for r in history for k, v in r.items() if k.startswith("eval/")}
    figures["seconds"] = round(time.time() - started, 1)
    return os.path.join(work, "reading-warmup", "final"), figures


def run_setting(name: str, recipe: dict, paths: dict, eval_examples, tagger, work: str, start_dir: str | None,
                ict_dir: str | None, frozen: bool, eval_every: int, seed: int) -> dict:
    steps = recipe["steps"]
    if start_dir is not None:  # after the reading warm-up: its encoder; the retriever it kept frozen (random init),
        # or the initial one (the warm-up of MiniLM's encoder is shared by the MiniLM retriever variants)
        retriever = recipe["model"].get("retriever", "minilm")
        model = ModelArguments(
            retriever=retriever, encoder=os.path.join(start_dir, "encoder"),
            pooling=recipe["model"]["pooling"], projection_size=recipe["model"]["projection_size"],
        )
    else:
        model = ModelArguments(**recipe["model"])
    trainer = pretrainer(
        name, recipe, model, corpus_arguments(paths, paths["train"]), work, steps, eval_every, seed, tagger,
        eval_examples, ict_warm_start=ict_dir,
        retriever_freeze_steps=steps + 1 if frozen else recipe["retriever_freeze_steps"],
        retriever_gate_utility=None if frozen else recipe.get("retriever_gate_utility"),
        retriever_gate_window=recipe.get("retriever_gate_window", 10),
        retriever_learning_rate=recipe.get("retriever_learning_rate"),
    )
    started = time.time()
    before = trainer.evaluate(0)
    history = trainer.train()
    seconds = time.time() - started
    curve = [{"step": 0, **before}] + [
        {"step": r["step"], **{k[len("eval/"):]: v for k, v in r.items() if k.startswith("eval/")}}
        for r in history if any(k.startswith("eval/") for k in r)
    ]
    after = curve[-1]
    top_k = f"gold_top{TASK['num_candidates'] - 1}"
    return {
        "retrieval_top1_before": before["gold_top1"],
        "retrieval_top1_after": after["gold_top1"],
        f"retrieval_top{TASK['num_candidates'] - 1}_before": before[top_k],
        f"retrieval_top{TASK['num_candidates'] - 1}_after": after[top_k],
        "gold_posterior_before": before["gold_posterior_mass"],
        "gold_posterior_after": after["gold_posterior_mass"],
        "gold_prior_after": after["gold_prior_mass"],
        "mlm_acc_retrieval_before": before["mlm_accuracy_with_retrieval"] / 100.0,
        "mlm_acc_retrieval_after": after["mlm_accuracy_with_retrieval"] / 100.0,
        "mlm_acc_null_after": after["mlm_accuracy_null_document"] / 100.0,
        # reading alone: the gold block as the only candidate
        "mlm_acc_gold_document_after": after["mlm_accuracy_gold_document"] / 100.0,
        "steps": steps,
        "seconds": round(seconds, 1),
        # the step from which the retriever learned (None: never, the control or a gate that stayed shut)
        "retriever_start_step": trainer.retriever_start_step if not frozen else None,
        "curve": curve,
        "reading_utility_top": [
            {"step": r["step"], "ru_top": round(r["ru_top"], 4)} for r in history if "ru_top" in r
        ],
    }


def describe_task(task: dict) -> str:
    words = "unseen templates" if task.get("paraphrase", True) else "the documents' own words"
    who = "the person named through their teacher" if task.get("relational") else "the person named"
    return f"unseen facts, {words}, {who}"


def write_markdown(results: dict, path: str) -> None:
    k = TASK["num_candidates"] - 1
    lines = [
        "# REALM pre-training on a controlled knowledge task",
        "",
        f"`python benchmarks/bench_knowledge.py` — {results['machine']}; {results['total_minutes']:.1f} min in all. "
        f"{results['task']['num_entities']} documents, {results['train_sentences']} pre-training sentences, "
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
                          label=f"{label}: with retrieval")
            accuracy.plot(steps, [p["mlm_accuracy_null_document"] / 100 for p in r["curve"]], style, color="gray",
                          label=f"{label}: ∅ only")
        top.set(title=f"{init}: gold document top-1", ylim=(0, 1.02))
        accuracy.set(title=f"{init}: masked-token accuracy", xlabel="REALM step (after the warm-up)", ylim=(0, 1.02))
        top.legend(fontsize=7)
        accuracy.legend(fontsize=7)
    fig.suptitle("Held-out sentences: " + describe_task(results["task"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


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
    parser.add_argument("--num-entities", type=int, default=TASK["num_entities"], help="People, hence documents.")
    parser.add_argument("--set", action="append", default=[], help="Override a recipe value: INIT.KEY=VALUE (JSON).")
    parser.add_argument("--output", default=os.path.join(RESULTS, "knowledge"), help="Prefix of .json/.md/.png.")
    parser.add_argument("--work-dir", default=None, help="Keep the runs here (default: a temporary directory).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))

    recipes = {init: json.loads(json.dumps(RECIPES[init])) for init in args.inits.split(",")}
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
    task = make_knowledge_task(
        args.num_entities, seed=args.seed, relational=args.relational, paraphrase=args.paraphrase
    )
    paths = {
        "corpus": write_jsonl(task.documents, os.path.join(work, "corpus.jsonl")),
        "train": write_jsonl(task.train_sentences, os.path.join(work, "train.jsonl")),
    }
    from transformers import AutoTokenizer

    from realm_hf.initial_weights import resolve_bert_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm"))
    blocks = split_into_blocks(task.documents, tokenizer, max_length=TASK["block_length"])
    if len(blocks) != len(task.documents) or list(blocks["title"]) != [d["title"] for d in task.documents]:
        raise RuntimeError("Each document must be exactly one block; raise block_length.")
    eval_examples = held_out_examples(task, tokenizer, TASK["query_max_length"])
    tagger = KnowledgeValueTagger(task.values)

    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""  # the trainers take it
    results = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores{gpu}, torch {torch.__version__}",
        "task": {**TASK, "num_entities": args.num_entities, "relational": args.relational, "paraphrase": args.paraphrase}, "recipes": recipes, "train_sentences": len(task.train_sentences),
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
