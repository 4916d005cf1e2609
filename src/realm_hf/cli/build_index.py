"""`realm-hf build-index`: split a corpus into blocks, embed them with a retriever's document tower, save the index."""

from __future__ import annotations

import argparse
import os

from ..utils.options import UsageError
from ..training.validation import check_corpus, check_index_type, check_model, check_positive

RETRIEVER_MODELS = "a RealmRetriever or RealmForOpenQA directory, a BERT directory or Hub id, or 'minilm'"
"""What `--model` of `build-index` and `search` takes (named in their errors)."""


def add_parser(subparsers) -> None:
    """The `build-index` subcommand and its options."""
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


def run(args: argparse.Namespace) -> None:
    """`realm-hf build-index`: every argument checked, then the corpus split, embedded and indexed."""
    check_corpus(args.corpus, "--corpus")
    check_model(args.model, "--model", RETRIEVER_MODELS)
    check_index_type(args.index_type, "--index-type")
    for option in ("max_articles", "block_length", "batch_size"):
        check_positive(getattr(args, option), f"--{option.replace('_', '-')}")
    if os.path.isfile(args.output):
        raise UsageError(f"--output {args.output!r} is a file; pass a directory for the index.")
    from ..retrieval import build_index

    build_index(
        args.corpus, args.model, args.output, index_type=args.index_type, max_articles=args.max_articles,
        block_length=args.block_length, batch_size=args.batch_size, dtype=args.dtype,
    )
