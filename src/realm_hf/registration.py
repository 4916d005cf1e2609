"""Explicit registration of realm_hf with transformers' public API: the configs with `AutoConfig.register`, the models
with `AutoModel.register`, the pipeline tasks with `PIPELINE_REGISTRY.register_pipeline`
(`realm_hf.pipelines.register_pipelines`).

transformers' Auto mappings take classes, not names: registering imports the classes (torch for the models,
transformers' pipelines for the tasks). So `import realm_hf` registers only what is cheap to register then: each part
whose transformers module the program has already imported ([`register_what_is_loaded`], run again on first use of a
realm_hf name); [`register_auto_classes`] registers everything. No import hook is installed.
"""

from __future__ import annotations

import importlib
import logging
import sys

__all__ = ["register_auto_classes", "register_what_is_loaded"]

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
_registered: set[str] = set()


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


def register_what_is_loaded() -> None:
    """Register each part whose transformers module, or whose realm_hf classes, are loaded already (so registering
    imports little that the program has not). Failures are logged, not raised: they would surface in an unrelated
    import statement."""
    for part, sides in _LOADED_WHEN.items():
        if part in _registered or not any(hasattr(sys.modules.get(module), name) for module, name in sides):
            continue
        try:
            _register(part)
        except Exception as error:  # noqa: BLE001 - see the docstring
            logger.warning("realm_hf could not register its %s with transformers: %r", part, error)
