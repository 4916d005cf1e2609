"""A tokenizer's fingerprint for cache keys: what it does to text, not where it was loaded from."""

from __future__ import annotations

from typing import Any

import xxhash
from datasets.fingerprint import Hasher


def tokenizer_fingerprint(tokenizer: Any) -> str:
    r"""
    A key that is equal for tokenizers that cut text into the same ids: the fast tokenizer's serialized pipeline
    (normalizer, pre-tokenizer, vocabulary, post-processor), so the same vocabulary loaded from two model
    directories (a pre-training output, the packaged MiniLM) shares the caches of blocks and masked sentences.
    Tokenizers without a Rust backend fall back to hashing the object (which includes its path).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return Hasher.hash(tokenizer)
    return xxhash.xxh64(backend.to_str().encode("utf-8")).hexdigest()
