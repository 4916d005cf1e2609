"""`realm-hf demo`: the knowledge demo (`realm_hf.demo.knowledge`, the default recipe) or the Wikipedia Open-QA demo
(`realm_hf.demo.wikipedia_qa`); its options are checked here, per recipe, before any model is loaded."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable

from ..demo.defaults import (
    DEMO_ENTITIES, DEMO_EVAL_EVERY, DEMO_FINETUNE_RUNS, DEMO_FINETUNE_STEPS, DEMO_INDEX_ARTICLES, DEMO_INIT, DEMO_PRETRAIN_ARTICLES,
    DEMO_PRETRAIN_STEPS, DEMO_QUESTIONS_FILE, DEMO_EVIDENCE_STEPS, DEMO_READING_NEGATIVES, DEMO_READING_PASSES,
    DEMO_READING_STEPS, DEMO_READING_WEIGHT, DEMO_REHEARSAL_QUESTIONS, DEMO_SEED, DEMO_SPAN_NORMALIZATION, DEMO_STEPS,
    DEMO_TRAIN_QUESTIONS, KNOWLEDGE_INITS,
)
from ..training.validation import DATA_PAGE, check_positive, check_texts
from ..utils.options import UsageError

DEMO_RECIPES = ("knowledge", "wikipedia-qa")
DEMO_OUTPUTS = {"knowledge": "outputs/demo", "wikipedia-qa": "outputs/demo-wikipedia-qa"}

logger = logging.getLogger(__name__)


# --recipe wikipedia-qa's sizes of its stages, each a `DemoSettings` field of the same name: (flag, type, default, help)
WIKIPEDIA_QA_STAGE_OPTIONS: tuple[tuple[str, type, int | float, str], ...] = (
    ("--pretrain-articles", int, DEMO_PRETRAIN_ARTICLES, "Articles pre-trained on (default: %(default)s)."),
    ("--pretrain-steps", int, DEMO_PRETRAIN_STEPS, "REALM pre-training steps (default: %(default)s)."),
    ("--reading-steps", int, DEMO_READING_STEPS,
     "Reading steps after pre-training: wh-cloze questions made from the corpus ('london stands on which river in "
     "southeast england'), each read with its source block (needs spaCy) (default: %(default)s; 0: none)."),
    ("--reading-negatives", int, DEMO_READING_NEGATIVES,
     "Blocks without the answer read beside each reading question's source block, so that the reader learns which "
     "block answers (default: %(default)s)."),
    ("--reading-passes", int, DEMO_READING_PASSES,
     "Times each reading question is read; the stage makes reading-steps x 4 / passes of them (default: "
     "%(default)s)."),
    ("--evidence-steps", int, DEMO_EVIDENCE_STEPS,
     "Open-QA evidence steps at the start of fine-tuning: each training question read with its evidence block only "
     "(default: %(default)s; 0: none)."),
    ("--finetune-steps", int, DEMO_FINETUNE_STEPS,
     "Open-QA fine-tuning steps after the warm-up (default: %(default)s)."),
    ("--rehearsal-questions", int, DEMO_REHEARSAL_QUESTIONS,
     "Reading questions mixed into fine-tuning and read as in the reading stage (source block and hard negatives), "
     "so that fine-tuning keeps which block the reading stage taught the reader to choose; give --finetune-steps room "
     "for them (default: %(default)s; 0: none)."),
    ("--finetune-runs", int, DEMO_FINETUNE_RUNS,
     "Fine-tunings, each reading the questions in another order; the demo answers with their weight average, a "
     "model soup (default: %(default)s)."),
    ("--reading-weight", float, DEMO_READING_WEIGHT,
     "Weight of the reading stage's model in the model that answers, the weight average of it and the "
     "fine-tuning(s) (WiSE-FT): keeps part of what fine-tuning overwrites (default: %(default)s; 0: the fine-tuned "
     "model alone)."),
)


class _RenamedFlag(argparse.Action):
    """A flag that was renamed: refused in one line naming its new name."""

    def __init__(self, option_strings, dest, new_flag: str, **kwargs):
        super().__init__(option_strings, dest, nargs="?", **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError(f"{option_string} was renamed: use {self.new_flag}.")


def _stage_settings(args: argparse.Namespace) -> dict[str, int | float]:
    """The `DemoSettings` fields that `WIKIPEDIA_QA_STAGE_OPTIONS` set, from the parsed arguments."""
    names = [flag[2:].replace("-", "_") for flag, *_ in WIKIPEDIA_QA_STAGE_OPTIONS]
    return {name: getattr(args, name) for name in names}


def add_parser(subparsers) -> None:
    """The `demo` subcommand and its options (each recipe's in a group of its own)."""
    parser = subparsers.add_parser(
        "demo",
        help="Watch REALM's retriever learn from the masked-LM signal (about 5 minutes on a CPU), or the longer "
        "Wikipedia Open-QA demo (--recipe wikipedia-qa).",
        description="--recipe knowledge (default): REALM pre-training of all-MiniLM-L6-v2 on a synthetic knowledge "
        "corpus (fictional people, one document each), twice: retriever trained by the masked-LM signal and retriever "
        "frozen (the control). Prints how often each retrieves the right document and fills the blank of held-out "
        "sentences (facts no pre-training sentence states, unseen wordings) before and after, then answers a few with "
        "the document read and the evidence. --recipe wikipedia-qa: pre-train briefly on the embedded Wikipedia lead "
        "sections, teach the reader to read on wh-cloze questions, fine-tune it for Open-QA, and answer questions "
        "with their source block (tens of minutes). Finished stages in --output are reused.",
    )
    parser.add_argument("--recipe", choices=DEMO_RECIPES, default="knowledge", help="Which demo (default: %(default)s).")
    parser.add_argument(
        "--output", default=None,
        help="Where the data, the models and the indexes go (default: "
        + ", ".join(f"{path} for {recipe}" for recipe, path in DEMO_OUTPUTS.items()) + ").",
    )
    parser.add_argument(
        "--seed", type=int, default=DEMO_SEED,
        help="Seed of the data: the knowledge task's people and facts, or the Wikipedia sample (default: %(default)s).",
    )
    knowledge = parser.add_argument_group("--recipe knowledge")
    knowledge.add_argument(
        "--init", choices=KNOWLEDGE_INITS, default=None,
        help="Initialization: minilm-cls (all-MiniLM-L6-v2 with REALM's [CLS] pooling and a fresh 128-d projection), "
        f"minilm (mean pooling) or tiny (random 2-layer BERTs with an ICT warm start) (default: {DEMO_INIT}).",
    )
    knowledge.add_argument("--entities", type=int, default=None, help=f"Fictional people, hence documents (default: {DEMO_ENTITIES}).")
    knowledge.add_argument("--steps", type=int, default=None, help=f"REALM pre-training steps of each run (default: {DEMO_STEPS}).")
    knowledge.add_argument("--warmup-steps", type=int, default=None, help="Reading warm-up steps (default: the init's recipe).")
    knowledge.add_argument("--eval-every", type=int, default=None, help=f"Held-out evaluation every N REALM steps, the points of retrieval.png's curves (default: {DEMO_EVAL_EVERY}).")
    knowledge.add_argument(
        "--mixed-precision", choices=("auto", "bf16", "no"), default=None,
        help="Training precision: 'auto' (default) takes bf16 autocast where a few-second probe finds it faster on "
        "this machine (a GPU with bf16, most idle x86 CPUs with AVX-512), else fp32; 'bf16' or 'no' (fp32) to choose. "
        "The figures hold in both (docs/results.md#the-demo).",
    )
    parser.add_argument("--tiny-models", action="store_true", help=argparse.SUPPRESS)  # tests: tiny random models, seconds
    parser.add_argument("--reader-warmup-steps", action=_RenamedFlag, new_flag="--evidence-steps", help=argparse.SUPPRESS)
    demo, parser = parser, parser.add_argument_group("--recipe wikipedia-qa")  # the options below are its own
    parser.add_argument("--question", action="append", default=None, help="A question to ask (repeatable; default: 4 demo questions).")
    parser.add_argument(
        "--max-articles", type=int, default=None,
        help=f"Articles of the knowledge corpus (default: {DEMO_INDEX_ARTICLES:,}, with --retrieval-only too).",
    )
    for flag, kind, default, help_text in WIKIPEDIA_QA_STAGE_OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=help_text)
    parser.add_argument(
        "--train-retriever", action="store_true",
        help="Fine-tune the query tower too, as REALM's Open-QA does (default: off: on the demo's ~1,400 training "
        "questions it learns answer types rather than questions; see docs/experiments.md).",
    )
    parser.add_argument(
        "--span-normalization", choices=("global", "block"), default=DEMO_SPAN_NORMALIZATION,
        help="The reader's span probabilities: 'global', one softmax over all spans of the retrieved blocks plus "
        "their retrieval scores (ORQA), or 'block', a softmax per block weighted by the retriever (the REALM paper) "
        "(default: %(default)s).",
    )
    parser.add_argument(
        "--train-qa", default="titles",
        help="Folder of the QA sets to fine-tune on (webquestions-train.jsonl, nq-dev.jsonl, curatedtrec-train.jsonl "
        "of docs/data.md; questions answerable from the corpus, the demo questions and their answers left out), or "
        "'titles': questions made from the corpus itself (title probes), which answer far fewer (default: %(default)s).",
    )
    parser.add_argument("--train-questions", type=int, default=DEMO_TRAIN_QUESTIONS, help="Training questions taken from --train-qa at most (default: %(default)s).")
    parser.add_argument(
        "--questions-file", default="auto",
        help="JSONL of evaluation questions with answers (split 'default': asked and shown; 'held-out': asked and "
        "scored); 'auto': examples/demo_questions.jsonl of the source checkout when it exists; 'none' (default: %(default)s).",
    )
    parser.add_argument("--retrieval-only", action="store_true", help="Only index with MiniLM and show the top blocks (no training, no answer).")
    parser.add_argument("-k", "--top-k", type=int, default=3, help="Blocks shown per question with --retrieval-only.")
    parser.add_argument("--batch-size", type=int, default=64, help="Blocks per forward pass when indexing with --retrieval-only.")
    # which options belong to which recipe, so that an option given to the other recipe is refused, not ignored
    demo.set_defaults(
        knowledge_options=[action.dest for action in knowledge._group_actions],
        wikipedia_qa_defaults={action.dest: action.default for action in parser._group_actions},
    )


def _auto_path(value: str, option: str, auto: str, off: str, exists: Callable[[str], bool], what: str) -> str | None:
    """An absolute path from a demo option taking a path, `'auto'` (`auto` when it exists, else `None`) or `off` (`None`)."""
    if value == off:
        return None
    if value == "auto":
        return os.path.abspath(auto) if exists(auto) else None
    if not exists(value):
        raise UsageError(f"{option} {value!r} does not exist; pass {what}, 'auto' or {off!r}.")
    return os.path.abspath(value)


def _demo_train_qa(value: str) -> str | None:
    """The demo's `--train-qa` folder (absolute), or None for 'titles'."""
    if value == "titles":
        return None
    if not os.path.isdir(value):
        raise UsageError(
            f"--train-qa {value!r}: no such folder; pass the folder of the QA sets (see {DATA_PAGE}) or 'titles'."
        )
    return os.path.abspath(value)


# tests: the tiny init at test size (seconds)
TINY_KNOWLEDGE_RECIPE = {
    "ict_steps": 2, "ict_batch_size": 8, "reading_warmup_batch_size": 8, "batch_size": 4,
    "random_bert": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
}


def run(args: argparse.Namespace) -> int:
    """`realm-hf demo`: check the arguments, then the knowledge demo, or the Wikipedia Open-QA demo (its
    retrieval-only fast path or the whole of it)."""
    given = {
        "knowledge": [name for name in args.knowledge_options if getattr(args, name) is not None],
        "wikipedia-qa": [name for name, default in args.wikipedia_qa_defaults.items() if getattr(args, name) != default],
    }
    for recipe, options in given.items():
        if options and args.recipe != recipe:
            flags = ", ".join("--" + name.replace("_", "-") for name in options)
            raise UsageError(f"{flags} belong to --recipe {recipe}, not {args.recipe}: add --recipe {recipe}, or drop them.")
    output = args.output or DEMO_OUTPUTS[args.recipe]
    if args.recipe == "knowledge":
        from ..demo import KnowledgeDemoSettings, run_knowledge_demo

        for name in ("entities", "steps", "eval_every"):
            check_positive(getattr(args, name), "--" + name.replace("_", "-"))
        if args.warmup_steps is not None and args.warmup_steps < 0:
            raise UsageError(f"--warmup-steps must be at least 0, got {args.warmup_steps}.")
        tiny = {"init": "tiny", "steps": 4, "reading_steps": 4, "eval_every": 2, "overrides": TINY_KNOWLEDGE_RECIPE} if args.tiny_models else {}
        requested = {"init": args.init, "num_entities": args.entities, "steps": args.steps,
                     "reading_steps": args.warmup_steps, "eval_every": args.eval_every}
        if args.mixed_precision is not None:
            requested["overrides"] = {**tiny.get("overrides", {}), "mixed_precision": args.mixed_precision}
        settings = KnowledgeDemoSettings(
            seed=args.seed, **{**tiny, **{name: value for name, value in requested.items() if value is not None}}
        )
        run_knowledge_demo(output, settings)
        return 0
    from ..demo.wikipedia_qa import run_demo, run_retrieval_demo
    from ..demo.wikipedia_qa_stages import DemoSettings

    if args.question is not None:
        args.question = check_texts(args.question, "question", 'realm-hf demo --question "who wrote hamlet"')
    if args.retrieval_only:
        check_positive(args.max_articles, "--max-articles")
        check_positive(args.top_k, "--top-k")
        check_positive(args.batch_size, "--batch-size")
        run_retrieval_demo(
            max_articles=args.max_articles, output=os.path.join(output, "minilm-index"), questions=args.question,
            top_k=args.top_k, batch_size=args.batch_size,
        )
        return 0
    train_qa = _demo_train_qa(args.train_qa)
    questions_file = _auto_path(args.questions_file, "--questions-file", str(DEMO_QUESTIONS_FILE), "none", os.path.isfile, "a JSONL file")
    settings = DemoSettings(
        max_articles=DEMO_INDEX_ARTICLES if args.max_articles is None else args.max_articles,
        **_stage_settings(args), tiny_models=args.tiny_models,
        train_qa=train_qa, train_questions=args.train_questions, questions_file=questions_file,
        train_retriever=args.train_retriever, span_normalization=args.span_normalization, seed=args.seed,
    )
    return run_demo(output, questions=args.question, settings=settings)
