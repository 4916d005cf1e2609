"""`realm-hf --help` texts, the README's job commands, and the one-way arrow `cli` -> `commands`."""

from __future__ import annotations

import ast
import os

import realm_hf

SRC = os.path.dirname(os.path.abspath(realm_hf.__file__))


def _imported_modules(path: str) -> set[str]:
    """Names of the package modules that a source file imports (`from .x import y` -> `x`), at any depth."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("realm_hf."):
            names.add(node.module.split(".")[1])
    return names


def test_commands_does_not_import_cli():
    """The demo defaults live in `demo_defaults`: `cli` imports `commands`, never the reverse."""
    assert "cli" not in _imported_modules(os.path.join(SRC, "commands.py"))
    assert "commands" in _imported_modules(os.path.join(SRC, "cli.py"))
    assert "demo_defaults" in _imported_modules(os.path.join(SRC, "commands.py"))
