"""Lazy package exports (PEP 562): `import realm_hf.index` imports none of its submodules (nor torch or faiss); a
name is imported from its submodule on first access."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, list[str]], cache: bool = True
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    r"""
    Module-level `__getattr__` and `__dir__` (PEP 562) that import a package's public names on first access.

    Args:
        package (`str`): The package's `__name__`.
        exports (`dict`): Submodule (relative name) -> the names it exports through the package.
        cache (`bool`, defaults to `True`): Set a resolved name on the package, so that later accesses skip
            `__getattr__`. `realm_hf` itself does not: each `from realm_hf import X` registers with transformers what
            it has loaded by then (`realm_hf.registration`).

    Returns:
        `(__getattr__, __dir__, __all__)`. `__getattr__` also imports a submodule that is asked for as an attribute,
        such as `realm_hf.index.mips`, which an eager `__init__` would have imported as a side effect.
    """
    owner = {name: submodule for submodule, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        submodule = owner.get(name)
        if submodule is not None:
            value = getattr(importlib.import_module(f".{submodule}", package), name)
            if cache:
                setattr(sys.modules[package], name, value)  # later accesses skip __getattr__
            return value
        if not name.startswith("__"):
            try:
                return importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as error:
                if error.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(owner))

    return __getattr__, __dir__, sorted(owner)
