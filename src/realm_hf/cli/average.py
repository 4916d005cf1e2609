"""`realm-hf average`: the weight average (model soup, WiSE-FT) of Open-QA models that share one index."""

from __future__ import annotations

import argparse
import os

from ..utils.options import UsageError

def add_parser(subparsers) -> None:
    """The `average` subcommand and its options."""
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


def run(args: argparse.Namespace) -> None:
    """Write the model soup of `args.models` to `args.output` ([`average_open_qa_models`]) and print where it went; an
    `--output` that holds anything is refused, since the soup replaces its directory as a whole."""
    from ..training.soup import average_open_qa_models, check_average_weights

    if os.path.isdir(args.output) and os.listdir(args.output):
        raise UsageError(f"--output {args.output} exists and is not empty; name a new directory for the soup.")
    try:
        weights = check_average_weights(args.weights, len(args.models))
    except ValueError as error:
        raise UsageError(f"--weights: {error}") from None
    print(average_open_qa_models(args.models, args.output, weights))
