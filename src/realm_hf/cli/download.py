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
        from huggingface_hub.errors import LocalEntryNotFoundError

        from ..hub import hub_offline
        from ..utils.options import UsageError

        offline = hub_offline()
        try:
            # offline: the cache only (huggingface_hub < 2 would list a commit's files online)
            path = snapshot_download(
                args.repo_id, revision=args.revision, cache_dir=args.cache_dir,
                local_files_only=args.local_files_only or offline,
            )
        except LocalEntryNotFoundError as error:  # its message advises `local_files_only=False`, an argument of Python
            raise UsageError(_not_cached(args, offline)) from error
    print(path)


def _not_cached(args: argparse.Namespace, offline: bool) -> str:
    """The one line for a model repo the cache lacks and the Hub cannot give: the repo and what keeps it offline."""
    repo = repr(args.repo_id) + (f" (revision {args.revision!r})" if args.revision else "")
    where = f"the Hugging Face cache {args.cache_dir!r}" if args.cache_dir else "the local Hugging Face cache"
    if offline:
        why = "HF_HUB_OFFLINE=1 is set"
        fix = "unset HF_HUB_OFFLINE to download it, or download it on a machine with access and copy the cache over"
    elif args.local_files_only:
        why, fix = "--local-files-only is set", "drop --local-files-only to download it"
    else:
        why = "the Hub cannot be reached"
        fix = "check the network (or HF_ENDPOINT), or download it on a machine with access and copy the cache over"
    return f"{repo} is not in {where} and {why}; {fix}."
