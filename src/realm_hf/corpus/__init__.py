"""Corpus: articles -> REALM blocks (Arrow datasets), block lookup by id, and the small embedded demo corpus."""

from .articles import load_articles
from .blocks import split_into_blocks, split_sentences
from .embedded import load_embedded_corpus
from .store import BlockStore


__all__ = ["BlockStore", "load_articles", "load_embedded_corpus", "split_into_blocks", "split_sentences"]
