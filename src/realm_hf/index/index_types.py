"""The index types the package builds, and nothing else: an `index_type` is checked against them before it reaches
`faiss.index_factory`, whether it comes from a user or from an index's `manifest.json` (a file of a downloaded repo is
not trusted to hold a factory string of its choosing).

The types: `"torch-exact"` (no faiss), the `"compressed"` preset, and the inner-product faiss factory strings of
these shapes:

    Flat | HNSW32 | HNSW32,SQ8 | IVF4096,Flat | IVF4096_HNSW32,PQ32 | IVF4096,PQ64x4fs | IVF4096,SQfp16 | PQ32 | SQ8
    optionally behind a pre-transform  OPQ48_192, | PCAR64,
    and followed by a re-ranking stage ,RFlat | ,Refine(Flat) | ,Refine(SQfp16)

Every number is bounded (faiss would try to allocate what an absurd one asks for: `HNSW100000000` is ~50 GB before
the first vector), whether the string comes from a user (`--index-type`) or from a manifest:

    HNSW<M>                2 <= M <= 256              graph degree (16-64 is usual)
    IVF<nlist>             1 <= nlist <= 1,048,576    and, at build time, <= the vectors it is trained on
    PQ<m>x<nbits>          1 <= m <= 4096 and <= dim  sub-quantizers; 1 <= nbits <= 16 (faiss's own limit),
                                                      fs (fast scan) only with x4; at build time 2**nbits <= the
                                                      training vectors
    OPQ<m>_<d>, PCA(R)<d>  1 <= m, d <= 4096          m <= d; a PCA output dim <= the input dim (when known)

The dims and the number of vectors are known to the build ([`FaissBackend.build`]) and the manifest (its `dim`); the
command-line check knows neither and applies the fixed bounds only.
"""

from __future__ import annotations

import re

from .compressed import COMPRESSED

__all__ = [
    "TORCH_EXACT", "INDEX_TYPE_EXAMPLES", "index_type_problem", "is_supported_index_type",
    "unsupported_index_type_message",
]

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

MAX_HNSW_M = 256
MAX_NLIST = 1 << 20
MAX_PQ_NBITS = 16
MAX_DIM = 4096
"""Bounds of the numbers of a factory string (see the module docstring)."""

_NUMBERED = re.compile(
    r"(?<![A-Za-z])(?P<kind>OPQ|PCAR|PCA|HNSW|IVF|PQ)(?P<n>\d+)(?:x(?P<bits>\d+))?(?P<fs>fs)?(?:_(?P<d>\d+)(?=,))?"
)


def index_type_problem(index_type: str, dim: int | None = None, num_vectors: int | None = None) -> str | None:
    r"""
    What is wrong with the numbers of a factory string that has a supported shape, or None (see the module docstring).

    Args:
        index_type (`str`): The factory string.
        dim (`int`, *optional*): The dimension of the vectors, when known.
        num_vectors (`int`, *optional*): The number of vectors the index is trained on, when known (the build).

    Returns:
        `str`: e.g. `"HNSW M=100000000 is above 256 (16-64 is usual)"`, or None.
    """
    for token in _NUMBERED.finditer(index_type):
        kind, n = token["kind"], int(token["n"])
        if kind == "HNSW" and not 2 <= n <= MAX_HNSW_M:
            return f"HNSW M={n} is outside 2..{MAX_HNSW_M} (the graph degree; 16-64 is usual)"
        if kind == "IVF":
            if not 1 <= n <= MAX_NLIST:
                return f"IVF nlist={n} is outside 1..{MAX_NLIST} (about 4-16 x sqrt(number of blocks) is usual)"
            if num_vectors is not None and n > num_vectors:
                return f"IVF nlist={n} is more than the {num_vectors} vectors it is trained on"
        if kind == "PQ":
            bits = int(token["bits"]) if token["bits"] is not None else 8
            if not 1 <= n <= MAX_DIM or (dim is not None and n > dim):
                return f"PQ m={n} is outside 1..{min(MAX_DIM, dim or MAX_DIM)} (sub-quantizers, at most the dim)"
            if not 1 <= bits <= MAX_PQ_NBITS:
                return f"PQ nbits={bits} is outside 1..{MAX_PQ_NBITS} (faiss's limit; 8 is usual)"
            if token["fs"] and bits != 4:
                return f"PQ{n}fs needs 4 bits a code: write PQ{n}x4fs"
            if num_vectors is not None and (1 << bits) > num_vectors:
                return f"PQ nbits={bits} needs {1 << bits} training vectors, it is trained on {num_vectors}"
        if kind in ("OPQ", "PCA", "PCAR"):
            out = int(token["d"]) if token["d"] is not None else None
            for name, value in (("m", n if kind == "OPQ" else None), ("d", out if kind == "OPQ" else n)):
                if value is not None and not 1 <= value <= MAX_DIM:
                    return f"{kind} {name}={value} is outside 1..{MAX_DIM}"
            if kind == "OPQ" and out is not None and n > out:
                return f"OPQ m={n} is more than its output dim d={out}"
            if kind != "OPQ" and dim is not None and n > dim:
                return f"{kind} output dim {n} is more than the input dim {dim}"
    return None


def is_supported_index_type(index_type: object, dim: int | None = None, num_vectors: int | None = None) -> bool:
    """Whether `index_type` is one the package builds, its numbers within bounds (see the module docstring)."""
    if not isinstance(index_type, str):
        return False
    if index_type in (TORCH_EXACT, COMPRESSED):
        return True
    return _FACTORY.fullmatch(index_type) is not None and index_type_problem(index_type, dim, num_vectors) is None


def unsupported_index_type_message(
    index_type: object, where: str, dim: int | None = None, num_vectors: int | None = None
) -> str:
    r"""
    The one-line refusal of an index type the package does not build.

    Args:
        index_type (`object`): The value given (a manifest may hold anything).
        where (`str`): Where it was given, e.g. `"--index-type"` or `"index_type of /path/manifest.json"`.
        dim, num_vectors (`int`, *optional*): What [`index_type_problem`] checks the numbers against.
    """
    shown = repr(index_type)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    if isinstance(index_type, str) and _FACTORY.fullmatch(index_type) is not None:
        problem = index_type_problem(index_type, dim, num_vectors)
        if problem is not None:
            return (
                f"{where} {shown} is not an index type realm_hf builds: {problem}; use smaller numbers, as in "
                f"{INDEX_TYPE_EXAMPLES}."
            )
    return f"{where} {shown} is not an index type realm_hf builds; use one such as {INDEX_TYPE_EXAMPLES}."
