"""The `realm-hf` command.

    realm-hf demo [--output DIR] [--entities N] [--steps N] [--init minilm-cls|minilm|tiny]
                                              REALM pre-training on a synthetic knowledge corpus, retriever trained vs
                                              frozen: documents retrieved and blanks filled, before and after (CPU,
                                              about 5 minutes; outputs/demo/realm/final, outputs/demo/control/final)
    realm-hf demo --recipe wikipedia-qa [--max-articles N] [--pretrain-steps N] [--finetune-steps N]
                                              pre-train, read, fine-tune, answer on the embedded Wikipedia lead sections
                                              (CPU, tens of minutes; outputs/demo-wikipedia-qa/openqa/final)
    realm-hf demo --recipe wikipedia-qa --retrieval-only   only index the embedded corpus with MiniLM and retrieve
    realm-hf build-index --corpus ... --model ... --output DIR [--index-type Flat]
    realm-hf search --index DIR --model ... "query" ["query" ...] [-k 5]
    realm-hf convert --src OLD_REALM_DIR --output DIR [--kind embedder|encoder|reader|openqa]
    realm-hf ask "question" ["question" ...] --model DIR [--index DIR] [-k 5] [--answers 1]
    realm-hf ask --interactive --model DIR            questions from stdin, one per line, until EOF
    realm-hf average RUN0/final RUN1/final [...] --output DIR   the weight average (model soup) of fine-tunings
    realm-hf publish --model-dir DIR --repo-id ORG/NAME [--index-repo-id ORG/NAME-index] [--eval-results FILE]
    realm-hf download REPO_ID [--index] [--revision REV]   snapshot into the HF cache, print the local path

Training and evaluation (the same arguments and code as examples/*.py; `realm-hf <command> --help` lists them):
    realm-hf pretrain --config examples/configs/cpu-tiny.yaml [--max_steps N ...]    REALM pre-training
    realm-hf ict --config examples/configs/ict-cpu-tiny.yaml                         ICT warm start of the retriever
    realm-hf mlm --config examples/configs/wiki-tiny-mlm.yaml                        masked-LM start of the encoder
    realm-hf finetune --config examples/configs/openqa-cpu-tiny.yaml                 Open-QA fine-tuning
    realm-hf evaluate --model DIR --qa_file FILE.jsonl [--max_questions N]           Open-QA evaluation
    accelerate launch -m realm_hf.cli finetune --config ...                          the same, under Accelerate
    accelerate launch examples/finetune_openqa.py --config ...                       the same, as a script (also
                                       examples/pretrain.py, ict.py, evaluate_openqa.py)

A bad input ends in one line naming the value and the fix, exit status 2; `realm-hf --debug <command> ...` shows the
traceback instead. `-v` before the command turns on debug logging.
"""

# This docstring is `realm-hf --help`. The package: one module per subcommand (demo, build_index, search, ask, average,
# convert, training, publish, download), each with the subcommand's arguments and a `run` that calls the library;
# here, the parser they make together, the dispatch and the one-line error of a bad input.

from __future__ import annotations

import argparse
import sys

from ..utils.options import StrictArgumentParser
from ..utils.quiet import configure_logging, hide_deepspeed_cpu_notice
from . import ask, average, build_index, convert, demo, download, publish, search, training

COMMANDS = {
    "demo": demo, "build-index": build_index, "search": search, "ask": ask, "average": average, "publish": publish,
    "download": download,
}
"""Subcommands parsed here, each by its module's `add_parser`, run by its `run(args)`."""


def build_parser() -> argparse.ArgumentParser:
    """The `realm-hf` parser: its subcommands' parsers take option names only whole (`StrictArgumentParser`)."""
    parser = StrictArgumentParser(prog="realm-hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="Debug logging.")
    parser.add_argument("--debug", action="store_true", help="Show the traceback of an error (before the command).")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in (demo.add_parser, build_index.add_parser, search.add_parser, ask.add_parser, average.add_parser,
                convert.add_parser, training.add_parsers):
        add(subparsers)
    for add in (publish.add_parser, download.add_parser):  # Hub
        add(subparsers)
    return parser


_GLOBAL_FLAGS = {"-v": "verbose", "--verbose": "verbose", "--debug": "debug"}
"""Options before the command, also for the commands whose arguments another parser reads."""


def _one_line(error: BaseException) -> str:
    """The message of `error` on one line (library and Hub messages may span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def main(argv: list[str] | None = None) -> int:
    """Run `realm-hf ARGV`; returns the exit status. A bad input ends in one line on stderr and status 2 (a
    traceback with `--debug`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, position = set(), 0
    while position < len(argv) and argv[position] in _GLOBAL_FLAGS:
        flags.add(_GLOBAL_FLAGS[argv[position]])
        position += 1
    command = argv[position] if position < len(argv) else None
    if "verbose" not in flags:
        hide_deepspeed_cpu_notice()  # accelerate imports DeepSpeed when installed, used or not (utils.quiet)
    try:
        return _run(argv, command, argv[position + 1 :], verbose="verbose" in flags)
    except (ValueError, OSError, ImportError) as error:  # bad inputs: a value, a path, a missing extra
        if "debug" in flags:
            raise
        from ..utils.options import UsageError

        hint = "" if isinstance(error, UsageError) else " (run `realm-hf --debug ...` for the traceback)"
        print(f"realm-hf {command}: error: {_one_line(error)}{hint}", file=sys.stderr)
        return 2


def _run(argv: list[str], command: str | None, rest: list[str], verbose: bool) -> int:
    """Dispatch `realm-hf [global flags] COMMAND REST` (`argv` is the whole command line)."""
    # subcommands with parsers of their own get the rest of the command line as is
    if command == "convert":
        return convert.run(rest)
    if command in training.TRAINING_COMMANDS:
        configure_logging(verbose=verbose)
        try:
            training.run(command, rest)
        except KeyboardInterrupt as interrupt:  # Ctrl-C: where it stopped and how to resume, not a traceback
            return training.report_interrupt(argv, command, rest, interrupt)
        return 0
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    status = COMMANDS[args.command].run(args)
    return 0 if status is None else status
