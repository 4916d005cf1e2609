"""A BM25 baseline over the same blocks as a `RealmIndex`, so Open-QA evaluation can swap dense retrieval for BM25
and keep the reader (`evaluate_open_qa(..., retrieval="bm25")`).

Backed by `bm25s` (pure Python + numpy, MIT): `pip install bm25s` (or `pip install 'realm_hf[bm25]'`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..corpus.store import int_column
from ..utils.quiet import unforce_bm25s_debug


logger = logging.getLogger(__name__)

__all__ = ["Bm25Retriever"]


def _require_bm25s():
    try:
        bm25s = _import_bm25s_without_jax()
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The BM25 baseline needs the `bm25s` package: `pip install bm25s` (or `pip install 'realm_hf[bm25]'`)."
        ) from error
    unforce_bm25s_debug()
    return bm25s


def _import_bm25s_without_jax():
    """`import bm25s`, keeping JAX out when the process has not imported it: bm25s tries `import jax` at import time
    and runs a top-k on JAX's default device, and JAX then pre-allocates 75 % of a GPU's memory by default (a BM25
    evaluation beside two fine-tunings died of CUDA out-of-memory that way). Top-k selection uses numpy here anyway
    (`backend_selection="numpy"`). A JAX the user imported before is left alone."""
    if "bm25s" in sys.modules or "jax" in sys.modules:
        import bm25s

        return bm25s
    sys.modules["jax"] = None  # `import jax` raises ImportError while bm25s is imported; removed right after
    try:
        import bm25s
    finally:
        if sys.modules.get("jax", 0) is None:
            del sys.modules["jax"]
    return bm25s


class Bm25Retriever:
    r"""
    Okapi BM25 over block texts (title + body by default), returning the same `block_id`s as `RealmIndex.search`.

    Text is lowercased and split on `\b\w\w+\b` (bm25s' default: one-character tokens are dropped) with English
    stopwords removed; no stemming.

    Args:
        blocks (`datasets.Dataset`, `RealmIndex`, or a list of dicts): Blocks with `block_id`, `text` and optionally
            `title` (a `RealmIndex` gives its `blocks`).
        include_title (`bool`, defaults to `True`): Index `title + " " + text` (the title is strong evidence of what
            a block is about); `False` indexes the body only.
        k1 (`float`, defaults to 1.5), b (`float`, defaults to 0.75): BM25 parameters.
        stopwords (`str`, defaults to `"en"`): bm25s stopword list (`None` keeps every word).

    Example:

    ```python
    >>> bm25 = Bm25Retriever(index)
    >>> block_ids = bm25.search_text(["who wrote hamlet"], k=5)  # [1, 5] LongTensor
    ```
    """

    def __init__(
        self,
        blocks: Any,
        include_title: bool = True,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: str | None = "en",
    ) -> None:
        bm25s = _require_bm25s()
        blocks = getattr(blocks, "blocks", blocks)  # a RealmIndex
        if isinstance(blocks, list):
            block_ids = np.array([int(row["block_id"]) for row in blocks], dtype=np.int64)
            bodies = [row.get("text") or "" for row in blocks]
            titles = [row.get("title") or "" for row in blocks]
        else:
            if "text" not in blocks.column_names or "block_id" not in blocks.column_names:
                raise ValueError(f"BM25 needs `block_id` and `text` columns, got {blocks.column_names}.")
            block_ids = int_column(blocks, "block_id")
            bodies = list(blocks["text"])
            titles = list(blocks["title"]) if "title" in blocks.column_names else [""] * len(bodies)
        if len(block_ids) == 0:
            raise ValueError("Cannot build BM25 over an empty set of blocks.")
        texts = [f"{t} {x}" if include_title and t else (x or "") for t, x in zip(titles, bodies)]
        self.block_ids = block_ids  # [N]
        self.stopwords = stopwords
        self.include_title = include_title
        began = time.perf_counter()
        self._bm25s = bm25s
        tokens = bm25s.tokenize(texts, stopwords=stopwords, show_progress=False)
        self.model = bm25s.BM25(k1=k1, b=b)
        self.model.index(tokens, show_progress=False)
        logger.info("Built BM25 over %d blocks in %.1fs", len(block_ids), time.perf_counter() - began)

    def __len__(self) -> int:
        return len(self.block_ids)

    def search_text(
        self, questions: Sequence[str], k: int, return_scores: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        r"""
        The `k` best blocks of each question by BM25.

        Args:
            questions (`Sequence[str]`): `B` questions.
            k (`int`): Blocks per question, `1 <= k <= len(self)`.
            return_scores (`bool`): Also return the BM25 scores.

        Returns:
            `torch.LongTensor` of shape `(B, k)`: block ids, best first (and `torch.FloatTensor` scores `(B, k)` with
            `return_scores`). A question sharing no word with the corpus gets score-0 blocks in a fixed order.
        """
        if isinstance(questions, str):
            raise ValueError("search_text takes a list of questions; wrap a single question in a list.")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(self):
            raise ValueError(f"k must be an integer in [1, {len(self)}] (the number of blocks), got {k!r}.")
        for i, question in enumerate(questions):
            if not isinstance(question, str) or not question.strip():
                raise ValueError(f"Question {i} is empty or not a string ({question!r}).")
        if len(questions) == 0:
            empty = torch.empty((0, k), dtype=torch.long)
            return (empty, empty.float()) if return_scores else empty
        query_tokens = self._bm25s.tokenize(
            list(questions), stopwords=self.stopwords, return_ids=False, show_progress=False
        )
        rows, scores = self.model.retrieve(
            query_tokens, k=int(k), show_progress=False, n_threads=1, backend_selection="numpy"
        )  # [B, k]
        ids = torch.from_numpy(self.block_ids[np.asarray(rows, dtype=np.int64)])
        if return_scores:
            return ids, torch.from_numpy(np.asarray(scores, dtype=np.float32))
        return ids
