"""`realm-hf publish`: push a saved model (+ card) to the Hub, and its index as a dataset repo."""

from __future__ import annotations

import argparse
import os

from ..utils.options import UsageError

def add_parser(subparsers) -> None:
    """The `publish` subcommand and its options."""
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
    parser.add_argument("--corpus", default=None, help="Name of the knowledge corpus Z (card).")
    parser.add_argument("--pretraining-corpus", default=None,
                        help="Name of the pre-training corpus X of a pre-training run, when it is another corpus (card).")
    parser.add_argument("--license", default=None, help="License of the model (card metadata).")
    parser.add_argument("--card-output", default=None, help="Also write the rendered card here (e.g. model_cards/NAME.md).")
    parser.add_argument("--dry-run", action="store_true", help="Render and stage everything, push nothing.")


def run(args: argparse.Namespace) -> None:
    """Push the model (+ card) and its index; print the repos and the index commit pinned in the config."""
    from ..hub import publish

    if not os.path.isdir(args.model_dir):
        raise UsageError(f"--model-dir {args.model_dir!r}: no such directory; pass a saved model directory.")
    for option in ("eval_results", "index_dir"):
        value = getattr(args, option)
        if value is not None and not os.path.exists(value):
            raise UsageError(f"--{option.replace('_', '-')} {value!r}: no such file or directory.")
    facts = {key: value for key, value in (
        ("base_model", args.base_model), ("corpus", args.corpus), ("pretraining_corpus", args.pretraining_corpus),
        ("license", args.license),
    ) if value is not None}
    result = publish(
        args.model_dir, args.repo_id, index_repo_id=args.index_repo_id, eval_results=args.eval_results,
        index_dir=args.index_dir, revision=args.revision, private=args.private or None,
        accept_index=args.accept_index, remote_code=args.remote_code, card_facts=facts,
        card_output=args.card_output, dry_run=args.dry_run,
    )
    if args.dry_run:
        print(f"Dry run: would push {len(result.model_files)} files to {result.repo_id}: {', '.join(result.model_files)}")
        if result.index_repo_id:
            print(f"Dry run: would push the index to dataset repo {result.index_repo_id}")
        return
    print(f"Model: {getattr(result.model_commit, 'commit_url', result.repo_id)}")
    if result.index_repo_id:
        print(f"Index: {result.index_repo_id} @ {result.index_revision}")
