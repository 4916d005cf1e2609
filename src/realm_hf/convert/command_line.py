"""`python -m realm_hf.convert` (and `realm-hf convert`): convert one old checkpoint directory."""

from __future__ import annotations

from collections.abc import Sequence

from ..utils.options import StrictArgumentParser
from ..utils.quiet import configure_logging
from .checkpoint import KIND_ALIASES
from .converters import convert_checkpoint

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m realm_hf.convert --src OLD_DIR --output NEW_DIR [--kind ...] [--block-embeddings FILE]`."""
    parser = StrictArgumentParser(
        prog="realm-hf convert", description="Convert a transformers-REALM (google/realm-*) checkpoint to realm_hf."
    )
    parser.add_argument("--src", required=True, help="Old checkpoint directory (config.json + weights).")
    parser.add_argument("--output", required=True, help="Directory for the converted model.")
    parser.add_argument("--kind", default=None, choices=sorted(KIND_ALIASES), help="Detected when omitted.")
    parser.add_argument("--block-embeddings", default=None, help="openqa only: write block_emb to this .safetensors.")
    parser.add_argument("--mask-token-id", type=int, default=None, help="encoder only, when there is no vocab.txt.")
    args = parser.parse_args(argv)
    configure_logging()  # leaves a root logger that has handlers as it is
    convert_checkpoint(
        args.src,
        args.output,
        kind=args.kind,
        block_embeddings_path=args.block_embeddings,
        mask_token_id=args.mask_token_id,
    )
    return 0

