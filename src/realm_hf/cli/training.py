"""`realm-hf pretrain | mask | ict | mlm | finetune | evaluate`: the training and evaluation jobs, with the arguments and code of
examples/*.py (dataclass fields parsed by `realm_hf.training.entry_points`, not by argparse here)."""

from __future__ import annotations


TRAINING_COMMANDS = {
    "pretrain": "REALM pre-training with asynchronous index refresh (see `realm-hf pretrain --help`).",
    "mask": "Mask the pre-training sentences ahead, for `pretrain --masked_sentences` (see `realm-hf mask --help`).",
    "ict": "Inverse Cloze Task warm start of the retriever (see `realm-hf ict --help`).",
    "mlm": "Masked-LM training of the encoder's start on the corpus (see `realm-hf mlm --help`).",
    "finetune": "Open-QA fine-tuning of RealmForOpenQA (see `realm-hf finetune --help`).",
    "evaluate": "Open-QA evaluation of a saved RealmForOpenQA with its index (see `realm-hf evaluate --help`).",
}
"""Subcommands whose arguments are dataclass fields, parsed by `realm_hf.training.entry_points` (not argparse here)."""


def add_parsers(subparsers) -> None:
    """One subcommand per job; `--help` and the arguments are the job's own (`realm_hf.training.entry_points`)."""
    for name, help_text in TRAINING_COMMANDS.items():
        subparsers.add_parser(name, help=help_text, add_help=False)


def run(command: str, argv: list[str]) -> None:
    """`realm-hf pretrain | ict | finetune | evaluate ARGS`: the entry point the example script of the job calls."""
    from ..training.entry_points import ENTRY_POINTS

    ENTRY_POINTS[command](argv, prog=f"realm-hf {command}")
