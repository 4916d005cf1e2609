"""Argument dataclasses filled from a named recipe, `--config FILE.yaml` and the command line, every name taken exactly.

Precedence: a recipe (`--recipe NAME` or a config's `recipe:` key, `realm_hf.training.recipes`; only for dataclasses
with a `recipe` field, where a run that names none runs the default recipe) < the `--config` file < the command line.
`null` (a config's `key: null`, or `--key null`) sets an option back to its built-in default, e.g. to drop a recipe's
gate. A config key or a flag that is not exactly an option is refused in one line naming the nearest option
(`realm_hf.utils.options`): argparse's prefix completion would run `--max_step 5` as `--max_steps 5`; an option that
was removed is refused with what to use instead ([`REMOVED_OPTIONS`]).
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
from .recipes import DEFAULT_RECIPE, load_recipe

__all__ = ["REMOVED_OPTIONS", "command_line", "parse_arguments"]

REMOVED_OPTIONS = {
    "encoder_freeze_steps": "the reading loss keeps the encoder reading: use --reading_loss_weight (e.g. 30; "
    "docs/experiments.md)",
    "reading_replay_every": "a reading loss beside every step keeps the encoder reading without idling the retriever: "
    "use --reading_loss_weight (e.g. 30; docs/experiments.md)",
    "retriever_freeze_steps": "the retriever starts after the reading warm-up (--reading_warmup_steps) or once the "
    "gate opens (--retriever_gate_utility); --retriever_learning_rate 0 freezes it for the whole run",
    "reader_warmup_steps": "renamed: use --evidence_steps (the first steps read each question's evidence block alone)",
    "reader_warmup_depth": "renamed: use --evidence_search_depth (blocks searched for each question's evidence block)",
    "reader_warmup_negatives": "renamed: use --evidence_negatives (hard negatives read beside each evidence block)",
    **{
        name: "the index builder's resources are fixed per --refresh_mode (docs/index.md); from Python, pass "
        "RealmPretrainer(..., resources=refresh_resources(...))"
        for name in ("refresh_threads", "refresh_niceness", "refresh_trainer_threads")
    },
}
"""Options that were removed or renamed -> what to use instead (a config or command line naming one is refused with
it)."""


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
    argv = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith(("--config=", "--recipe=")) else [arg])]
    parser = HfArgumentParser(dataclass_types, prog=prog, allow_abbrev=False)
    options = option_strings(parser)
    listing = f"`{prog} --help`" if prog else "--help"
    keys = [option[2:] for option in options]
    settings: dict[str, Any] = {}
    if "--config" in argv:
        position = argv.index("--config")
        settings = _config_settings(argv[position + 1], keys, listing)
        argv = argv[:position] + argv[position + 2 :]
    _refuse_removed(argv)
    argv, defaults = _null_flags(argv)
    for key in defaults:
        if key not in keys:
            raise unknown_option_error(f"--{key}", options, listing=listing)
        settings[key] = None
    if "recipe" in keys:
        name = _flag_value(argv, "--recipe") or settings.get("recipe") or DEFAULT_RECIPE
        settings = {**load_recipe(name), **settings, "recipe": name}
    args = [part for key, value in settings.items() if value is not None for part in (f"--{key}", str(value))]
    *parsed, remaining = parser.parse_args_into_dataclasses(args=args + argv, return_remaining_strings=True)
    refuse_unknown_arguments(remaining, options, listing=listing)
    return tuple(parsed)


def _config_settings(path: str, keys: list[str], listing: str) -> dict[str, Any]:
    """The settings of a YAML config file (`key: value`; `null`: the option's default); a key that is not exactly an
    option is refused."""
    values = read_yaml_file(path) or {}
    if not isinstance(values, dict):
        raise UsageError(f"--config {path}: expected `name: value` lines, got a YAML {type(values).__name__}.")
    for key in values:
        if str(key) in REMOVED_OPTIONS:
            raise _removed_error(str(key), f" (a key of {path})")
        if str(key) not in keys:
            raise unknown_option_error(str(key), keys, source=f" (a key of {path})", listing=listing)
    return {str(key): value for key, value in values.items()}


def _removed_error(name: str, source: str = "") -> UsageError:
    return UsageError(f"--{name}{source} was removed: {REMOVED_OPTIONS[name]}.")


def _refuse_removed(argv: Sequence[str]) -> None:
    for argument in argv:
        name = argument.split("=", 1)[0][2:] if argument.startswith("--") else None
        if name in REMOVED_OPTIONS:
            raise _removed_error(name)


def _null_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """`argv` without its `--key null` pairs, and those keys (each set back to its default, over a recipe or config)."""
    kept, nulls, position = [], [], 0
    while position < len(argv):
        argument = argv[position]
        if argument.startswith("--") and position + 1 < len(argv) and argv[position + 1] in ("null", "None"):
            nulls.append(argument[2:])
            position += 2
            continue
        kept.append(argument)
        position += 1
    return kept, nulls


def _flag_value(argv: Sequence[str], option: str) -> str | None:
    """The last value of `option` in `argv` (`--option VALUE`), or None."""
    values = [argv[i + 1] for i, argument in enumerate(argv[:-1]) if argument == option]
    return values[-1] if values else None


def command_line(dataclass_types: tuple[type, ...], settings: Mapping[str, Any]) -> list[str]:
    r"""
    The command-line arguments that [`parse_arguments`] turns back into `settings` (the recorded values of a run, such
    as its `training_args.json`): `--name value` for each field of `dataclass_types` whose recorded value differs from
    its default (a required field always), in the order of the fields.

    With a recorded `recipe`, a value is compared with the recipe's (which the command line then names); a `None`
    where the recipe sets a value is written `--name null` (the option's default). Names that are no field are left
    out, and so are other `None` values (a field whose recorded value is `None` keeps its default when parsed).

    Args:
        dataclass_types (`tuple[type, ...]`): The argument dataclasses of the command (e.g. `realm-hf pretrain`'s).
        settings (`Mapping[str, Any]`): Field name -> recorded value.

    Returns:
        `list[str]`: the arguments, e.g. `["--output_dir", "out", "--max_steps", "4", "--use_null_document", "False"]`.
    """
    recipe = load_recipe(settings["recipe"]) if settings.get("recipe") else {}
    args: list[str] = []
    for dataclass_type in dataclass_types:
        for field in dataclasses.fields(dataclass_type):
            if field.name not in settings:
                continue
            value = settings[field.name]
            if field.default is not dataclasses.MISSING:
                default = field.default
            elif field.default_factory is not dataclasses.MISSING:
                default = field.default_factory()
            else:
                default = dataclasses.MISSING  # required: always written
            default = recipe.get(field.name, default) if recipe.get(field.name) is not None else default
            if value is None:
                if field.name in recipe and recipe[field.name] is not None:
                    args += [f"--{field.name}", "null"]  # the recipe's value, set back to the option's default
                continue
            if value == default and type(value) is type(default):
                continue
            args += [f"--{field.name}", str(value)]
    return args
