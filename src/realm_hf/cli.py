"""The `realm-hf` command.

    realm-hf demo [--output DIR] [--max-articles N] [--pretrain-steps N] [--reading-steps N] [--finetune-steps N]
                                              pre-train, read, fine-tune, answer on the embedded corpus (CPU, minutes)
    realm-hf demo --retrieval-only            only index the embedded corpus with MiniLM and retrieve with provenance
    realm-hf build-index --corpus ... --model ... --output DIR [--index-type Flat]
    realm-hf search --index DIR --model ... "query" ["query" ...] [-k 5]
    realm-hf convert --src OLD_REALM_DIR --output DIR [--kind embedder|encoder|reader|openqa]
    realm-hf ask "question" ["question" ...] --model DIR [--index DIR] [-k 5] [--answers 1]
    realm-hf ask --interactive --model DIR            questions from stdin, one per line, until EOF
    realm-hf average RUN0/final RUN1/final [...] --output DIR   the weight average (model soup) of fine-tunings
    realm-hf publish --model-dir DIR --repo-id ORG/NAME [--index-repo-id ORG/NAME-index] [--eval-results FILE]
    realm-hf download REPO_ID [--index] [--revision REV]   snapshot into the HF cache, print the local path

Training and evaluation (the same arguments and code as examples/*.py; `realm-hf <command> --help` lists them):
    realm-hf pretrain --config examples/configs/cpu-tiny.yaml [--max_steps N ...]    REALM pre-training
    realm-hf ict --config examples/configs/ict-cpu-tiny.yaml                         ICT warm start of the retriever
    realm-hf finetune --config examples/configs/openqa-cpu-tiny.yaml                 Open-QA fine-tuning
    realm-hf evaluate --model DIR --qa_file FILE.jsonl [--max_questions N]           Open-QA evaluation
    accelerate launch -m realm_hf.cli finetune --config ...                          the same, under Accelerate
    accelerate launch examples/finetune_openqa.py --config ...                       the same, as a script (also
                                       examples/pretrain.py, ict.py, evaluate_openqa.py)

A bad input ends in one line naming the value and the fix, exit status 2; `realm-hf --debug <command> ...` shows the
traceback instead. `-v` before the command turns on debug logging.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from .demo_defaults import (
    DEMO_FINETUNE_RUNS, DEMO_FINETUNE_STEPS, DEMO_INDEX_ARTICLES, DEMO_PRETRAIN_ARTICLES, DEMO_PRETRAIN_STEPS,
    DEMO_READER_WARMUP_STEPS, DEMO_READING_NEGATIVES, DEMO_READING_PASSES, DEMO_READING_STEPS, DEMO_READING_WEIGHT,
    DEMO_REHEARSAL_QUESTIONS, DEMO_SEED, DEMO_SPAN_NORMALIZATION, DEMO_TRAIN_QUESTIONS,
)
from .demo.defaults import DEMO_ENTITIES, DEMO_INIT, DEMO_STEPS, KNOWLEDGE_INITS
from .quiet import configure_logging


DEMO_RECIPES = ("knowledge", "wikipedia-qa")
DEMO_OUTPUTS = {"knowledge": "outputs/demo", "wikipedia-qa": "outputs/demo-wikipedia-qa"}


def _add_demo(subparsers) -> None:
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
    knowledge.add_argument("--eval-every", type=int, default=None, help="Held-out evaluation every N REALM steps too (default: before the first and after the last only).")
    parser.add_argument("--tiny-models", action="store_true", help=argparse.SUPPRESS)  # tests: tiny random models, seconds
    demo, parser = parser, parser.add_argument_group("--recipe wikipedia-qa")  # the options below are its own
    parser.add_argument("--question", action="append", default=None, help="A question to ask (repeatable; default: 4 demo questions).")
    parser.add_argument(
        "--max-articles", type=int, default=None,
        help=f"Articles of the knowledge corpus (default: {DEMO_INDEX_ARTICLES:,}, with --retrieval-only too).",
    )
    parser.add_argument("--pretrain-articles", type=int, default=DEMO_PRETRAIN_ARTICLES, help="Articles pre-trained on (default: %(default)s).")
    parser.add_argument("--pretrain-steps", type=int, default=DEMO_PRETRAIN_STEPS, help="REALM pre-training steps (default: %(default)s).")
    parser.add_argument(
        "--reading-steps", type=int, default=DEMO_READING_STEPS,
        help="Reading steps after pre-training: wh-cloze questions made from the corpus ('london stands on which river "
        "in southeast england'), each read with its source block (needs spaCy) (default: %(default)s; 0: none).",
    )
    parser.add_argument(
        "--reading-negatives", type=int, default=DEMO_READING_NEGATIVES,
        help="Blocks without the answer read beside each reading question's source block, so that the reader learns "
        "which block answers (default: %(default)s).",
    )
    parser.add_argument(
        "--reading-passes", type=int, default=DEMO_READING_PASSES,
        help="Times each reading question is read; the stage makes reading-steps x 4 / passes of them (default: "
        "%(default)s).",
    )
    parser.add_argument(
        "--reader-warmup-steps", type=int, default=DEMO_READER_WARMUP_STEPS,
        help="Open-QA reader warm-up steps before fine-tuning: each training question read with its evidence block "
        "only (default: %(default)s; 0: none).",
    )
    parser.add_argument("--finetune-steps", type=int, default=DEMO_FINETUNE_STEPS, help="Open-QA fine-tuning steps after the warm-up (default: %(default)s).")
    parser.add_argument(
        "--rehearsal-questions", type=int, default=DEMO_REHEARSAL_QUESTIONS,
        help="Reading questions mixed into fine-tuning and read as in the reading stage (source block and hard "
        "negatives), so that fine-tuning keeps which block the reading stage taught the reader to choose; give "
        "--finetune-steps room for them (default: %(default)s; 0: none).",
    )
    parser.add_argument(
        "--finetune-runs", type=int, default=DEMO_FINETUNE_RUNS,
        help="Fine-tunings, each reading the questions in another order; the demo answers with their weight "
        "average, a model soup (default: %(default)s).",
    )
    parser.add_argument(
        "--reading-weight", type=float, default=DEMO_READING_WEIGHT,
        help="Weight of the reading stage's model in the model that answers, the weight average of it and the "
        "fine-tuning(s) (WiSE-FT): keeps part of what fine-tuning overwrites (default: %(default)s; 0: the "
        "fine-tuned model alone).",
    )
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
        "--train-qa", default="auto",
        help="Folder of the shared QA sets to fine-tune on (WebQuestions train, NQ-open dev, CuratedTrec train; "
        "questions answerable from the corpus, the demo questions and their answers left out); 'auto': ../shared/data/qa when it exists; "
        "'titles': questions made from the corpus itself (title probes) (default: %(default)s).",
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


def _add_build_index(subparsers) -> None:
    parser = subparsers.add_parser("build-index", help="Split a corpus into blocks, embed them and save a MIPS index.")
    parser.add_argument(
        "--corpus", required=True,
        help="Articles {id, title, text}: JSONL / JSONL.gz / JSON / Parquet file(s), a glob, a directory, or 'embedded'.",
    )
    parser.add_argument(
        "--model", default="minilm",
        help="Whose document tower embeds the blocks: a RealmRetriever / RealmForOpenQA directory, a BERT, or "
        "'minilm' (the packaged all-MiniLM-L6-v2; default).",
    )
    parser.add_argument("--output", required=True, help="Directory for the index (blocks, embeddings, manifest.json).")
    parser.add_argument(
        "--index-type", default="Flat",
        help="faiss factory string (Flat, HNSW32, IVF4096,PQ32, SQfp16), compressed (~64 bytes/block preset) or "
        "torch-exact (no faiss); default: %(default)s.",
    )
    parser.add_argument("--max-articles", type=int, default=None, help="Index only the first N articles (default: all).")
    parser.add_argument(
        "--block-length", type=int, default=288,
        help="Block length in wordpieces, [CLS] title [SEP] body [SEP] (default: %(default)s; capped by the model's).",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="Blocks per forward pass (default: %(default)s).")
    parser.add_argument(
        "--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
        help="Autocast dtype of the embedding passes; 'auto': bfloat16 where a short probe finds it faster on this "
        "machine, else float32 (default: %(default)s).",
    )


def _add_search(subparsers) -> None:
    parser = subparsers.add_parser("search", help="Retrieve the top-k blocks of an index for each query.")
    parser.add_argument("--index", required=True, help="An index directory (from build-index or a trainer's final/index).")
    parser.add_argument(
        "--model", default="minilm",
        help="Whose query tower embeds the queries: the model that built the index (default: 'minilm').",
    )
    parser.add_argument("-k", "--top-k", type=int, default=5, help="Blocks shown per query (default: %(default)s).")
    parser.add_argument("query", nargs="+", help="One or more queries, each quoted: \"who wrote hamlet\" \"what is dna\".")


def _add_ask(subparsers) -> None:
    parser = subparsers.add_parser(
        "ask", help="Answer questions with a RealmForOpenQA model and its index, showing the evidence."
    )
    parser.add_argument(
        "question", nargs="*", help="One or more questions, each quoted: \"who wrote hamlet\" \"what is dna\" "
        "(omit them with --interactive).",
    )
    parser.add_argument("--model", required=True, help="A RealmForOpenQA directory (or Hub repo id).")
    parser.add_argument("--index", default=None, help="An index directory (default: the model's own, <model>/index).")
    parser.add_argument("-k", "--top-k", type=int, default=None, help="Blocks retrieved and read (default: config.top_k).")
    parser.add_argument("--answers", type=int, default=1, help="Answers shown per question.")
    parser.add_argument("-i", "--interactive", action="store_true", help="Read questions from stdin until EOF.")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda when available).")


def _add_convert(subparsers) -> None:
    subparsers.add_parser(
        "convert", help="Convert a transformers-REALM (google/realm-*) checkpoint (see `realm-hf convert -h`).",
        add_help=False,
    )


# ------------------------------------------------------------------------------ training / evaluation jobs
TRAINING_COMMANDS = {
    "pretrain": "REALM pre-training with asynchronous index refresh (see `realm-hf pretrain --help`).",
    "ict": "Inverse Cloze Task warm start of the retriever (see `realm-hf ict --help`).",
    "finetune": "Open-QA fine-tuning of RealmForOpenQA (see `realm-hf finetune --help`).",
    "evaluate": "Open-QA evaluation of a saved RealmForOpenQA with its index (see `realm-hf evaluate --help`).",
}
"""Subcommands whose arguments are dataclass fields, parsed by `realm_hf.training.entry_points` (not argparse here)."""


def _add_average(subparsers) -> None:
    parser = subparsers.add_parser(
        "average",
        help="Average the weights of Open-QA models that share one index: fine-tunings (a model soup; e.g. "
        "`realm-hf finetune` runs with other --seed values), or a fine-tuning and its start (WiSE-FT).",
    )
    parser.add_argument(
        "models", nargs="+", help="The fine-tuned models: the final/ directories `realm-hf finetune` writes, each with "
        "its index/.",
    )
    parser.add_argument("--output", required=True, help="Where the averaged model and a copy of the index go.")
    parser.add_argument(
        "--weights", nargs="+", type=float, default=None, metavar="W",
        help="One weight per model, summing to 1 (default: uniform). E.g. a fine-tuning's start and its final/ with "
        "--weights 0.5 0.5 (WiSE-FT).",
    )


def _add_training_commands(subparsers) -> None:
    for name, help_text in TRAINING_COMMANDS.items():
        subparsers.add_parser(name, help=help_text, add_help=False)


# ------------------------------------------------------------------------------------- Hub: publish / download
def _add_publish(subparsers) -> None:
    parser = subparsers.add_parser(
        "publish", help="Push a saved model (+ card) to the Hub and its index (<model-dir>/index) as a dataset repo."
    )
    parser.add_argument("--model-dir", required=True, help="A saved RealmForOpenQA / RealmRetriever dir, or a pre-training final/ dir.")
    parser.add_argument("--repo-id", required=True, help="The model repo, ORG/NAME.")
    parser.add_argument("--index-repo-id", default=None, help="The index dataset repo (default: <repo-id>-index).")
    parser.add_argument("--index-dir", default=None, help="The index directory (default: <model-dir>/index).")
    parser.add_argument("--eval-results", default=None, help="Evaluation output JSON whose metrics go into the card.")
    parser.add_argument("--revision", default=None, help="Branch of the model repo to commit to.")
    parser.add_argument("--private", action="store_true", help="Create the repos private.")
    parser.add_argument("--accept-index", action="store_true",
                        help="Pair the model with an index built by another doc tower (records its fingerprint).")
    parser.add_argument("--remote-code", action="store_true", help="Also make the repo loadable with trust_remote_code=True.")
    parser.add_argument("--base-model", default=None, help="Hub id of the checkpoint this model was trained from (card).")
    parser.add_argument("--corpus", default=None, help="Name of the knowledge corpus (card).")
    parser.add_argument("--license", default=None, help="License of the model (card metadata).")
    parser.add_argument("--card-output", default=None, help="Also write the rendered card here (e.g. model_cards/NAME.md).")
    parser.add_argument("--dry-run", action="store_true", help="Render and stage everything, push nothing.")


def _add_download(subparsers) -> None:
    parser = subparsers.add_parser("download", help="Download a model (or, with --index, an index) repo into the HF cache.")
    parser.add_argument("repo_id")
    parser.add_argument("--index", action="store_true", help="The repo is an index dataset repo (only the needed files).")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--local-files-only", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="realm-hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="Debug logging.")
    parser.add_argument("--debug", action="store_true", help="Show the traceback of an error (before the command).")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (_add_demo, _add_build_index, _add_search, _add_ask, _add_average, _add_convert, _add_training_commands):
        add(subparsers)
    for add in (_add_publish, _add_download):  # Hub
        add(subparsers)
    return parser


_GLOBAL_FLAGS = {"-v": "verbose", "--verbose": "verbose", "--debug": "debug"}
"""Options before the command, also for the commands whose arguments another parser reads."""


def _auto_path(value: str, option: str, auto: str, off: str, exists: Callable[[str], bool], what: str) -> str | None:
    """An absolute path from a demo option taking a path, `'auto'` (`auto` when it exists, else `None`) or `off` (`None`)."""
    from .validation import UsageError

    if value == off:
        return None
    if value == "auto":
        return os.path.abspath(auto) if exists(auto) else None
    if not exists(value):
        raise UsageError(f"{option} {value!r} does not exist; pass {what}, 'auto' or {off!r}.")
    return os.path.abspath(value)


def _demo_train_qa(value: str) -> str | None:
    """The demo's `--train-qa` folder; when 'auto' finds no shared QA sets, a warning says what the demo falls back to."""
    from .demo_data import SHARED_QA_DIR

    train_qa = _auto_path(value, "--train-qa", SHARED_QA_DIR, "titles", os.path.isdir, "the folder of the shared QA sets")
    if value == "auto" and train_qa is None:  # title probes teach the reader much less: say so
        logging.getLogger(__name__).warning(
            "No shared QA sets at %s (from %s): fine-tuning on title probes made from the corpus, which answer far "
            "fewer questions. Run from a checkout next to shared/, or pass --train-qa <folder of the QA sets>.",
            SHARED_QA_DIR, os.getcwd(),
        )
    return train_qa


# tests: the tiny init at test size (seconds)
TINY_KNOWLEDGE_RECIPE = {
    "ict_steps": 2, "ict_batch_size": 8, "reading_warmup_batch_size": 8, "batch_size": 4,
    "random_bert": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
}


def _demo(args: argparse.Namespace) -> int:
    """`realm-hf demo`: check the arguments, then the knowledge demo, or the Wikipedia Open-QA demo (its
    retrieval-only fast path or the whole of it)."""
    from .validation import UsageError, check_positive, check_texts

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
        from .demo import KnowledgeDemoSettings, run_knowledge_demo

        for name in ("entities", "steps", "eval_every"):
            check_positive(getattr(args, name), "--" + name.replace("_", "-"))
        if args.warmup_steps is not None and args.warmup_steps < 0:
            raise UsageError(f"--warmup-steps must be at least 0, got {args.warmup_steps}.")
        tiny = {"init": "tiny", "steps": 4, "reading_steps": 4, "eval_every": 2, "overrides": TINY_KNOWLEDGE_RECIPE} if args.tiny_models else {}
        requested = {"init": args.init, "num_entities": args.entities, "steps": args.steps,
                     "reading_steps": args.warmup_steps, "eval_every": args.eval_every}
        settings = KnowledgeDemoSettings(
            seed=args.seed, **{**tiny, **{name: value for name, value in requested.items() if value is not None}}
        )
        run_knowledge_demo(output, settings)
        return 0
    from .commands import DemoSettings, run_demo, run_retrieval_demo

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
    from .demo_data import DEMO_QUESTIONS_FILE

    train_qa = _demo_train_qa(args.train_qa)
    questions_file = _auto_path(args.questions_file, "--questions-file", str(DEMO_QUESTIONS_FILE), "none", os.path.isfile, "a JSONL file")
    settings = DemoSettings(
        max_articles=DEMO_INDEX_ARTICLES if args.max_articles is None else args.max_articles,
        pretrain_articles=args.pretrain_articles, pretrain_steps=args.pretrain_steps, reading_steps=args.reading_steps,
        reading_negatives=args.reading_negatives, reading_passes=args.reading_passes,
        reader_warmup_steps=args.reader_warmup_steps, finetune_steps=args.finetune_steps,
        rehearsal_questions=args.rehearsal_questions, finetune_runs=args.finetune_runs,
        reading_weight=args.reading_weight, tiny_models=args.tiny_models,
        train_qa=train_qa, train_questions=args.train_questions, questions_file=questions_file,
        train_retriever=args.train_retriever, span_normalization=args.span_normalization, seed=args.seed,
    )
    return run_demo(output, questions=args.question, settings=settings)


def _one_line(error: BaseException) -> str:
    """The message of `error` on one line (library and Hub messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def main(argv: list[str] | None = None) -> int:
    """Run `realm-hf ARGV`; returns the exit status. A bad input ends in one line on stderr and status 2 (a
    traceback with `--debug`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, position = set(), 0
    while position < len(argv) and argv[position] in _GLOBAL_FLAGS:
        flags.add(_GLOBAL_FLAGS[argv[position]])
        position += 1
    command = argv[position] if position < len(argv) else None
    try:
        return _run(argv, command, argv[position + 1 :], verbose="verbose" in flags)
    except (ValueError, OSError, ImportError) as error:  # bad inputs: a value, a path, a missing extra
        if "debug" in flags:
            raise
        from .validation import UsageError

        hint = "" if isinstance(error, UsageError) else " (run `realm-hf --debug ...` for the traceback)"
        print(f"realm-hf {command}: error: {_one_line(error)}{hint}", file=sys.stderr)
        return 2


def _run(argv: list[str], command: str | None, rest: list[str], verbose: bool) -> int:
    """Dispatch `realm-hf [global flags] COMMAND REST` (`argv` is the whole command line)."""
    # subcommands with parsers of their own get the rest of the command line as is
    if command == "convert":
        from .convert import main as convert_main

        return convert_main(rest)
    if command in TRAINING_COMMANDS:
        configure_logging(verbose=verbose)
        from .commands import training_command

        training_command(command, rest)
        return 0
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    if args.command == "demo":
        return _demo(args)
    elif args.command == "build-index":
        from .commands import build_index_command

        build_index_command(args)
    elif args.command == "search":
        from .commands import search_command

        search_command(args)
    elif args.command == "ask":
        from .commands import ask_command

        return ask_command(args)
    elif args.command == "average":
        from .commands import average_command

        average_command(args)
    elif args.command == "publish":
        from .commands import publish_command

        publish_command(args)
    elif args.command == "download":
        from .commands import download_command

        download_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
