"""Registration of realm_hf with transformers' public API, in either import order: the configs with
`AutoConfig.register`, the models with `AutoModel.register`, the pipeline tasks ("realm-open-qa" /
"open-domain-question-answering" and "realm-fill-mask") with `PIPELINE_REGISTRY.register_pipeline`
(`realm_hf.pipelines.register_pipelines`).

transformers' Auto mappings and its pipeline registry take classes, not names, and live in modules that import torch
(`configuration_auto`, `modeling_auto`, `transformers.pipelines`: about 4 s together). So `import realm_hf` does not
register everything at once; it

1. registers each part whose transformers module is loaded already ([`register_what_is_loaded`]), and
2. imports transformers' top-level module (lazy: no torch, no model, no pipeline) and watches it
   ([`watch_transformers`]): when transformers later loads `configuration_auto`, `modeling_auto` or its pipelines
   (`from transformers import pipeline`, `AutoModel`, `from transformers.pipelines import ...`, ...), the matching
   part is registered before that import statement returns. The watch is on transformers' own lazy modules only (no
   `sys.meta_path` finder, nothing that sees other imports) and is taken off once all parts are registered.

[`register_auto_classes`] registers everything now.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import threading
import types

__all__ = ["register_auto_classes", "register_what_is_loaded", "watch_transformers"]

PACKAGE = __name__.rpartition(".")[0]
logger = logging.getLogger(__name__)

_LOADED_WHEN = {
    "configs": [
        ("transformers.models.auto.configuration_auto", "AutoConfig"),
        (f"{PACKAGE}.configuration", "RealmForOpenQAConfig"),
    ],
    "models": [
        ("transformers.models.auto.modeling_auto", "AutoModel"),
        (f"{PACKAGE}.modeling.common", "RealmPreTrainedModel"),
    ],
    "pipelines": [("transformers.pipelines", "pipeline")],
}
"""What gets registered -> (module, a name it defines once loaded) of either side: transformers' module it extends, or
realm_hf's classes. When one side is loaded, loading the other costs little (torch is already there for the models)."""
_REGISTRATION_IMPORTS = (f"{PACKAGE}.configuration", f"{PACKAGE}.modeling", f"{PACKAGE}.pipelines")
"""realm_hf's modules that registering imports (`_register`)."""
_registered: set[str] = set()
_registering = threading.Lock()
"""Held while a part registers: registering imports transformers modules, whose binding must not re-enter."""


def _register(part: str) -> None:
    """Register one of `_LOADED_WHEN` (idempotent)."""
    if part in _registered:
        return
    if part == "pipelines":
        from .pipelines import register_pipelines

        register_pipelines()
    elif part == "configs":
        importlib.import_module(f"{PACKAGE}.configuration").register_configs()
    else:
        importlib.import_module(f"{PACKAGE}.modeling.auto").register_models()
    _registered.add(part)


def register_auto_classes() -> None:
    """Register the REALM configs with `AutoConfig`, the models with `AutoModel` and the pipeline tasks with
    `transformers.pipeline` now (idempotent; imports torch and transformers' pipelines)."""
    for part in _LOADED_WHEN:
        _register(part)
    _unwatch()


def _loaded(module_name: str, name: str) -> bool:
    """Whether `module_name` is imported and done executing (a module still running its body may lack its classes)."""
    module = sys.modules.get(module_name)
    return module is not None and hasattr(module, name) and not _initializing(module)


def _initializing(module: types.ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def register_what_is_loaded() -> None:
    """Register each part whose transformers module, or whose realm_hf classes, are loaded already (so registering
    imports little that the program has not). Waits (does nothing) while a module that registering imports (of
    transformers, or realm_hf's configuration, models and pipelines) is still running its body: registering would
    meet it half-made (the next import of transformers, or use of a realm_hf name, registers then). Failures are logged, not raised: they would
    surface in an unrelated import statement."""
    parts = [
        part
        for part, sides in _LOADED_WHEN.items()
        if part not in _registered and any(_loaded(module, name) for module, name in sides)
    ]
    if parts and not any(_initializing(module) for module in _modules_of("transformers", *_REGISTRATION_IMPORTS)):
        if not _registering.acquire(blocking=False):
            return  # called again from an import that registering made (or from another thread registering now)
        try:
            for part in parts:
                try:
                    _register(part)
                except Exception as error:  # noqa: BLE001 - see the docstring
                    logger.warning("realm_hf could not register its %s with transformers: %r", part, error)
        finally:
            _registering.release()
    if len(_registered) < len(_LOADED_WHEN):
        _watch(sys.modules.get("transformers"))  # transformers re-runs its __init__ (processing_utils): a new module
    else:
        _unwatch()


# --------------------------------------------------------------------------------- watching transformers' imports
_lazy_class: type | None = None
"""transformers' lazy module class (`transformers.utils.import_utils._LazyModule`), once transformers is imported."""
_watched: list[types.ModuleType] = []
"""The transformers modules whose class is `WatchedByRealmHF` (the top level can be replaced: the old one stays
watched, for whoever holds it, until everything is registered)."""


def _watch(module: types.ModuleType | None) -> None:
    """Watch `module` if it is one of transformers' lazy modules that is not watched yet."""
    if _lazy_class is None or type(module) is not _lazy_class:
        return
    module.__class__ = _watched_class(_lazy_class)
    _watched.append(module)


def _unwatch() -> None:
    """Give transformers' modules their own class back (everything is registered)."""
    while _watched:
        _watched.pop().__class__ = _lazy_class


@functools.cache
def _watched_class(lazy_class: type) -> type:
    """A subclass of transformers' lazy module class that registers what is loaded after resolving a name or binding a
    submodule (the import system binds `transformers.pipelines` to `transformers` once its body has run)."""

    class WatchedByRealmHF(lazy_class):
        def __getattr__(self, name: str):
            value = super().__getattr__(name)
            register_what_is_loaded()
            return value

        def __setattr__(self, name: str, value) -> None:
            super().__setattr__(name, value)
            if isinstance(value, types.ModuleType):
                _watch(value)  # a lazy subpackage (`transformers.models.auto`) is watched too
                register_what_is_loaded()

        def __reduce__(self):
            reduced = super().__reduce__()
            return (lazy_class, *reduced[1:]) if reduced and reduced[0] is WatchedByRealmHF else reduced

    WatchedByRealmHF.__qualname__ = WatchedByRealmHF.__name__ = lazy_class.__name__  # reprs and logs unchanged
    return WatchedByRealmHF


def _modules_of(*packages: str) -> list[types.ModuleType]:
    """The loaded modules of `packages` (each package and its submodules)."""
    prefixes = tuple(f"{package}." for package in packages)
    return [module for name, module in list(sys.modules.items()) if name in packages or name.startswith(prefixes)]


def watch_transformers() -> None:
    """Import transformers' top-level module (lazy: no torch) and watch it and its loaded lazy subpackages, so that
    the parts not registered yet are registered as soon as transformers loads them, whatever was imported first.
    Does nothing once all parts are registered; a transformers that cannot be imported is logged, not raised."""
    if len(_registered) == len(_LOADED_WHEN):
        return
    try:
        import transformers  # noqa: F401 - its lazy top level only
    except ImportError as error:
        logger.warning("realm_hf cannot register with transformers (import transformers failed): %r", error)
        return
    global _lazy_class
    if type(sys.modules["transformers"]) is types.ModuleType:
        return  # not transformers' lazy module: nothing to watch, registration stays explicit
    _lazy_class = _lazy_class or type(sys.modules["transformers"])
    for module in _modules_of("transformers"):
        _watch(module)
