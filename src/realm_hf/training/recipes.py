"""Named pre-training recipes: documented YAML files shipped in the package (`realm_hf/recipes/NAME.yaml`).

A recipe is a set of `realm-hf pretrain` settings with a name (`--recipe paper`); a `--config` file and the command
line override it, and a run that names none runs [`DEFAULT_RECIPE`]. Each file's first comment line is its summary
(what `realm-hf pretrain --help` lists); the comments below it say what the recipe does and why.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ..utils.files import read_yaml_file
from ..utils.options import UsageError

__all__ = ["DEFAULT_RECIPE", "load_recipe", "recipe_names", "recipe_summaries"]

DEFAULT_RECIPE = "cold-start"
"""The recipe of a run that names none: the default start (all-MiniLM-L6-v2) cannot read yet."""


def _recipes_folder():
    return resources.files("realm_hf") / "recipes"


@functools.cache
def recipe_names() -> tuple[str, ...]:
    """The shipped recipes' names, sorted (`("cold-start", "paper")`)."""
    return tuple(sorted(entry.name[: -len(".yaml")] for entry in _recipes_folder().iterdir()
                        if entry.name.endswith(".yaml")))


def _recipe_path(name: str) -> str:
    if name not in recipe_names():
        raise UsageError(f"--recipe {name!r} is not a recipe; choose one of: {', '.join(recipe_names())}.")
    return str(_recipes_folder() / f"{name}.yaml")


def load_recipe(name: str) -> dict[str, Any]:
    r"""
    The settings of the recipe `name`: field name -> value (`None`: the option's built-in default).

    Args:
        name (`str`): One of [`recipe_names`].

    Returns:
        `dict[str, Any]`: the recipe's settings, e.g. `{"null_document_score": "embedding", ...}` for `"paper"`.

    Raises:
        [`UsageError`]: for a name that is no recipe (naming the choices).
    """
    settings = read_yaml_file(_recipe_path(name)) or {}
    if not isinstance(settings, dict):
        raise ValueError(f"recipe {name}: expected `name: value` lines, got a YAML {type(settings).__name__}.")
    return settings


def recipe_summaries() -> dict[str, str]:
    """Recipe name -> its one-line summary (the first comment line of its file)."""
    summaries = {}
    for name in recipe_names():
        with open(_recipe_path(name), encoding="utf-8") as f:
            first = f.readline()
        summaries[name] = first.lstrip("#").strip()
    return summaries
