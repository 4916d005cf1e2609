"""REALM models: retriever, knowledge-augmented encoder, reader and the Open-QA model.

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "knowledge_encoder": ["RealmKnowledgeEncoder", "marginalize_over_candidates"],
        "open_qa": ["RealmForOpenQA"],
        "outputs": ["RealmForOpenQAOutput", "RealmKnowledgeEncoderOutput", "RealmReaderOutput", "RealmRetrieverOutput"],
        "reader": ["RealmReader"],
        "retriever": ["RealmRetriever"],
    },
)
