"""`realm-hf download`: snapshot a model repo (or the files an index needs) into the Hugging Face cache."""

from __future__ import annotations

import argparse

def add_parser(subparsers) -> None:
    """The `download` subcommand and its options."""
    parser = subparsers.add_parser("download", help="Download a model (or, with --index, an index) repo into the HF cache.")
    parser.add_argument("repo_id")
    parser.add_argument("--index", action="store_true", help="The repo is an index dataset repo (only the needed files).")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--local-files-only", action="store_true")


def run(args: argparse.Namespace) -> None:
    """Snapshot a model repo (or the files an index needs) into the HF cache and print the local path."""
    if args.index:
        from ..hub import resolve_index_dir

        path = resolve_index_dir(
            args.repo_id, revision=args.revision, cache_dir=args.cache_dir, local_files_only=args.local_files_only
        )
    else:
        from huggingface_hub import snapshot_download

        from ..hub import hub_offline

        path = snapshot_download(  # offline: the cache only (huggingface_hub < 2 would list a commit's files online)
            args.repo_id, revision=args.revision, cache_dir=args.cache_dir,
            local_files_only=args.local_files_only or hub_offline(),
        )
    print(path)
