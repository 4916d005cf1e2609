"""Corpus: articles -> REALM blocks (Arrow datasets), block lookup by id, and the small embedded demo corpus.

The names below are imported from their submodules on first access (see `realm_hf`).
"""

from ..utils.lazy import lazy_exports


__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "articles": ["load_articles", "load_corpus_articles"],
        "blocks": ["split_into_blocks", "split_sentences"],
        "embedded": ["load_embedded_corpus"],
        "store": ["BlockStore", "RaggedRows"],
    },
)
