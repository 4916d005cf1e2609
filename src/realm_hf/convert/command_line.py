"""`python -m realm_hf.convert` (and `realm-hf convert`): convert one old checkpoint directory."""

from __future__ import annotations

from collections.abc import Sequence

from ..utils.options import StrictArgumentParser
from ..utils.quiet import configure_logging
from .checkpoint import KIND_ALIASES
from .converters import convert_checkpoint

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """`realm-hf convert --src OLD_DIR --output NEW_DIR [--kind ...] [--index-type ...] [--no-corpus] [--overwrite]`."""
    parser = StrictArgumentParser(
        prog="realm-hf convert",
        description="Convert a transformers-REALM (google/realm-*) checkpoint folder to realm_hf. An old "
        "RealmForOpenQA folder (with block_records.npy) becomes a folder that `realm-hf ask --model NEW` and "
        "pipeline('realm-open-qa', model=NEW) answer with: weights, tokenizer and its corpus index. Nothing is "
        "unpickled.",
    )
    parser.add_argument("--src", required=True, help="Old checkpoint folder (config.json + weights), or its Hub id.")
    parser.add_argument("--output", required=True, help="New directory for the converted folder.")
    parser.add_argument("--kind", default=None, choices=sorted(KIND_ALIASES), help="Detected when omitted.")
    parser.add_argument(
        "--index-type", default=None,
        help="openqa: index type of <output>/index (default: Flat up to 2M blocks, IVF4096,SQ8 above; any type "
        "`realm-hf build-index` takes).",
    )
    parser.add_argument("--no-corpus", action="store_true", help="openqa: convert the weights only, no index.")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output folder.")
    parser.add_argument("--source-id", default=None,
                        help="Hub id of the source checkpoint, for the model card (told from the path when omitted).")
    parser.add_argument("--block-embeddings", default=None, help="openqa only: also write block_emb to this .safetensors.")
    parser.add_argument("--mask-token-id", type=int, default=None, help="encoder only, when there is no vocab.txt.")
    args = parser.parse_args(argv)
    configure_logging()  # leaves a root logger that has handlers as it is
    convert_checkpoint(
        args.src,
        args.output,
        kind=args.kind,
        block_embeddings_path=args.block_embeddings,
        mask_token_id=args.mask_token_id,
        corpus=not args.no_corpus,
        index_type=args.index_type,
        overwrite=args.overwrite,
        source_id=args.source_id,
    )
    return 0
