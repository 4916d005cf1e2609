"""The `index_type="compressed"` preset: maximum inner product search as L2 search over IVF + residual PQ codes.

faiss trains the IVF centroids of an inner-product index with spherical k-means, so on embeddings that are not
normalized the product-quantizer codes have to encode nearly the whole vector instead of a small residual. The
preset turns MIPS into nearest-neighbour search first (Bachrach et al., 2014): a document `x` gets one extra
coordinate `s = sqrt(M² - |x|²)` (`M`, the largest norm of the corpus), a query gets a 0, so that

    |q' - x'|² = |q|² + M² - 2 q·x

for every document: the L2 ranking is the inner-product ranking. In that space L2 k-means centroids and PQ codes of
the residuals do what they are made for. Inside faiss, a fixed linear map (saved with the index) places the
coordinates of `x` into `m - 1` PQ sub-vectors, as evenly as they go (for 128 dims: 26 of 3 and 25 of 2, the unused
slots 0), and gives `s` a sub-vector of its own, so the norm, on which every distance depends, is coded at 8-bit
precision instead of sharing a codeword with other coordinates.

The codes alone lose recall; the default `rerank=100` re-scores the best 100 candidates exactly from the stored,
memory-mapped embeddings (see `RealmIndex.approximate_search`) to win it back. On real embeddings of a small corpus
the preset recalls less than other types and searches slower than exact search: use `IVF...,SQ8` or `Flat` there
until the corpus is much larger. Recall and queries/s against exact search: benchmarks/results/index.md.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from .faiss_loader import import_faiss


logger = logging.getLogger(__name__)

COMPRESSED = "compressed"
CODE_BYTES = 52  # PQ codes per block; + 8 bytes of id + ~3 of centroids and codebooks: <= 64 B/block from ~200k blocks
LIST_SIZE = 256  # blocks per inverted list: nlist = N / 256 (3906 lists at 1M)
DEFAULT_NPROBE = 8
DEFAULT_RERANK = 100  # candidates per query re-scored with the stored embeddings (RealmIndex.approximate_search)
MIN_BLOCKS = 256  # each 8-bit PQ codebook has 256 entries to train


class MipsToL2:
    r"""
    The transform that turns maximum inner product search into L2 nearest-neighbour search.

    Documents `x` become `[x, sqrt(M² - |x|²)]` and queries `q` become `[q, 0]`, so that
    `|q' - x'|² = |q|² + M² - 2 q·x` for every document of norm at most `M`.

    Args:
        dim (`int`): Dimension `D` of the embeddings.
        max_norm (`float`): `M`, the largest document norm. A document added later with a larger norm gets `s = 0`
            and ranks lower than its inner product says (a warning names the fix: rebuild the index).
    """

    def __init__(self, dim: int, max_norm: float) -> None:
        if not math.isfinite(max_norm) or max_norm < 0:
            raise ValueError(f"max_norm must be a finite number >= 0, got {max_norm!r}.")
        self.dim = int(dim)
        self.max_norm = float(max_norm)

    @classmethod
    def fit(cls, embeddings: np.ndarray, chunk_size: int = 65_536) -> MipsToL2:
        r"""
        The transform for a corpus: `M` is the largest row norm of `embeddings` (read in chunks: it may be
        memory-mapped).

        Args:
            embeddings (`np.ndarray` of shape `(N, D)`): The document embeddings.
            chunk_size (`int`, defaults to 65536): Rows read at a time.
        """
        max_norm = 0.0
        for start in range(0, len(embeddings), chunk_size):
            rows = np.asarray(embeddings[start : start + chunk_size], dtype=np.float32)  # [C, D]
            max_norm = max(max_norm, float(np.sqrt((rows * rows).sum(axis=1).max(initial=0.0))))
        return cls(embeddings.shape[1], max_norm)

    def _check(self, vectors: np.ndarray, what: str) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(
                f"{what} must have shape [N, {self.dim}] (the dim the compressed index was built with), got "
                f"{list(vectors.shape)}. Rebuild the index with RealmIndex.build(...) for another embedding size."
            )
        return vectors

    def documents(self, embeddings: np.ndarray) -> np.ndarray:
        """`[N, D]` documents -> `[N, D + 1]` points at distance `M` from the origin."""
        x = self._check(embeddings, "document embeddings")  # [N, D]
        slack = self.max_norm**2 - (x * x).sum(axis=1)  # [N]
        if (slack < -1e-4 * max(self.max_norm**2, 1.0)).any():
            logger.warning(
                "%d documents are longer than the norm M=%.4g the compressed index was built with; they rank lower "
                "than their inner products say. Rebuild the index to include them exactly.",
                int((slack < 0).sum()),
                self.max_norm,
            )
        return np.hstack([x, np.sqrt(np.maximum(slack, 0.0))[:, None]])  # [N, D + 1]

    def queries(self, queries: np.ndarray) -> np.ndarray:
        """`[B, D]` queries -> `[B, D + 1]`, with a 0 in the extra coordinate."""
        q = self._check(queries, "query embeddings")  # [B, D]
        return np.hstack([q, np.zeros((len(q), 1), dtype=np.float32)])  # [B, D + 1]

    def inner_products(self, queries: np.ndarray, distances: np.ndarray) -> np.ndarray:
        """Squared L2 distances `[B, k]` in the transformed space -> inner products `q·x` `[B, k]`."""
        q = self._check(queries, "query embeddings")  # [B, D]
        return 0.5 * ((q * q).sum(axis=1, keepdims=True) + self.max_norm**2 - distances)  # [B, k]


def compressed_faiss_index(dim: int, num_vectors: int) -> Any:
    r"""
    The untrained faiss index of the preset, over `MipsToL2` outputs of `dim + 1` coordinates, with `METRIC_L2`.

    `LinearTransform` (fixed placement of the `dim` coordinates into `m - 1` sub-vectors of `dsub` slots, the extra
    coordinate alone in the last one; distances are unchanged) -> `IndexIVFPQ` (L2 k-means centroids,
    `num_vectors / 256` lists, PQ of the residuals, `m = 52` sub-quantizers of 8 bits). Block ids are stored by the
    IVF lists (8 bytes each).

    Args:
        dim (`int`): Embedding dimension `D`.
        num_vectors (`int`): Corpus size, which sets the number of inverted lists.
    """
    faiss = import_faiss()
    if num_vectors < MIN_BLOCKS:
        raise ValueError(
            f"index_type='compressed' needs at least {MIN_BLOCKS} blocks to train its 8-bit codebooks, got "
            f"{num_vectors}; use index_type='Flat' for a corpus this small."
        )
    m = CODE_BYTES
    # coordinates per data sub-vector: D / (m - 1), rounded up for the first D % (m - 1) of them
    sizes = [dim // (m - 1) + (j < dim % (m - 1)) for j in range(m - 1)]
    dsub = max(sizes[0], 1)
    matrix = np.zeros((dsub * m, dim + 1), dtype=np.float32)  # [d_out, D + 1], a 0/1 placement
    column = 0
    for j, size in enumerate(sizes):
        for slot in range(size):
            matrix[j * dsub + slot, column] = 1.0
            column += 1
    matrix[(m - 1) * dsub, dim] = 1.0  # s -> first slot of the last sub-vector, whose other slots stay 0
    transform = faiss.LinearTransform(dim + 1, dsub * m, False)
    faiss.copy_array_to_vector(matrix.ravel(), transform.A)
    transform.is_trained = True
    nlist = max(1, round(num_vectors / LIST_SIZE))
    ivf = faiss.IndexIVFPQ(faiss.IndexFlatL2(dsub * m), dsub * m, nlist, m, 8)
    ivf.do_polysemous_training = False
    return faiss.IndexPreTransform(transform, ivf)  # faiss's wrapper keeps `transform` and `ivf` alive with it
