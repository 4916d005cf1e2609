"""`realm-hf ask`: answer questions with a RealmForOpenQA model and its index (the Open-QA pipeline), with evidence."""

from __future__ import annotations

import argparse
import sys

from ..utils.options import UsageError
from ..training.validation import check_index_dir, check_model, check_positive, check_texts
from .model_dirs import check_open_qa_model_dir
from .output import print_answers

OPEN_QA_MODELS = (
    "a RealmForOpenQA directory (e.g. <finetune output_dir>/final, or outputs/demo-wikipedia-qa/openqa/final of "
    "`realm-hf demo --recipe wikipedia-qa`) or Hub id"
)
"""What `--model` of `ask` takes (named in its errors)."""


def add_parser(subparsers) -> None:
    """The `ask` subcommand and its options."""
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
    parser.add_argument(
        "--answer-rule", default=None, choices=("marginal", "best_span"),
        help="marginal: realm_hf's answer, p(y|x) summed over spans of the same text; best_span: the single best "
        "span, as transformers' RealmForOpenQA answered (default: the model's config.answer_rule; converted "
        "checkpoints: best_span).",
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda when available).")


def run(args: argparse.Namespace) -> int:
    """`realm-hf ask`: answer each question (one per argument, or each line of stdin with --interactive) with evidence."""
    from transformers import pipeline

    from ..registration import register_auto_classes
    from ..pipelines import OPEN_QA_TASK

    if args.interactive and args.question:
        raise UsageError("pass questions or --interactive, not both")
    questions = [] if args.interactive else check_texts(
        args.question, "question", 'realm-hf ask "who wrote hamlet" --model DIR (or --interactive)'
    )
    check_open_qa_model_dir(args.model, "--model")
    check_model(args.model, "--model", OPEN_QA_MODELS)
    if args.index is not None:
        check_index_dir(args.index, "--index")
    check_positive(args.top_k, "--top-k")
    check_positive(args.answers, "--answers")
    register_auto_classes()  # the task, whatever was imported before
    qa = pipeline(OPEN_QA_TASK, model=args.model, index=args.index, device=args.device, answer_rule=args.answer_rule)
    call_kwargs = {"top_k": args.answers}
    if args.top_k is not None:
        call_kwargs["num_blocks"] = args.top_k

    def answer(question: str) -> bool:
        try:
            result = qa(question, **call_kwargs)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return False
        print_answers(question, result if isinstance(result, list) else [result])
        return True

    if not args.interactive:
        answered = []
        for position, question in enumerate(questions):
            if position:
                print()
            answered.append(answer(question))
        return 0 if all(answered) else 2
    prompt = sys.stdin.isatty()
    while True:
        if prompt:
            print("question> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:  # EOF
            break
        if line.strip():
            answer(line.strip())
            print()
    return 0
