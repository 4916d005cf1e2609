"""`realm-hf pretrain | mask | ict | mlm | finetune | evaluate`: the training and evaluation jobs, with the arguments and code of
examples/*.py (dataclass fields parsed by `realm_hf.training.entry_points`, not by argparse here)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

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


def _option_value(argv: list[str], option: str) -> str | None:
    """The value of `option` on the command line (`--option VALUE` or `--option=VALUE`; the last one wins)."""
    value = None
    for position, argument in enumerate(argv):
        if argument == option and position + 1 < len(argv):
            value = argv[position + 1]
        elif argument.startswith(option + "="):
            value = argument[len(option) + 1 :]
    return value


def run(command: str, argv: list[str]) -> None:
    """`realm-hf pretrain | ict | finetune | evaluate ARGS`: the entry point the example script of the job calls."""
    from ..training.entry_points import ENTRY_POINTS

    if command == "evaluate" and (model := _option_value(argv, "--model")) is not None:
        from .model_dirs import check_open_qa_model_dir

        check_open_qa_model_dir(model, "--model")  # before transformers reads a pre-training output as one

    ENTRY_POINTS[command](argv, prog=f"realm-hf {command}")


def _output_dir(argv: list[str]) -> str | None:
    """`--output_dir` of a training command line, or of its `--config` file."""
    value = _option_value(argv, "--output_dir")
    config = _option_value(argv, "--config")
    if value is None and config is not None and os.path.isfile(config):
        import yaml

        with open(config, encoding="utf-8") as f:
            loaded = yaml.safe_load(f)
        value = loaded.get("output_dir") if isinstance(loaded, dict) else None
    return value


def _interrupted_loop(interrupt: BaseException):
    """The training loop whose `train()` the interrupt stopped (found in the traceback's frames), or None when the
    interrupt came before the loop was made (data preparation, model loading)."""
    from ..training.loop import TrainingLoop

    found, frame = None, interrupt.__traceback__
    while frame is not None:
        candidate = frame.tb_frame.f_locals.get("self")
        if isinstance(candidate, TrainingLoop):
            found = candidate
        frame = frame.tb_next
    return found


def interrupted_line(
    argv: list[str], command: str, rest: list[str], interrupt: BaseException, program: Sequence[str] = ("realm-hf",)
) -> str:
    """
    The one line printed for Ctrl-C during `realm-hf COMMAND`: the step reached, the last complete checkpoint (or
    none) and the command that resumes from it.

    Args:
        argv (`list[str]`): The whole command line after `realm-hf` (global flags included), to repeat in the resume
            command.
        command (`str`): The training command.
        rest (`list[str]`): Its arguments.
        interrupt (`BaseException`): The `KeyboardInterrupt`.
        program (`Sequence[str]`, defaults to `("realm-hf",)`): What ran `argv`, to start the resume command with
            (`("python", "examples/pretrain.py")` for an example script, whose `argv` has no command).
    """
    import shlex

    from ..training.loop import latest_checkpoint

    loop = _interrupted_loop(interrupt)
    name = f"realm-hf {command}" if tuple(program) == ("realm-hf",) else os.path.basename(program[-1])
    if command not in ("pretrain", "ict", "mlm", "finetune"):
        return f"{name}: interrupted."
    output_dir = loop.args.output_dir if loop is not None else _output_dir(rest)
    checkpoint = latest_checkpoint(output_dir) if output_dir and os.path.isdir(output_dir) else None
    kept, skip = [], False
    for argument in argv:  # the same command line, with --resume_from_checkpoint latest
        if skip or argument.startswith("--resume_from_checkpoint="):
            skip = False
            continue
        if argument == "--resume_from_checkpoint":
            skip = True
            continue
        kept.append(argument)
    resume = shlex.join([*program, *kept, "--resume_from_checkpoint", "latest"])
    where = f"at step {loop.step} of {loop.args.max_steps}" if loop is not None else "before the first step"
    if checkpoint is None:
        return (
            f"{name}: interrupted {where}; no checkpoint saved yet (--save_steps N saves every N steps), "
            f"so `{resume}` starts again from step 0."
        )
    return f"{name}: interrupted {where}; last checkpoint {checkpoint}; resume with: {resume}"


def report_interrupt(
    argv: list[str], command: str, rest: list[str], interrupt: BaseException, program: Sequence[str] = ("realm-hf",)
) -> int:
    """Close the progress bars the interrupt left open, print [`interrupted_line`] to stderr; the exit status 130."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):  # the bars the interrupt left open end above the line
        bar.close()
    print(interrupted_line(argv, command, rest, interrupt, program), file=sys.stderr)
    return 130


def run_example(command: str, job: Callable[[list[str]], object]) -> int:
    r"""
    Run an example script's job (`examples/pretrain.py` -> `main_pretrain`) on `sys.argv[1:]`; Ctrl-C ends it as it
    ends `realm-hf COMMAND`: one line with the step reached, the last checkpoint and the command that resumes.

    Args:
        command (`str`): The job's `realm-hf` command (`pretrain`, `ict`, `mlm`, `finetune`, `evaluate`).
        job (`Callable`): Its entry point ([`realm_hf.training.entry_points.ENTRY_POINTS`]).

    Returns:
        `int`: the exit status (0; 2 when a setting is refused, in one line, as `realm-hf` refuses it; 130 when
        interrupted).
    """
    from ..utils.options import UsageError

    argv = sys.argv[1:]
    try:
        job(argv)
    except KeyboardInterrupt as interrupt:
        return report_interrupt(argv, command, argv, interrupt, program=("python", sys.argv[0]))
    except UsageError as refused:
        print(f"{os.path.basename(sys.argv[0])}: error: {refused}", file=sys.stderr)
        return 2
    return 0
