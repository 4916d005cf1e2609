"""`realm-hf search`: the top-k blocks of an index for each query, with provenance."""

from __future__ import annotations

import argparse

from ..validation import check_index_dir, check_model, check_positive, check_texts
from .build_index import RETRIEVER_MODELS
from .output import print_hits

def add_parser(subparsers) -> None:
    """The `search` subcommand and its options."""
    parser = subparsers.add_parser("search", help="Retrieve the top-k blocks of an index for each query.")
    parser.add_argument("--index", required=True, help="An index directory (from build-index or a trainer's final/index).")
    parser.add_argument(
        "--model", default="minilm",
        help="Whose query tower embeds the queries: the model that built the index (default: 'minilm').",
    )
    parser.add_argument("-k", "--top-k", type=int, default=5, help="Blocks shown per query (default: %(default)s).")
    parser.add_argument("query", nargs="+", help="One or more queries, each quoted: \"who wrote hamlet\" \"what is dna\".")


def run(args: argparse.Namespace) -> None:
    """`realm-hf search`: the top-k blocks of each query (one per argument)."""
    queries = check_texts(args.query, "query", 'realm-hf search --index DIR "who wrote hamlet"')
    check_index_dir(args.index, "--index")
    check_model(args.model, "--model", RETRIEVER_MODELS)
    check_positive(args.top_k, "--top-k")
    from ..index import RealmIndex
    from ..retrieval import load_retriever, search

    index = RealmIndex.from_pretrained(args.index)
    retriever, tokenizer = load_retriever(args.model)
    for query, hits in zip(queries, search(index, retriever, tokenizer, queries, args.top_k)):
        print_hits(query, hits)
