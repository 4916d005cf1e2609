"""The REALM models in transformers' `AutoConfig` / `AutoModel`: what `realm_hf.registration` and the pipelines'
registration both call."""

from __future__ import annotations

from transformers import AutoModel

from ..configuration import (
    RealmForOpenQAConfig, RealmKnowledgeEncoderConfig, RealmReaderConfig, RealmRetrieverConfig, register_configs,
)
from .knowledge_encoder import RealmKnowledgeEncoder
from .open_qa import RealmForOpenQA
from .reader import RealmReader
from .retriever import RealmRetriever

__all__ = ["REALM_MODELS", "register_models"]

REALM_MODELS = (
    (RealmRetrieverConfig, RealmRetriever),
    (RealmKnowledgeEncoderConfig, RealmKnowledgeEncoder),
    (RealmReaderConfig, RealmReader),
    (RealmForOpenQAConfig, RealmForOpenQA),
)


def register_models() -> None:
    """Register the REALM configs with `AutoConfig` and the models with `AutoModel` (idempotent)."""
    register_configs()
    for config_class, model_class in REALM_MODELS:
        AutoModel.register(config_class, model_class, exist_ok=True)
