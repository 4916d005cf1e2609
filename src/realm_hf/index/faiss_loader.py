"""faiss, imported on first use: the indexes and the option checks work without it until a faiss index type is asked
for, and then say which extra installs it."""

from __future__ import annotations

from typing import Any

from ..utils.quiet import quiet_faiss_loader


def import_faiss() -> Any:
    """Import faiss lazily, naming the extra that installs it when missing."""
    quiet_faiss_loader()  # its INFO lines name every instruction-set build it tries, failures included
    try:
        import faiss
    except ImportError as err:
        raise ImportError(
            "faiss is needed for faiss index types (Flat, HNSW32, IVF...,PQ..., SQfp16). Install it with "
            "`pip install 'realm_hf[faiss-cpu]'` (or `realm_hf[faiss-gpu]`), or use index_type='torch-exact'."
        ) from err
    return faiss
