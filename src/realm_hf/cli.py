"""The `realm-hf` command.

    realm-hf demo [--max-articles N]          build an index over the embedded default corpus and retrieve with provenance
    realm-hf build-index --corpus ... --model ... --output DIR [--index-type Flat]
    realm-hf search --index DIR --model ... "query" [-k 5]
    realm-hf convert --src OLD_REALM_DIR --output DIR [--kind embedder|encoder|reader|openqa]
"""

from __future__ import annotations

import argparse
import logging
import sys


def _add_demo(subparsers) -> None:
    parser = subparsers.add_parser("demo", help="Index the embedded default corpus and answer a few questions with provenance.")
    parser.add_argument("--max-articles", type=int, default=None, help="Index only the first N articles (default: all 10,033).")
    parser.add_argument("--output", default="outputs/demo-index", help="Where the index is saved.")
    parser.add_argument("--question", action="append", default=None, help="A question to ask (repeatable).")
    parser.add_argument("-k", "--top-k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)


def _add_build_index(subparsers) -> None:
    parser = subparsers.add_parser("build-index", help="Split a corpus into blocks, embed them and save a MIPS index.")
    parser.add_argument("--corpus", required=True, help="JSONL / JSONL.gz / Parquet file(s), a directory, or 'embedded'.")
    parser.add_argument("--model", default="minilm", help="A RealmRetriever / RealmForOpenQA directory, a BERT, or 'minilm'.")
    parser.add_argument("--output", required=True)
    parser.add_argument("--index-type", default="Flat", help="faiss factory string (Flat, HNSW32, IVF4096,PQ32, SQfp16) or torch-exact.")
    parser.add_argument("--max-articles", type=int, default=None)
    parser.add_argument("--block-length", type=int, default=288)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])


def _add_search(subparsers) -> None:
    parser = subparsers.add_parser("search", help="Retrieve the top-k blocks of an index for a query.")
    parser.add_argument("--index", required=True)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("-k", "--top-k", type=int, default=5)
    parser.add_argument("query", nargs="+")


def _add_convert(subparsers) -> None:
    subparsers.add_parser(
        "convert", help="Convert a transformers-REALM (google/realm-*) checkpoint (see `realm-hf convert -h`).",
        add_help=False,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="realm-hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (_add_demo, _add_build_index, _add_search, _add_convert):
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["convert"]:
        from .convert import main as convert_main

        return convert_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.command == "demo":
        from .commands import run_demo

        run_demo(
            max_articles=args.max_articles, output=args.output, questions=args.question,
            top_k=args.top_k, batch_size=args.batch_size,
        )
    elif args.command == "build-index":
        from .commands import build_index_command

        build_index_command(args)
    elif args.command == "search":
        from .commands import search_command

        search_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
