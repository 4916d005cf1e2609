"""`realm-hf search`: the top-k blocks of an index for each query, with provenance."""

from __future__ import annotations

import argparse
import os

from ..utils.options import UsageError
from ..training.validation import check_index_dir, check_model, check_positive, check_texts
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
    check_query_tower_fits(retriever.config.embedding_size, index.manifest, args.index, args.model)
    for query, hits in zip(queries, search(index, retriever, tokenizer, queries, args.top_k)):
        print_hits(query, hits)


def _model_around(index_dir: str) -> str | None:
    """The model folder an index sits in (`<model>/index`, as trainers and `realm-hf demo` write it), or None."""
    from ..checkpoints.folders import model_around_index

    return model_around_index(index_dir)


def check_query_tower_fits(query_dim: int, manifest, index_dir: str, model: str) -> None:
    """A one-line [`UsageError`] when `--model` embeds queries in other dims than the index's: the fix is the model
    that built the index (named when the index sits in its folder; its doc-tower fingerprint otherwise)."""
    if query_dim == manifest.dim:
        return
    builder = _model_around(index_dir)
    fingerprint = f" (doc-tower fingerprint {manifest.fingerprint[:12]})" if manifest.fingerprint else ""
    fix = f"--model {builder}" if builder is not None else "--model <the model that built it>"
    raise UsageError(
        f"--model {model!r} embeds queries in {query_dim} dims but the index {index_dir!r} was built by a "
        f"{manifest.dim}-dim model{fingerprint}; search it with the model that built it: {fix}."
    )
