"""`realm-hf convert`: a transformers-REALM (google/realm-*) checkpoint to realm_hf (`realm_hf.convert`)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    """The `convert` subcommand; its arguments and `--help` are `realm_hf.convert`'s own."""
    subparsers.add_parser(
        "convert", help="Convert a transformers-REALM (google/realm-*) checkpoint (see `realm-hf convert -h`).",
        add_help=False,
    )


def run(argv: list[str]) -> int:
    """`realm-hf convert ARGV`."""
    from ..convert import main as convert_main

    return convert_main(argv)
