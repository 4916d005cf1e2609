"""realm_hf: REALM (Retrieval-Augmented Language Model pre-training) for the Hugging Face ecosystem.

`import realm_hf` is cheap: it imports none of torch, transformers, datasets or faiss. Each public name is imported
from its submodule on first access (`from realm_hf import RealmRetriever` loads the models then); the subpackages
(`realm_hf.index`, `realm_hf.corpus`, ...) work the same way.

Registration with transformers (the configs with `AutoConfig`, the models with `AutoModel`, the pipelines
"open-domain-question-answering" and "realm-fill-mask" with `transformers.pipeline`) happens as soon as transformers
has loaded the machinery it extends: at `import realm_hf` when transformers' Auto classes / pipelines are already
loaded, otherwise right after transformers imports them. So `import realm_hf` then
`AutoModel.from_pretrained(<a realm_hf model directory>)` or `pipeline("open-domain-question-answering", ...)` work
as with an eager import, in either import order. [`register_auto_classes`] registers everything explicitly.

How: until everything is registered, a meta path finder wraps the loaders of `transformers` and `realm_hf` modules.
When one of them finishes executing and no other is half-imported (registering imports our models, which import
transformers' modeling modules: it cannot run in the middle of one of those), the pending registrations whose
transformers module is loaded are done. Failures there are logged, not raised: they would surface in somebody
else's import statement.
"""

from __future__ import annotations

import copy
import functools
import importlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any


__version__ = "0.1.0.dev0"

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------- lazy names
def _lazy_exports(
    package: str, exports: dict[str, list[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    r"""
    Module-level `__getattr__` and `__dir__` (PEP 562) that import a package's public names on first access.

    Args:
        package (`str`): The package's `__name__`.
        exports (`dict`): Submodule (relative name) -> the names it exports through the package.

    Returns:
        `(__getattr__, __dir__, __all__)`. `__getattr__` also imports a submodule that is asked for as an attribute,
        such as `realm_hf.index.mips`, which an eager `__init__` would have imported as a side effect.
    """
    owner = {name: submodule for submodule, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        submodule = owner.get(name)
        if submodule is not None:
            value = getattr(importlib.import_module(f".{submodule}", package), name)
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


_EXPORTS = {
    "configuration": ["RealmForOpenQAConfig", "RealmKnowledgeEncoderConfig", "RealmReaderConfig", "RealmRetrieverConfig"],
    # the corpus index a model retrieves from (data, not weights; imports faiss only when used)
    "index": ["RealmIndex"],
    "modeling": [
        "RealmForOpenQA",
        "RealmForOpenQAOutput",
        "RealmKnowledgeEncoder",
        "RealmKnowledgeEncoderOutput",
        "RealmReader",
        "RealmReaderOutput",
        "RealmRetriever",
        "RealmRetrieverOutput",
    ],
    "pipelines": ["OpenDomainQuestionAnsweringPipeline", "RealmFillMaskPipeline", "register_pipelines"],
}
__getattr__, __dir__, __all__ = _lazy_exports(__name__, _EXPORTS)
__all__ += ["register_auto_classes"]


# ------------------------------------------------------------------------------- registration with transformers
_AUTO_CLASSES = (
    ("RealmRetrieverConfig", "RealmRetriever"),
    ("RealmKnowledgeEncoderConfig", "RealmKnowledgeEncoder"),
    ("RealmReaderConfig", "RealmReader"),
    ("RealmForOpenQAConfig", "RealmForOpenQA"),
)
# what gets registered -> the transformers module it extends (registering earlier would import it, and torch)
_REGISTRATION_TRIGGERS = {
    "configs": "transformers.models.auto.configuration_auto",
    "models": "transformers.models.auto.modeling_auto",
    "pipelines": "transformers.pipelines",
}
_registered: set[str] = set()
_executing: dict[str, int] = {}  # watched modules being executed right now (all threads) -> nesting count
_state_lock = threading.Lock()  # guards the two above and _registering; never held while importing
_registering = False


def _register(part: str) -> None:
    """Register one of `_REGISTRATION_TRIGGERS` (idempotent: transformers is told `exist_ok=True`)."""
    if part == "pipelines":
        from .pipelines import register_pipelines

        register_pipelines()
        return
    from transformers import AutoConfig, AutoModel

    from . import configuration

    if part == "configs":
        for config_name, _ in _AUTO_CLASSES:
            config_class = getattr(configuration, config_name)
            AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    else:
        from . import modeling

        for config_name, model_name in _AUTO_CLASSES:
            AutoModel.register(getattr(configuration, config_name), getattr(modeling, model_name), exist_ok=True)


def register_auto_classes() -> None:
    """Register the configs with `AutoConfig`, the models with `AutoModel` and the pipeline tasks now (idempotent)."""
    for part in _REGISTRATION_TRIGGERS:
        if part not in _registered:
            _register(part)
            _registered.add(part)
    _RegistrationFinder.uninstall()


def _register_pending() -> None:
    """Register what transformers has loaded the machinery for, unless an import of ours or its is half done."""
    global _registering
    with _state_lock:
        if _registering or _executing:
            return
        _registering = True
    try:
        for part, trigger in _REGISTRATION_TRIGGERS.items():
            if part not in _registered and trigger in sys.modules:
                try:
                    _register(part)
                except Exception as error:  # noqa: BLE001 - raised inside somebody else's import statement
                    logger.warning("realm_hf could not register its %s with transformers yet: %r", part, error)
                    continue
                _registered.add(part)
    finally:
        with _state_lock:
            _registering = False
    if len(_registered) == len(_REGISTRATION_TRIGGERS):
        _RegistrationFinder.uninstall()


def _execute_watched(loader: Any, module: Any) -> None:
    """`loader.exec_module(module)`, counted in `_executing`, then `_register_pending`."""
    name = module.__name__
    with _state_lock:
        _executing[name] = _executing.get(name, 0) + 1
    try:
        loader.exec_module(module)
    finally:
        with _state_lock:
            _executing[name] -= 1
            if not _executing[name]:
                del _executing[name]
    _register_pending()


class _RegistrationFinder:
    """A `sys.meta_path` finder that finds nothing itself: it wraps the loaders other finders return for the
    `transformers` and `realm_hf` modules so that their completion calls `_register_pending`."""

    _WATCHED = ("transformers.", "realm_hf.")

    @classmethod
    def install(cls) -> None:
        if not any(isinstance(finder, cls) for finder in sys.meta_path):
            sys.meta_path.insert(0, cls())

    @classmethod
    def uninstall(cls) -> None:
        sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, cls)]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "transformers" and not fullname.startswith(self._WATCHED):
            return None
        try:
            later = sys.meta_path[sys.meta_path.index(self) + 1 :]
        except ValueError:  # uninstalled by another thread
            return None
        for finder in later:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            try:
                watched = copy.copy(spec.loader)
                watched.exec_module = functools.partial(_execute_watched, spec.loader)
            except (TypeError, AttributeError):  # a loader that cannot be copied or given attributes: unwatched
                return spec
            spec.loader = watched
        return spec


_RegistrationFinder.install()
_register_pending()  # transformers' Auto classes / pipelines may be loaded already
