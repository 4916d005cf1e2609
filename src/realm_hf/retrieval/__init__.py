"""Where a model's retriever meets a corpus index: load the retriever of any saved model or BERT, build an index of a
corpus with its document tower, search it with its query tower, and add articles to a trained model's index
(knowledge updates, REALM paper Appendix C).

This room sits above `realm_hf.modeling` and `realm_hf.index`: the index knows models only through an "embed these
token batches" callable, so what needs both (a model *and* its index) lives here.

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "indexing": ["build_index", "search"],
        "knowledge_updates": ["add_articles_to_index"],
        "loading": ["load_retriever"],
    },
)
