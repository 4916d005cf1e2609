"""Option names taken exactly, on the command line and in `--config` files alike.

argparse completes an unambiguous prefix (`--max_step 5` runs as `--max_steps 5`) and a config file's keys became
flags, so a typo could run as another option without a word. Here a name that is not exactly an option is refused
in one line that names the nearest option ([`difflib`]); every parser of the package (the `realm-hf` subcommands,
the training and evaluation jobs, `python -m realm_hf.convert`) goes through it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence

__all__ = [
    "StrictArgumentParser", "UsageError", "nearest_option", "option_strings", "refuse_unknown_arguments",
    "unknown_option_error",
]


class UsageError(ValueError):
    """A command-line value that cannot work; the message is one line naming the value and the fix. The CLI prints it
    without a traceback and exits with status 2 (the checks that raise it: `realm_hf.training.validation`)."""


def nearest_option(name: str, options: Iterable[str]) -> str | None:
    """The option of `options` closest to `name` (difflib's ratio of at least 0.6), or None."""
    close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_option_error(name: str, options: Iterable[str], source: str = "", listing: str = "--help") -> UsageError:
    r"""
    The one-line error of an option name that is not exactly an option.

    Args:
        name (`str`): The name given, as written (`"--max_step"`, or a config key `"max_step"`).
        options (`Iterable[str]`): The accepted names, written the same way.
        source (`str`, *optional*): Where the name was given, e.g. `" in examples/configs/cpu-tiny.yaml"`.
        listing (`str`, defaults to `"--help"`): What lists the accepted names, for the message.
    """
    near = nearest_option(name, options)
    hint = f"did you mean {near}?" if near else f"run with {listing} for the accepted ones."
    return UsageError(f"{name}{source} is not an option; {hint}")


def refuse_unknown_arguments(remaining: Sequence[str], options: Iterable[str], listing: str = "--help") -> None:
    r"""
    Refuse the arguments a parser left unused: the first one that looks like an option (`--name` or `--name=VALUE`)
    with the nearest accepted option, else the first stray value.

    Args:
        remaining (`Sequence[str]`): The unused command-line arguments.
        options (`Iterable[str]`): The accepted option strings (`"--max_steps"`, ...).
        listing (`str`, defaults to `"--help"`): What lists the accepted options, for the message.

    Raises:
        [`UsageError`]: when `remaining` is not empty.
    """
    options = list(options)
    for argument in remaining:
        if argument.startswith("-") and not _is_number(argument):
            raise unknown_option_error(argument.split("=", 1)[0], options, listing=listing)
    if remaining:
        raise UsageError(
            f"unexpected value {remaining[0]!r}: a value follows its option (--name VALUE); run with {listing} for "
            "the accepted options."
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """The long option strings `parser` accepts (`--name`), in the order they were added."""
    return [option for action in parser._actions for option in action.option_strings if option.startswith("--")]


class StrictArgumentParser(argparse.ArgumentParser):
    r"""
    An `argparse.ArgumentParser` that takes option names only whole (`allow_abbrev=False`) and refuses an unknown one
    in one line naming the nearest option (`PROG: error: ...`, exit status 2) instead of argparse's usage block.
    Subcommand parsers made by its `add_subparsers` are of this class too (argparse's default `parser_class` is the
    parent's class).
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        namespace, remaining = super().parse_known_args(args, namespace)
        self._refuse(remaining)
        return namespace, remaining

    def error(self, message: str):
        """argparse's error (a required option missing, a bad value), unless an unknown option explains it: a
        misspelt required option is named with its nearest option, not reported missing."""
        if self._subparsers is None:  # a parser with subcommands sees their options too
            options = option_strings(self)
            self._refuse([arg for arg in getattr(self, "_given", []) if arg.startswith("--") and arg != "--"
                          and arg.split("=", 1)[0] not in options])
        super().error(message)

    def _refuse(self, remaining: Sequence[str]) -> None:
        try:
            refuse_unknown_arguments(remaining, option_strings(self), listing=f"`{self.prog} --help`")
        except UsageError as error:
            self.exit(2, f"{self.prog}: error: {error}\n")
