"""The index types the package builds, and nothing else: an `index_type` is checked against them before it reaches
`faiss.index_factory`, whether it comes from a user or from an index's `manifest.json` (a file of a downloaded repo is
not trusted to hold a factory string of its choosing).

The types: `"torch-exact"` (no faiss), the `"compressed"` preset, and the inner-product faiss factory strings of
these shapes (numbers free):

    Flat | HNSW32 | HNSW32,SQ8 | IVF4096,Flat | IVF4096_HNSW32,PQ32 | IVF4096,PQ64x4fs | IVF4096,SQfp16 | PQ32 | SQ8
    optionally behind a pre-transform  OPQ48_192, | PCAR64,
    and followed by a re-ranking stage ,RFlat | ,Refine(Flat) | ,Refine(SQfp16)
"""

from __future__ import annotations

import re

from .compressed import COMPRESSED

__all__ = ["TORCH_EXACT", "INDEX_TYPE_EXAMPLES", "is_supported_index_type", "unsupported_index_type_message"]

TORCH_EXACT = "torch-exact"
"""Exact search with a torch matmul and top-k (no faiss)."""

_CODES = r"(?:Flat|PQ\d+(?:x\d+)?(?:fs|np)?|SQ(?:4|6|8|fp16|bf16))"
_BASE = rf"(?:{_CODES}|HNSW\d+(?:[_,]{_CODES})?|IVF\d+(?:_HNSW\d+)?,{_CODES})"
_FACTORY = re.compile(rf"(?:OPQ\d+(?:_\d+)?,|PCAR?\d+,)?{_BASE}(?:,RFlat|,Refine\({_CODES}\))?")

INDEX_TYPE_EXAMPLES = (
    f"Flat, HNSW32, IVF1024,PQ32, IVF1024,PQ32,RFlat, IVF1024,SQ8, SQfp16, {COMPRESSED} (the ~64 bytes/block preset) "
    f"or {TORCH_EXACT} (no faiss)"
)
"""The index types named in messages."""


def is_supported_index_type(index_type: object) -> bool:
    """Whether `index_type` is one the package builds (see the module docstring)."""
    if not isinstance(index_type, str):
        return False
    return index_type in (TORCH_EXACT, COMPRESSED) or _FACTORY.fullmatch(index_type) is not None


def unsupported_index_type_message(index_type: object, where: str) -> str:
    r"""
    The one-line refusal of an index type the package does not build.

    Args:
        index_type (`object`): The value given (a manifest may hold anything).
        where (`str`): Where it was given, e.g. `"--index-type"` or `"index_type of /path/manifest.json"`.
    """
    shown = repr(index_type)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{where} {shown} is not an index type realm_hf builds; use one such as {INDEX_TYPE_EXAMPLES}."
