"""Argument dataclasses filled from `--config FILE.yaml` and the command line, every name taken exactly.

A config key or a flag that is not exactly an option is refused in one line naming the nearest option
(`realm_hf.utils.options`): argparse's prefix completion would run `--max_step 5` as `--max_steps 5`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import HfArgumentParser

from ..utils.files import read_yaml_file
from ..utils.options import option_strings, refuse_unknown_arguments, unknown_option_error
from ..utils.options import UsageError

__all__ = ["command_line", "parse_arguments"]


def parse_arguments(
    dataclass_types: tuple[type, ...], argv: Sequence[str] | None = None, prog: str | None = None
) -> tuple:
    r"""
    Parse `--config file.yaml` (then command-line overrides) or plain command-line arguments into `dataclass_types`.

    Args:
        dataclass_types (`tuple[type, ...]`): The argument dataclasses, in the order they are returned.
        argv (`Sequence[str]`, *optional*): The arguments (default: `sys.argv[1:]`).
        prog (`str`, *optional*): The program's name in argparse's messages (default: the script's file name).

    Returns:
        `tuple`: one instance per dataclass type.

    Raises:
        [`UsageError`]: for a config key or an option that is not exactly an argument's name (naming the nearest
        one), or a config file that is not a mapping. `ValueError`: for a value a dataclass refuses.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = HfArgumentParser(dataclass_types, prog=prog, allow_abbrev=False)
    options = option_strings(parser)
    listing = f"`{prog} --help`" if prog else "--help"
    if "--config" in argv:
        position = argv.index("--config")
        path = argv[position + 1]
        argv = _config_arguments(path, options, listing) + argv[:position] + argv[position + 2 :]
    *parsed, remaining = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    refuse_unknown_arguments(remaining, options, listing=listing)
    return tuple(parsed)


def _config_arguments(path: str, options: list[str], listing: str) -> list[str]:
    """The command-line arguments a YAML config file stands for (`key: value` -> `--key value`; null values are
    left out); a key that is not exactly an option is refused."""
    values = read_yaml_file(path) or {}
    if not isinstance(values, dict):
        raise UsageError(f"--config {path}: expected `name: value` lines, got a YAML {type(values).__name__}.")
    keys = [option[2:] for option in options]
    args: list[str] = []
    for key, value in values.items():
        if str(key) not in keys:
            raise unknown_option_error(str(key), keys, source=f" (a key of {path})", listing=listing)
        if value is not None:
            args += [f"--{key}", str(value)]
    return args


def command_line(dataclass_types: tuple[type, ...], settings: Mapping[str, Any]) -> list[str]:
    r"""
    The command-line arguments that [`parse_arguments`] turns back into `settings` (the recorded values of a run, such
    as its `training_args.json`): `--name value` for each field of `dataclass_types` whose recorded value differs from
    its default (a required field always), in the order of the fields.

    Names that are no field are left out, and so are `None` values, which a command line cannot write (nor a config
    file: `key: null` is dropped); a field whose recorded value is `None` keeps its default when parsed.

    Args:
        dataclass_types (`tuple[type, ...]`): The argument dataclasses of the command (e.g. `realm-hf pretrain`'s).
        settings (`Mapping[str, Any]`): Field name -> recorded value.

    Returns:
        `list[str]`: the arguments, e.g. `["--output_dir", "out", "--max_steps", "4", "--use_null_document", "False"]`.
    """
    args: list[str] = []
    for dataclass_type in dataclass_types:
        for field in dataclasses.fields(dataclass_type):
            if field.name not in settings or settings[field.name] is None:
                continue
            value = settings[field.name]
            if field.default is not dataclasses.MISSING:
                default = field.default
            elif field.default_factory is not dataclasses.MISSING:
                default = field.default_factory()
            else:
                default = dataclasses.MISSING  # required: always written
            if value == default and type(value) is type(default):
                continue
            args += [f"--{field.name}", str(value)]
    return args
