"""A tokenizer's fingerprint for cache keys: what it does to text, not where it was loaded from."""

from __future__ import annotations

import json
from typing import Any

import xxhash
from datasets.fingerprint import Hasher

_CALL_STATE = ("truncation", "padding")
"""Fields of the serialized pipeline that are the settings of the last call (transformers sets both on every call),
not what the tokenizer does: a tokenizer keeps its fingerprint once used, and a copy saved after use (a pre-training
output) has the fingerprint of the one it was saved from as loaded."""


def tokenizer_fingerprint(tokenizer: Any) -> str:
    r"""
    A key that is equal for tokenizers that cut text into the same ids: the fast tokenizer's serialized pipeline
    (normalizer, pre-tokenizer, vocabulary, added tokens, post-processor) without the truncation and padding of its
    last call, so the same vocabulary loaded from two model directories (a pre-training output, the packaged MiniLM)
    shares the caches of blocks and masked sentences, used or not. Tokenizers without a Rust backend fall back to
    hashing the object (which includes its path).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return Hasher.hash(tokenizer)
    pipeline = json.loads(backend.to_str())
    for name in _CALL_STATE:
        pipeline.pop(name, None)
    return xxhash.xxh64(json.dumps(pipeline, sort_keys=True).encode("utf-8")).hexdigest()
